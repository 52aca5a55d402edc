"""The sample corpus for a first visit: one click trains (or simply opens) the site's sample
pair and lands on their naive-vs-chunked comparison (webapp/content/sample.py says whose it is)."""

from __future__ import annotations

from flask import Blueprint, current_app, make_response, redirect, render_template, url_for
from flask.typing import ResponseReturnValue

from webapp.blueprints.pages import render_home
from webapp.content.sample import comparison_url, find_sample, start_sample
from webapp.refusals import UserError
from webapp.storage import db

bp = Blueprint("sample", __name__)


@bp.post("/sample")
def start() -> ResponseReturnValue:
    try:
        app = current_app._get_current_object()  # type: ignore[attr-defined]  # typed as the Flask it proxies
        start_sample(app)
    except UserError as exc:  # the queue is full: say so where the button was
        return render_home(error=exc.message, status=exc.status)
    db.session().rollback()  # see the rows just written
    state = find_sample(db.session())
    return redirect(comparison_url(state) or url_for("sample.show"), code=303)


@bp.get("/sample")
def show() -> ResponseReturnValue:
    state = find_sample(db.session())
    if state.ready:
        return redirect(comparison_url(state) or "", code=303)
    return render_template("sample/show.html", state=state)


@bp.get("/sample/status")
def status() -> ResponseReturnValue:
    """Polled by the sample page; once both tokenisers exist, htmx is sent to the comparison."""
    state = find_sample(db.session())
    response = make_response(render_template("sample/_status.html", state=state))
    target = comparison_url(state)
    if target:
        response.headers["HX-Redirect"] = target
    return response
