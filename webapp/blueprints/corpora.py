"""Corpora: upload (form and JSON API), the corpus page, and starting a training job from it."""

from __future__ import annotations

import io

from flask import (
    Blueprint,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue

from webapp.blueprints.pages import (
    corpus_json,
    get_corpus_or_404,
    render_corpus,
    render_home,
    require_training_allowed,
)
from webapp.jobs import get_jobs, parse_settings
from webapp.plumbing import owners
from webapp.plumbing.inputs import box_text, json_body
from webapp.plumbing.security import API_TYPE_MESSAGE, Forbidden, bearer_token
from webapp.refusals import UserError, human_bytes
from webapp.storage import db, faults
from webapp.storage.manage import clean_name
from webapp.storage.models import Corpus
from webapp.storage.uploads import (
    ByteReader,
    ConnectionDropped,
    CountingReader,
    UploadTooLarge,
    clean_display,
    normalize_stream,
    store_corpus,
)

bp = Blueprint("corpora", __name__)
DEFAULT_NAME = "Untitled corpus"


def _ingest(
    stream: ByteReader,
    *,
    name: str | None,
    filename: str | None,
    expected_length: int | None = None,
) -> tuple[Corpus, bool]:
    """Validate a body stream and store it; the temporary file goes whatever happens."""
    config = current_app.config
    upload = normalize_stream(
        stream, limit=config["MAX_UPLOAD_BYTES"], tmp_dir=config["UPLOAD_TMP_DIR"]
    )
    try:
        if expected_length is not None and stream.tell() < expected_length:
            raise ConnectionDropped()
        # A name keeps its slashes ("2024/25 news"); only a filename loses its folders.
        display_name = clean_name(name, what="corpus", allow_empty=True)
        display_file = clean_display(filename, max_length=255) or None
        return store_corpus(
            db.get_db(),
            upload,
            name=display_name or display_file or DEFAULT_NAME,
            filename=display_file,
            owner_id=owners.owner_id_for_write(),
        )
    finally:
        upload.discard()


def _form_source() -> tuple[ByteReader, str | None]:
    """The uploaded file if one was chosen, else the pasted text."""
    try:
        upload = request.files.get("file")
        text = box_text(request.form)
    except OSError as exc:
        if faults.classify(exc) is not None:
            raise  # the form parser could not spool the file: storage, not the client
        raise ConnectionDropped() from None
    if upload is not None and upload.filename:
        return upload.stream, upload.filename
    if text:
        data = text.encode("utf-8")
        limit = current_app.config["MAX_PASTE_BYTES"]
        if len(data) > limit:
            raise UploadTooLarge(
                f"The pasted text is larger than the limit of {human_bytes(limit)};"
                " upload it as a file instead."
            )
        return io.BytesIO(data), None
    raise UserError("Choose a file to upload or paste some text.")


@bp.post("/corpora")
def upload() -> ResponseReturnValue:
    try:
        stream, filename = _form_source()
        corpus, _created = _ingest(stream, name=request.form.get("name"), filename=filename)
    except UserError as exc:
        form = {"name": request.form.get("name", "")}
        if request.headers.get("HX-Request"):
            # htmx sent the form (with upload progress): answer with the form and its message.
            html = render_template("_upload_form.html", form=form, upload_error=exc.message)
            return html, exc.status
        return render_home(error=exc.message, status=exc.status, form=form)
    target = url_for("corpora.show", slug=corpus.slug)
    if request.headers.get("HX-Request"):
        return "", 204, {"HX-Redirect": target}
    return redirect(target, code=303)


@bp.post("/api/corpora")
def api_upload() -> ResponseReturnValue:
    """JSON API: a JSON body {"text", "name"}, a multipart form, or the raw text as the body
    (name and filename then come from the query string)."""
    expected = None  # for a raw body: the Content-Length the client promised
    if request.mimetype == "multipart/form-data":
        stream, filename = _form_source()
        name = request.form.get("name")
    elif request.is_json:
        data = json_body('{"text": "hello hello", "name": "tiny"}')
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise UserError('Send a JSON object with a "text" string (and an optional "name").')
        stream, filename = io.BytesIO(data["text"].encode("utf-8")), data.get("filename")
        name = data.get("name")
    else:
        if bearer_token() is None:  # a body browsers send cross-site without asking
            raise Forbidden(API_TYPE_MESSAGE)
        stream, filename = CountingReader(request.stream), request.args.get("filename")
        name = request.args.get("name")
        expected = request.content_length
    corpus, created = _ingest(
        stream,
        name=name if isinstance(name, str) else None,
        filename=filename if isinstance(filename, str) else None,
        expected_length=expected,
    )
    body = corpus_json(corpus)
    body["created"] = created
    # Only when this upload made its owner: the one time the token is handed out.
    token = owners.new_owner_token()
    body["owner_token"] = token
    body["owner_link"] = owners.owner_link(token) if token else None
    return jsonify(body), 201 if created else 200


@bp.get("/c/<slug>")
def show(slug: str) -> ResponseReturnValue:
    return render_corpus(get_corpus_or_404(slug))


@bp.post("/c/<slug>/train")
def train(slug: str) -> ResponseReturnValue:
    corpus = get_corpus_or_404(slug)
    require_training_allowed(corpus)
    try:
        settings = parse_settings(request.form.to_dict())
        job_id = get_jobs().submit(corpus.id, settings, owner_id=owners.owner_id_for_write())
    except UserError as exc:
        return render_corpus(
            corpus, error=exc.message, status=exc.status, form=request.form.to_dict()
        )
    return redirect(url_for("jobs.show", slug=corpus.slug, job_id=job_id), code=303)
