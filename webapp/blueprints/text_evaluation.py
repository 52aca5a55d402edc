"""Evaluating a tokeniser on pasted text, in the request: for a text that is no corpus, the
figures a corpus evaluation gives.

- `GET /t/<slug>/evaluate`: the tokeniser page's "Evaluate" tab, a form for the text;
- `POST /t/<slug>/evaluate` (`text`): the same figures as a corpus evaluation (bytes and
  characters per token, tokens per word, vocabulary used, the never-used and longest tokens,
  the time), below the form; htmx swaps in just the results;
- `POST /api/t/<slug>/evaluate` (JSON `{"text": ...}`): the figures as JSON, the never-used
  ids complete.

Anyone with the tokeniser's link may (it changes nothing, like the playground). The text is at
most BPE_EVALUATE_MAX_BYTES (413 past it), so the request's memory and time stay bounded;
larger text is uploaded as a corpus and evaluated there, in the background.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, render_template, request
from flask.typing import ResponseReturnValue

from bpe.evaluate import evaluate
from webapp.blueprints.pages import tokenizer_context
from webapp.plumbing.htmx import is_fragment_request, refuse_in_place
from webapp.plumbing.inputs import box_text, json_object
from webapp.refusals import UserError, human_bytes
from webapp.rendering import evaluations
from webapp.storage import browse, db
from webapp.storage import evaluations as evaluation_rows
from webapp.storage.convert import load_tokenizer

bp = Blueprint("text_evaluation", __name__)
bp.register_error_handler(UserError, refuse_in_place)


def _checked_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise UserError("Paste some text to evaluate the tokeniser on.", status=400)
    limit = current_app.config["EVALUATE_MAX_BYTES"]
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        raise UserError(
            f"The text is {size:,} bytes; a pasted evaluation takes at most {human_bytes(limit)}."
            " Upload it as a corpus instead and evaluate the tokeniser on that corpus.",
            status=413,
        )
    return text


@bp.route("/t/<slug>/evaluate", methods=["GET", "POST"])
def page(slug: str) -> ResponseReturnValue:
    context = tokenizer_context(slug)
    text, figures, lists = "", None, {}
    if request.method == "POST":
        text = _checked_text(box_text(request.form))
        tok = load_tokenizer(db.session(), context["row"])
        figures = evaluate(tok, [text])
        lists = evaluations.token_lists(
            tok, figures, never_page=evaluations.never_page_arg(request.form)
        )
    context.update(text=text, figures=figures, tab="evaluate", **lists)
    if request.method == "POST" and is_fragment_request():
        return render_template("tokenizers/_evaluation_result.html", **context)
    return render_template("tokenizers/evaluate.html", **context)


@bp.post("/api/t/<slug>/evaluate")
def api(slug: str) -> ResponseReturnValue:
    session = db.session()
    row = browse.get_tokenizer(session, slug)
    text = _checked_text(json_object('{"text": "some text to measure"}').get("text"))
    figures = evaluate(load_tokenizer(session, row), [text])
    return jsonify(tokenizer=row.slug, **evaluation_rows.figures_json(figures))
