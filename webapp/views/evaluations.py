"""Evaluating tokenisers on a corpus, from the corpus page:

- `POST /c/<slug>/evaluate` (`tokenizer=<slug>`): queue (or re-run) that tokeniser on this corpus;
  it runs in the background with progress, like training;
- `GET /c/<slug>/evaluations?sort=`: the table of every tokeniser evaluated on it (the corpus
  page's htmx fragment; it polls itself while an evaluation is unfinished);
- `GET /c/<slug>/evaluations/<id>`: one evaluation's figures, never-used and longest tokens;
  `.json` gives all of them, the never-used ids complete;
- `POST /c/<slug>/evaluations/<id>/cancel`.
"""

from __future__ import annotations

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

from webapp import browse, db, evaluations, owners
from webapp.convert import load_tokenizer
from webapp.pages import get_corpus_or_404
from webapp.token_display import token_infos, token_view

bp = Blueprint("evaluations", __name__)
NEVER_USED_SHOWN = 500


def runner() -> evaluations.EvaluationRunner:
    return current_app.extensions["bpe_evaluations"]


@bp.post("/c/<slug>/evaluate")
def evaluate(slug: str):
    corpus = get_corpus_or_404(slug)
    choice = request.form.get("tokenizer", "")
    row = browse.get_tokenizer(db.session(), choice)  # 404 for a bad or deleted slug
    runner().submit(tokenizer_id=row.id, corpus_id=corpus.id)
    return redirect(url_for("corpora.show", slug=corpus.slug) + "#evaluations", code=303)


@bp.get("/c/<slug>/evaluations")
def table(slug: str):
    corpus = get_corpus_or_404(slug)
    if not request.headers.get("HX-Request"):
        return redirect(url_for("corpora.show", slug=corpus.slug, sort=request.args.get("sort"))
                        + "#evaluations", code=303)  # fmt: skip
    context = evaluations.table_context(
        db.session(), corpus, request.args.get("sort", "bpt"), owner_id=owners.current_owner_id()
    )
    return render_template("corpora/_evaluations.html", corpus=corpus, **context)


@bp.get("/c/<slug>/evaluations/<int:evaluation_id>")
def show(slug: str, evaluation_id: int):
    corpus = get_corpus_or_404(slug)
    session = db.session()
    row = evaluations.get_evaluation(session, corpus.id, evaluation_id)
    if row is None:
        abort(404)
    tok = load_tokenizer(session, row.tokenizer)
    never = evaluations.never_used_ids(row)
    longest = evaluations.longest_pairs(row)
    shown = never[:NEVER_USED_SHOWN]
    view = evaluations.EvaluationView(row, row.tokenizer, evaluations.status_of(row))
    return render_template(
        "corpora/evaluation.html",
        corpus=corpus,
        ev=view,
        never_total=len(never),
        never_views=[token_view(i, whitespace=True) for i in token_infos(tok, shown)],
        longest=[
            (token_view(info, whitespace=True), count)
            for info, (_, count) in zip(
                token_infos(tok, [i for i, _ in longest]), longest, strict=True
            )
        ],
    )


@bp.get("/c/<slug>/evaluations/<int:evaluation_id>.json")
def show_json(slug: str, evaluation_id: int):
    corpus = get_corpus_or_404(slug)
    row = evaluations.get_evaluation(db.session(), corpus.id, evaluation_id)
    if row is None:
        abort(404)
    view = evaluations.EvaluationView(row, row.tokenizer, evaluations.status_of(row))
    return jsonify(
        tokenizer=row.tokenizer.slug,
        corpus=corpus.slug,
        status=view.status.value,
        bytes=row.byte_count,
        characters=row.characters,
        words=row.words,
        tokens=row.tokens,
        bytes_per_token=row.bytes_per_token,
        chars_per_token=view.chars_per_token,
        tokens_per_word=view.tokens_per_word,
        vocab_size=row.vocab_size,
        used=row.used,
        vocab_share=view.vocab_share,
        never_used=evaluations.never_used_ids(row),
        longest=evaluations.longest_pairs(row),
        seconds=row.seconds,
        error=row.error,
    )


@bp.post("/c/<slug>/evaluations/<int:evaluation_id>/cancel")
def cancel(slug: str, evaluation_id: int):
    corpus = get_corpus_or_404(slug)
    if evaluations.get_evaluation(db.session(), corpus.id, evaluation_id) is None:
        abort(404)
    evaluations.request_cancel(db.get_db(), evaluation_id)
    return redirect(url_for("corpora.show", slug=corpus.slug) + "#evaluations", code=303)
