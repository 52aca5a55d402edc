"""The home page: a text box and a model picker first, encoding as you type (the tokens beside
or under the box, and the same text counted in every model offered, 2 to 4 of which open the
compare page); below them the upload form and what the visitor owns, newest first (only
theirs: the slugs of other people's corpora and tokenisers are their keys).

`/encode` answers the box: htmx gets only the tokens and the table
(templates/_home_encoded.html), a plain form post the whole page with the same in it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, current_app, redirect, request, send_from_directory, url_for
from flask.typing import ResponseReturnValue

from webapp.blueprints.pages import home_playground, render_home
from webapp.content.sample import find_sample
from webapp.plumbing.htmx import is_fragment_request, page_or_fragment, refuse_in_place
from webapp.plumbing.inputs import box_text
from webapp.refusals import UserError
from webapp.rendering.model_counts import picked_slugs
from webapp.rendering.playground import check_playground_text
from webapp.storage import browse, db

bp = Blueprint("home", __name__)
# A bad model or an oversize text: the message in place of the tokens, as on the tokeniser pages.
bp.register_error_handler(UserError, refuse_in_place)

SLUG_ARGS = ("slug_a", "slug_b", "slug_c", "slug_d")  # the compare page's URL parts
# A comparison whose address would be longer is sent on as a POST (307), text in the body: a
# link that long is no use to share, and servers cap the request line.
SHAREABLE_URL = 2000


@bp.get("/")
def index() -> ResponseReturnValue:
    return render_home(values=request.args)


@bp.route("/encode", methods=["GET", "POST"])
def encode() -> ResponseReturnValue:
    values = request.form if request.method == "POST" else request.args
    if not is_fragment_request():
        return render_home(values=values)
    sample = find_sample(db.session())
    context = home_playground(values, sample_ids=[t.id for t in sample.tokenizers.values()])
    return page_or_fragment("home.html", "_home_encoded.html", **context)


@bp.post("/encode/compare")
def compare() -> ResponseReturnValue:
    """The counts table's ticked models, sent on to the compare page with the same text."""
    text = box_text(request.form)
    check_playground_text(text)
    session = db.session()
    slugs = [browse.get_tokenizer(session, s).slug for s in picked_slugs(request.form.getlist("t"))]
    parts: dict[str, Any] = dict(zip(SLUG_ARGS, slugs, strict=False))  # url_for's **values
    target = url_for("compare.show", **parts)
    if len(target) + len(urlencode({"text": text})) <= SHAREABLE_URL:
        return redirect(url_for("compare.show", **parts, text=text), code=303)
    return redirect(url_for("compare.encode", **parts), code=307)  # the browser posts it again


@bp.get("/favicon.ico")
def favicon() -> ResponseReturnValue:
    """Browsers ask for /favicon.ico whatever the page links; answer with our own icon."""
    return send_from_directory(
        current_app.static_folder or "static",
        "favicon.ico",
        mimetype="image/vnd.microsoft.icon",
        max_age=86400,
    )
