"""Lookups and pages that several blueprints use: a corpus or job by its URL (or the 404),
the home page and the corpus page, which are also re-rendered with a refusal's message."""

from __future__ import annotations

from flask import abort, render_template, request

from webapp import db, evaluations, listings
from webapp.jobs.store import job_of_corpus, jobs_of_corpus
from webapp.models import Corpus, TrainingJob
from webapp.uploads import PREVIEW_CHARS


def get_corpus_or_404(slug: str) -> Corpus:
    """The live corpus with this slug; a missing, deleted or malformed slug is the same 404."""
    corpus = listings.live_corpus(db.session(), slug)
    if corpus is None:
        abort(404)
    return corpus


def get_job_or_404(slug: str, job_id: int) -> tuple[Corpus, TrainingJob]:
    """Job URLs sit under their corpus's unguessable slug, so job ids reveal nothing."""
    corpus = get_corpus_or_404(slug)
    job = job_of_corpus(db.session(), corpus.id, job_id)
    if job is None:
        abort(404)
    return corpus, job


def render_home(
    *,
    error: str | None = None,
    status: int = 200,
    form: dict | None = None,
    import_error: str | None = None,
):
    """The home page, also re-rendered with an error when an upload or import is refused."""
    session = db.session()
    html = render_template(
        "home.html",
        corpora=listings.recent_corpora(session),
        tokenizers=listings.recent_tokenizers(session),
        error=error,
        import_error=import_error,
        form=form or {},
    )
    return html, status


def render_corpus(
    corpus: Corpus, *, error: str | None = None, status: int = 200, form: dict | None = None
):
    """The corpus page, also re-rendered with an error when a training is refused."""
    session = db.session()
    html = render_template(
        "corpora/show.html",
        corpus=corpus,
        preview=listings.corpus_preview(session, corpus.id),
        truncated=corpus.char_count > PREVIEW_CHARS,
        jobs=jobs_of_corpus(session, corpus.id),
        tokenizers=listings.tokenizers_of_corpus(session, corpus.id),
        **evaluations.table_context(session, corpus, request.args.get("sort", "bpt")),
        error=error,
        form=form or {},
    )
    return html, status
