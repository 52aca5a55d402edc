"""Owners' changes, as forms and as JSON: rename a corpus or tokeniser, let others train on a
corpus, delete either (a corpus with tokenisers only after an explicit confirmation).

- `POST /c/<slug>/rename`, `/c/<slug>/training`, `GET|POST /c/<slug>/delete`
- `POST /t/<slug>/rename`, `GET|POST /t/<slug>/delete`
- `GET|PATCH|DELETE /api/corpora/<slug>` and `PATCH|DELETE /api/t/<slug>`

Someone else's corpus or tokeniser answers 403 (they hold its link, so it is no secret that it
exists); a missing or deleted one 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from webapp.blueprints.pages import corpus_json, get_corpus_or_404
from webapp.jobs import get_jobs
from webapp.plumbing import owners
from webapp.plumbing.inputs import json_body, whole_number
from webapp.refusals import UserError
from webapp.storage import browse, db, manage
from webapp.storage.models import Corpus, Tokenizer

bp = Blueprint("manage", __name__)


def _owned_corpus(slug: str) -> Corpus:
    corpus = get_corpus_or_404(slug)
    owners.require_owner(corpus, "corpus")
    return corpus


def _owned_tokenizer(slug: str) -> Tokenizer:
    row = browse.get_tokenizer(db.session(), slug)
    owners.require_owner(row, "tokeniser")
    return row


def _cancel_active_jobs(corpus_id: int) -> None:
    runner = get_jobs()
    for job_id in manage.active_job_ids(db.session(), corpus_id):
        runner.request_cancel(job_id)


def _delete_corpus(corpus: Corpus, confirmed: int | None) -> None:
    # Asked again before anything is cancelled; delete_corpus asks once more in its transaction.
    manage.check_confirmed(manage.footprint(db.session(), corpus.id).tokenizers, confirmed)
    _cancel_active_jobs(corpus.id)
    db.session().rollback()  # end the read snapshot before the write
    manage.delete_corpus(db.get_db(), corpus.id, confirmed_tokenizers=confirmed)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


# ----- forms -------------------------------------------------------------------------------------
@bp.post("/c/<slug>/rename")
def rename_corpus(slug: str) -> ResponseReturnValue:
    corpus = _owned_corpus(slug)
    name = manage.clean_corpus_name(request.form.get("name"))
    manage.rename_corpus(db.get_db(), corpus.id, name)
    return redirect(url_for("corpora.show", slug=slug), code=303)


@bp.post("/c/<slug>/training")
def corpus_training(slug: str) -> ResponseReturnValue:
    corpus = _owned_corpus(slug)
    manage.set_allow_training(db.get_db(), corpus.id, _flag(request.form.get("allow", "")))
    return redirect(url_for("corpora.show", slug=slug), code=303)


@bp.route("/c/<slug>/delete", methods=["GET", "POST"])
def delete_corpus(slug: str) -> ResponseReturnValue:
    corpus = _owned_corpus(slug)
    counts = manage.footprint(db.session(), corpus.id)
    if request.method == "GET":
        return render_template("manage/delete_corpus.html", corpus=corpus, counts=counts)
    confirmed_count = whole_number(request.form.get("confirm_tokenizers", "")) or 0
    try:
        _delete_corpus(corpus, confirmed_count)
    except UserError as exc:
        counts = manage.footprint(db.session(), corpus.id)
        html = render_template(
            "manage/delete_corpus.html", corpus=corpus, counts=counts, error=exc.message
        )
        return html, exc.status
    flash(f"Deleted the corpus {corpus.name!r} and everything trained on it.")
    return redirect(url_for("home.index"), code=303)


@bp.post("/t/<slug>/rename")
def rename_tokenizer(slug: str) -> ResponseReturnValue:
    row = _owned_tokenizer(slug)
    name = manage.clean_name(request.form.get("name"), what="tokeniser", allow_empty=True)
    manage.rename_tokenizer(db.get_db(), row.id, name)
    return redirect(url_for("tokenizers.show", slug=slug), code=303)


@bp.route("/t/<slug>/delete", methods=["GET", "POST"])
def delete_tokenizer(slug: str) -> ResponseReturnValue:
    row = _owned_tokenizer(slug)
    if request.method == "GET":
        return render_template("manage/delete_tokenizer.html", row=row)
    db.session().rollback()
    manage.delete_tokenizer(db.get_db(), row.id)
    flash(f"Deleted the tokeniser {row.label!r}.")
    return redirect(url_for("home.index"), code=303)


# ----- JSON --------------------------------------------------------------------------------------
def _json_object() -> dict[str, Any]:
    # Through the strict parser: depth, lone surrogates and huge numbers are refused by name.
    data = json_body('{"name": "my corpus"}') if request.content_length else {}
    if not isinstance(data, dict):
        raise UserError('Send a JSON object, e.g. {"name": "my corpus"}.', status=400)
    return data


@bp.get("/api/corpora/<slug>")
def api_corpus(slug: str) -> ResponseReturnValue:
    corpus = get_corpus_or_404(slug)
    return jsonify(corpus_json(corpus) | {"owned": owners.owns(corpus)})


@bp.patch("/api/corpora/<slug>")
def api_update_corpus(slug: str) -> ResponseReturnValue:
    corpus = _owned_corpus(slug)
    data = _json_object()
    if "name" in data:
        manage.rename_corpus(db.get_db(), corpus.id, manage.clean_corpus_name(data["name"]))
    if "allow_training" in data:
        if not isinstance(data["allow_training"], bool):
            raise UserError("allow_training must be true or false.", status=422)
        manage.set_allow_training(db.get_db(), corpus.id, data["allow_training"])
    db.session().expire_all()
    db.session().rollback()
    return jsonify(corpus_json(get_corpus_or_404(slug)) | {"owned": True})


@bp.delete("/api/corpora/<slug>")
def api_delete_corpus(slug: str) -> ResponseReturnValue:
    """Deleting a corpus with tokenisers needs `{"delete_tokenizers": true}` (or
    `?delete_tokenizers=true`): they go with it."""
    corpus = _owned_corpus(slug)
    data = _json_object()
    confirm = _flag(data.get("delete_tokenizers", request.args.get("delete_tokenizers", "")))
    _delete_corpus(corpus, None if confirm else 0)
    return jsonify(deleted=True, slug=slug)


@bp.patch("/api/t/<slug>")
def api_update_tokenizer(slug: str) -> ResponseReturnValue:
    row = _owned_tokenizer(slug)
    data = _json_object()
    name = row.name
    if "name" in data:
        name = manage.clean_name(data["name"], what="tokeniser", allow_empty=True)
        manage.rename_tokenizer(db.get_db(), row.id, name)
    return jsonify(slug=slug, name=name)


@bp.delete("/api/t/<slug>")
def api_delete_tokenizer(slug: str) -> ResponseReturnValue:
    row = _owned_tokenizer(slug)
    db.session().rollback()
    manage.delete_tokenizer(db.get_db(), row.id)
    return jsonify(deleted=True, slug=slug)
