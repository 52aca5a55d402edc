"""Importing a tokeniser file: the "Import a tokeniser" form beside the upload form, its job
page, and its API.

- `POST /import` (multipart: `file`, optional `sidecar`, `pattern`): queues the import as a
  background job (webapp/jobs/imports.py) and answers at once with the job's page,
  `/imports/<id>`, which follows it (htmx polls `/imports/<id>/status`) and links the new
  tokeniser when it is stored; a refused file ends the job with the library's reason. What can
  be told without reading the file (no file, empty, too large) re-renders the home page (4xx).
- `POST /imports/<id>/cancel`: its owner only.
- `POST /api/tokenizers/import`: the same fields. A file of at most BPE_API_SYNC_IMPORT_MB is
  imported in the request (201 with the tokeniser's JSON, 422 when refused); a larger one is
  queued like the form's (202, `Location` the job's JSON, `GET /api/imports/<id>`), so no
  request does unbounded work.

Whoever imports owns the tokeniser (and the job), as an upload makes its corpus theirs: a
visitor with no owner yet becomes one, and the API's answer hands the new owner's token out
once.
"""

from __future__ import annotations

from typing import Any

from flask import (
    Blueprint,
    abort,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import FileStorage

import bpe
from bpe.formats import TokenizerFileError
from bpe.import_tiktoken import check_given_pattern, parse_sidecar
from bpe.importers import import_bytes
from webapp.blueprints.pages import render_home
from webapp.content.imports import store_upload
from webapp.jobs import get_imports
from webapp.jobs.imports import PHASES
from webapp.plumbing import owners
from webapp.refusals import UserError, human_bytes
from webapp.storage import db
from webapp.storage.import_jobs import get_import_job
from webapp.storage.models import ImportJob, Tokenizer

bp = Blueprint("imports", __name__)


@bp.post("/import")
def import_form() -> ResponseReturnValue:
    try:
        upload = _read_request()
    except UserError as exc:
        return render_home(import_error=exc.message, status=exc.status)
    job_id = get_imports().submit(**upload, owner_id=owners.owner_id_for_write())
    return redirect(url_for("imports.show", job_id=job_id), code=303)


@bp.get("/imports/<int:job_id>")
def show(job_id: int) -> ResponseReturnValue:
    job = _own_job_or_404(job_id)
    if request.headers.get("HX-Request"):
        return render_template("imports/_status.html", job=job, phases=PHASES)
    return render_template("imports/show.html", job=job, phases=PHASES)


@bp.get("/imports/<int:job_id>/status")
def status(job_id: int) -> ResponseReturnValue:
    return render_template("imports/_status.html", job=_own_job_or_404(job_id), phases=PHASES)


@bp.post("/imports/<int:job_id>/cancel")
def cancel(job_id: int) -> ResponseReturnValue:
    job = _own_job_or_404(job_id)
    get_imports().request_cancel(job.id)
    if request.headers.get("HX-Request"):
        return render_template("imports/_status.html", job=_fresh_job(job_id), phases=PHASES)
    return redirect(url_for("imports.show", job_id=job.id), code=303)


@bp.post("/api/tokenizers/import")
def import_api() -> ResponseReturnValue:
    upload = _read_request()
    if len(upload["raw"]) > current_app.config["API_SYNC_IMPORT_BYTES"]:
        job_id = get_imports().submit(**upload, owner_id=owners.owner_id_for_write())
        body = import_job_json(_fresh_job(job_id))
        _hand_out_token(body)
        return jsonify(body), 202, {"Location": body["api_url"]}
    try:
        tok = import_bytes(
            upload["raw"],
            filename=upload["filename"],
            sidecar=upload["sidecar"],
            pattern=upload["pattern"],
        )
    except bpe.TokenizerFileError as exc:
        raise UserError(str(exc), status=422) from None
    # The owner only once the file is accepted: a refused import makes nobody an owner.
    row = store_upload(db.get_db(), tok, owner_id=owners.owner_id_for_write())
    body = imported_json(row)
    _hand_out_token(body)
    return jsonify(body), 201


@bp.get("/api/imports/<int:job_id>")
def import_job_api(job_id: int) -> ResponseReturnValue:
    return jsonify(import_job_json(_own_job_or_404(job_id)))


def _hand_out_token(body: dict[str, Any]) -> None:
    token = owners.new_owner_token()  # only when this import made its owner
    body["owner_token"] = token
    body["owner_link"] = owners.owner_link(token) if token else None


def _own_job_or_404(job_id: int) -> ImportJob:
    # An import job is its importer's alone: its file name is theirs to show.
    job = get_import_job(db.session(), job_id)
    if job is None or not owners.owns(job):
        abort(404)
    return job


def _fresh_job(job_id: int) -> ImportJob:
    """The job as it is after this request's own write through another session (the request
    session's snapshot may predate it)."""
    with db.get_db().read_scope() as session:
        job = get_import_job(session, job_id)
    if job is None:
        abort(404)
    return job


def import_job_json(job: ImportJob) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "status": job.status,
        "phase": job.phase,
        "error": job.error,
        "filename": job.filename,
        "size_bytes": job.size_bytes,
        "elapsed_seconds": job.elapsed_seconds,
        "url": url_for("imports.show", job_id=job.id, _external=True),
        "api_url": url_for("imports.import_job_api", job_id=job.id, _external=True),
        "tokenizer": imported_json(job.tokenizer) if job.tokenizer is not None else None,
    }


def imported_json(row: Tokenizer) -> dict[str, Any]:
    return {
        "slug": row.slug,
        "url": url_for("tokenizers.show", slug=row.slug, _external=True),
        "format": row.source_format,
        "filename": row.source_filename,
        "sha256": row.source_sha256,
        "name": row.source_name,
        "encode_rule": row.encode_rule,
        "mode": row.mode,
        "pattern": row.pattern,
        "vocab_size": row.vocab_size,
        "id_limit": row.id_limit,
        "merges": row.merge_count,
    }


def _read_request() -> dict[str, Any]:
    """The request's file and options, refused (4xx) only for what needs no reading."""
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        raise UserError(
            "Choose a tokeniser file: a tiktoken rank file (NAME.tiktoken) or a HuggingFace "
            "tokenizer.json.",
            status=400,
        )
    limit = current_app.config["MAX_IMPORT_BYTES"]
    raw = _read_limited(upload, limit, "tokeniser file")
    side = request.files.get("sidecar")
    sidecar = _read_limited(side, 1024 * 1024, "sidecar") if side and side.filename else None
    pattern = (request.form.get("pattern_regex") or request.form.get("pattern") or "").strip()
    try:  # the split pattern is refused now, not once the queued job reads the file
        given = parse_sidecar(sidecar, source="the sidecar") if sidecar else None
        check_given_pattern(pattern or None, given, filename=upload.filename[:255])
    except TokenizerFileError as exc:
        raise UserError(str(exc), status=422) from None
    return {
        "raw": raw,
        "filename": upload.filename[:255],
        "sidecar": sidecar,
        "pattern": pattern or None,
    }


def _read_limited(upload: FileStorage, limit: int, what: str) -> bytes:
    raw = upload.stream.read(limit + 1)
    if len(raw) > limit:
        raise UserError(f"The {what} is larger than the limit of {human_bytes(limit)}.", status=413)
    if not raw:
        raise UserError(f"The {what} is empty.", status=400)
    return raw
