"""Importing a tokeniser file: the "Import a tokeniser" form beside the upload form, and its API.

- `POST /import` (multipart: `file`, optional `sidecar`, `pattern`): imports and leads to the new
  tokeniser's page; a refused file re-renders the home page with the reason (4xx).
- `POST /api/tokenizers/import`: the same fields, answers 201 with the tokeniser's JSON.

Whoever imports owns the tokeniser, as an upload makes its corpus theirs: a visitor
with no owner yet becomes one, and the API's answer hands the new owner's token out once.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, redirect, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import FileStorage

import bpe
from bpe.importers import import_bytes
from webapp.blueprints.pages import render_home
from webapp.content.imports import store_upload
from webapp.plumbing import owners
from webapp.refusals import UserError, human_bytes
from webapp.storage import db
from webapp.storage.models import Tokenizer

bp = Blueprint("imports", __name__)


@bp.post("/import")
def import_form() -> ResponseReturnValue:
    try:
        row = _import_request()
    except UserError as exc:
        return render_home(import_error=exc.message, status=exc.status)
    return redirect(url_for("tokenizers.show", slug=row.slug), code=303)


@bp.post("/api/tokenizers/import")
def import_api() -> ResponseReturnValue:
    row = _import_request()
    body = imported_json(row)
    token = owners.new_owner_token()  # only when this import made its owner
    body["owner_token"] = token
    body["owner_link"] = owners.owner_link(token) if token else None
    return jsonify(body), 201


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


def _import_request() -> Tokenizer:
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
    try:
        tok = import_bytes(
            raw, filename=upload.filename[:255], sidecar=sidecar, pattern=pattern or None
        )
    except bpe.TokenizerFileError as exc:
        raise UserError(str(exc), status=422) from None
    # The owner only once the file is accepted: a refused import makes nobody an owner.
    return store_upload(db.get_db(), tok, owner_id=owners.owner_id_for_write())


def _read_limited(upload: FileStorage, limit: int, what: str) -> bytes:
    raw = upload.stream.read(limit + 1)
    if len(raw) > limit:
        raise UserError(f"The {what} is larger than the limit of {human_bytes(limit)}.", status=413)
    if not raw:
        raise UserError(f"The {what} is empty.", status=400)
    return raw
