"""The home page: the upload form and what was made most recently."""

from __future__ import annotations

from flask import Blueprint

from webapp.pages import render_home

bp = Blueprint("home", __name__)


@bp.get("/")
def index():
    return render_home()
