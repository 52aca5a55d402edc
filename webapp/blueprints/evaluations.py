"""Evaluating tokenisers on a corpus, from the corpus page:

- `POST /c/<slug>/evaluate` (`tokenizer=<slug>`): queue (or re-run) that tokeniser on this corpus;
  it runs in the background with progress, like training, and under training's owner rules:
  the corpus's owner may, anyone else only if the owner allowed training (403 otherwise); the
  one who asks owns the evaluation (only they may cancel it);
- `GET /c/<slug>/evaluations?sort=`: the table of every tokeniser evaluated on it (the corpus
  page's htmx fragment; it polls itself while an evaluation is unfinished);
- `GET /c/<slug>/evaluations/<id>`: one evaluation's figures, never-used and longest tokens;
  `.json` gives all of them, the never-used ids complete. Shown only to a visitor the table
  shows it to (a reference's, their own tokeniser's, or one they asked for); else 404;
- `POST /c/<slug>/evaluations/<id>/cancel`: its owner only.
"""

from __future__ import annotations

from flask import (
    Blueprint,
    abort,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue

from webapp.blueprints.pages import get_corpus_or_404, require_training_allowed
from webapp.jobs import evaluations, get_evaluations
from webapp.plumbing import owners
from webapp.rendering import evaluations as evaluation_display
from webapp.storage import browse, db
from webapp.storage import evaluations as evaluation_rows
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Corpus, EvaluationRow

bp = Blueprint("evaluations", __name__)


@bp.post("/c/<slug>/evaluate")
def evaluate(slug: str) -> ResponseReturnValue:
    corpus = get_corpus_or_404(slug)
    require_training_allowed(corpus)
    choice = request.form.get("tokenizer", "")
    row = browse.get_tokenizer(db.session(), choice)  # 404 for a bad or deleted slug
    get_evaluations().submit(
        tokenizer_id=row.id, corpus_id=corpus.id, owner_id=owners.owner_id_for_write()
    )
    return redirect(url_for("corpora.show", slug=corpus.slug) + "#evaluations", code=303)


@bp.get("/c/<slug>/evaluations")
def table(slug: str) -> ResponseReturnValue:
    corpus = get_corpus_or_404(slug)
    if not request.headers.get("HX-Request"):
        return redirect(url_for("corpora.show", slug=corpus.slug, sort=request.args.get("sort"))
                        + "#evaluations", code=303)  # fmt: skip
    context = evaluation_display.table_context(
        db.session(), corpus, request.args.get("sort", "bpt"), owner_id=owners.current_owner_id()
    )
    return render_template("corpora/_evaluations.html", corpus=corpus, **context)


def _evaluation_or_404(
    slug: str, evaluation_id: int, *, to_change: bool = False
) -> tuple[Corpus, EvaluationRow]:
    corpus = get_corpus_or_404(slug)
    row = evaluation_rows.get_evaluation(
        db.session(),
        corpus.id,
        evaluation_id,
        owner_id=True if to_change else owners.current_owner_id(),
    )
    if row is None:
        abort(404)
    return corpus, row


@bp.get("/c/<slug>/evaluations/<int:evaluation_id>")
def show(slug: str, evaluation_id: int) -> ResponseReturnValue:
    corpus, row = _evaluation_or_404(slug, evaluation_id)
    figures = evaluation_rows.figures_of(row)
    tok = load_tokenizer(db.session(), row.tokenizer)
    return render_template(
        "corpora/evaluation.html",
        corpus=corpus,
        ev=evaluation_display.EvaluationView(row, row.tokenizer, evaluations.status_of(row)),
        figures=figures,
        **evaluation_display.token_lists(
            tok, figures, never_page=evaluation_display.never_page_arg(request.args)
        ),
    )


@bp.get("/c/<slug>/evaluations/<int:evaluation_id>.json")
def show_json(slug: str, evaluation_id: int) -> ResponseReturnValue:
    corpus, row = _evaluation_or_404(slug, evaluation_id)
    status = evaluations.status_of(row)
    return jsonify(
        tokenizer=row.tokenizer.slug,
        corpus=corpus.slug,
        status=status.value,
        **evaluation_rows.figures_json(evaluation_rows.figures_of(row)),
        error=row.error,
    )


@bp.post("/c/<slug>/evaluations/<int:evaluation_id>/cancel")
def cancel(slug: str, evaluation_id: int) -> ResponseReturnValue:
    corpus, row = _evaluation_or_404(slug, evaluation_id, to_change=True)
    owners.require_owner(row, "evaluation")
    get_evaluations().request_cancel(evaluation_id)
    return redirect(url_for("corpora.show", slug=corpus.slug) + "#evaluations", code=303)
