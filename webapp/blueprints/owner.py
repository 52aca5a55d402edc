"""The owner's own pages: claiming an owner link on another device, and tokens for API clients.

- `GET /owner` shows this browser's owner link again, and what it owns;
- `GET /owner/claim` shows the claim form; static/claim.js fills it from the link's #fragment.
- `POST /owner/claim` (form, CSRF) makes this browser the owner of that token; when this
  browser owns something already, it first shows what would move to that owner, and a second
  post (`move=yes`) moves it.
- `POST /api/owners` (JSON) gives a script a fresh owner token to send as a bearer token.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from webapp.plumbing import owners
from webapp.storage import db

bp = Blueprint("owner", __name__)


@bp.get("/owner")
def link_page() -> ResponseReturnValue:
    link = owners.browser_owner_link()
    held = owners.holdings(db.session(), owners.current_owner_id()) if link else None
    return render_template("owner/link.html", link=link, held=held)


@bp.get("/owner/claim")
def claim_page() -> ResponseReturnValue:
    return render_template("owner/claim.html")


@bp.post("/owner/claim")
def claim() -> ResponseReturnValue:
    """Claim an owner link. When this browser owns something, the first post only says what
    would move where (a crafted link would hand it all to whoever made the link); the form on
    that page, with `move=yes`, does it."""
    token = request.form.get("token", "")
    preview = owners.claim_preview(token)
    if preview is not None and request.form.get("move") != "yes":
        moving, theirs = preview
        return render_template(
            "owner/claim_confirm.html", token=token.strip(), moving=moving, theirs=theirs
        )
    owners.claim(token)
    response = redirect(url_for("home.index", claimed=1), code=303)
    owners.set_owner_cookie(response, token.strip())
    return response


@bp.post("/api/owners")
def api_new_owner() -> ResponseReturnValue:
    if owners.current_owner_id() is not None:
        return jsonify(
            error="This request already proves an owner; keep using that token.", status=409
        ), 409
    owners.owner_id_for_write()
    token = owners.new_owner_token()
    assert token is not None  # owner_id_for_write just made the owner
    return jsonify(owner_token=token, owner_link=owners.owner_link(token)), 201
