"""The home page: the upload form and what the visitor owns, newest first (only theirs: the
slugs of other people's corpora and tokenisers are their keys)."""

from __future__ import annotations

from flask import Blueprint, current_app, send_from_directory
from flask.typing import ResponseReturnValue

from webapp.blueprints.pages import render_home

bp = Blueprint("home", __name__)


@bp.get("/")
def index() -> ResponseReturnValue:
    return render_home()


@bp.get("/favicon.ico")
def favicon() -> ResponseReturnValue:
    """Browsers ask for /favicon.ico whatever the page links; answer with our own icon."""
    return send_from_directory(
        current_app.static_folder or "static",
        "favicon.ico",
        mimetype="image/vnd.microsoft.icon",
        max_age=86400,
    )
