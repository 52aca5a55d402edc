"""Lookups and pages that several blueprints use: a corpus or job by its URL (or the 404),
the home page and the corpus page, which are also re-rendered with a refusal's message, who
may train on a corpus, a corpus as JSON, and what every tokeniser page's header needs."""

from __future__ import annotations

import time
from typing import Any

from flask import abort, current_app, render_template, request
from werkzeug.datastructures import MultiDict

import bpe
from webapp.content import imports
from webapp.content.sample import (
    DEMO_TEXT,
    comparison_url,
    find_sample,
    playground_url,
    sample_siblings,
)
from webapp.jobs.settings import JobSettings, smallest_vocab
from webapp.jobs.store import job_of_corpus, jobs_of_corpus
from webapp.plumbing import owners
from webapp.plumbing.inputs import box_text
from webapp.plumbing.security import Forbidden, external_url
from webapp.rendering import evaluations, model_counts
from webapp.rendering.downloads import DOWNLOADS
from webapp.rendering.pipeline_stages import pipeline_labels
from webapp.rendering.playground import Display, check_playground_text
from webapp.storage import browse, db, listings, model_choices
from webapp.storage.models import Corpus, Tokenizer, TrainingJob
from webapp.storage.uploads import PREVIEW_CHARS
from webapp.storage.warming import WARMER


def get_corpus_or_404(slug: str) -> Corpus:
    """The live corpus with this slug; a missing, deleted or malformed slug is the same 404."""
    corpus = listings.live_corpus(db.session(), slug)
    if corpus is None:
        abort(404)
    return corpus


def _find_job(slug: str, job_id: int) -> tuple[Corpus, TrainingJob]:
    corpus = get_corpus_or_404(slug)
    job = job_of_corpus(db.session(), corpus.id, job_id)
    if job is None:
        abort(404)
    return corpus, job


def get_job_or_404(slug: str, job_id: int) -> tuple[Corpus, TrainingJob]:
    """The job, for its owner only. Job ids are sequential, so anyone with the corpus link could
    count through them: to everyone else a job is missing (the same 404), and its page never
    hands out the tokeniser it made."""
    corpus, job = _find_job(slug, job_id)
    if not owners.owns(job):
        abort(404)
    return corpus, job


def get_owned_job(slug: str, job_id: int) -> tuple[Corpus, TrainingJob]:
    """The job for a change (cancel, run again): someone else's answers 403, a missing one 404."""
    corpus, job = _find_job(slug, job_id)
    owners.require_owner(job, "job")
    return corpus, job


def training_allowed(corpus: Corpus) -> bool:
    """Its owner, or anyone if the owner allowed it. A corpus stored before owners existed has
    no owner to decide: anyone with its link may train on it, as before."""
    return corpus.owner_id is None or corpus.allow_training or owners.owns(corpus)


def require_training_allowed(corpus: Corpus) -> None:
    if not training_allowed(corpus):
        raise Forbidden(
            "The owner of this corpus has not allowed others to train on it. You can still"
            " upload the same text yourself and train on your own copy."
        )


def corpus_json(corpus: Corpus) -> dict[str, Any]:
    return {
        "slug": corpus.slug,
        "url": external_url("corpora.show", slug=corpus.slug),
        "name": corpus.name,
        "allow_training": corpus.allow_training,
        "filename": corpus.filename,
        "size_bytes": corpus.size_bytes,
        "sha256": corpus.sha256,
        "char_count": corpus.char_count,
        "line_count": corpus.line_count,
        "source_encoding": corpus.source_encoding,
        "created_at": corpus.created_at.isoformat() + "Z",
        # The least vocab size per mode without special tokens (each adds one; words mode's
        # <unk> is counted already); words is null for a corpus whose alphabet was not counted.
        "smallest_vocab_size": smallest_vocab_sizes(
            listings.word_alphabet_size(db.session(), corpus.id)
        ),
    }


def smallest_vocab_sizes(word_alphabet_size: int | None) -> dict[str, int | None]:
    return {
        mode: smallest_vocab(JobSettings(mode=mode, pattern=None), word_alphabet_size)
        for mode in bpe.MODES
    }


def render_home(
    *,
    error: str | None = None,
    status: int = 200,
    form: dict[str, str] | None = None,
    import_error: str | None = None,
    values: Any = None,
) -> tuple[str, int]:
    """The home page, also re-rendered with an error when an upload or import is refused.
    `values` (request args or form) hold the playground's text and model, if any."""

    session = db.session()
    owner_id = owners.current_owner_id()
    sample = find_sample(session)
    html = render_template(
        "home.html",
        **home_playground(
            values or MultiDict(), sample_ids=[t.id for t in sample.tokenizers.values()]
        ),
        corpora=listings.recent_corpora(session, owner_id=owner_id),
        tokenizers=listings.recent_tokenizers(session, owner_id=owner_id),
        sample=sample,
        sample_compare_url=comparison_url(sample),
        sample_playground_url=playground_url,
        error=error,
        import_error=import_error,
        form=form or {},
        missing_models=imports.missing_references(session),
    )
    return html, status


def home_playground(values: Any, *, sample_ids: list[int]) -> dict[str, Any]:
    """The home page's text box, model picker, tokens and counts table (the page or its htmx
    fragment, templates/_home_encoded.html). With no `text` sent, a demonstration text; a
    `model` that is no live tokeniser's slug is a 404, text over the playground's limit a 413."""
    session = db.session()
    text = box_text(values) if "text" in values else DEMO_TEXT
    check_playground_text(text)
    display = Display.from_args(values)
    choices = model_choices.ready_models(
        session, owner_id=owners.current_owner_id(), site_ids=sample_ids
    )
    slug = (values.get("model") or "").strip()
    picked = model_counts.pick_model(choices, browse.get_tokenizer(session, slug) if slug else None)
    if picked is not None and picked.id not in {row.id for row in choices}:
        choices = [picked, *choices]  # a model given by its link, not one of the list's own
    started = time.perf_counter()
    encoded = model_counts.encode_picked(session, picked, text, display) if picked else None
    # The picked model's load (if it was not loaded) counts against the table's time to load.
    load_seconds = current_app.config["HOME_LOAD_SECONDS"] - (time.perf_counter() - started)
    return {
        "home_text": text,
        "home_display": display,
        "home_choices": [(row, model_counts.model_label(row)) for row in choices],
        "home_picked": picked,
        "home_label": model_counts.model_label(picked) if picked else "",
        "home_ticked": set(values.getlist("t")),  # kept ticked in the table's re-render
        "home_encoded": encoded,
        "home_table": model_counts.count_table(
            session,
            choices,
            text,
            specials=display.specials,
            load_seconds=max(0.0, load_seconds),
            warm=_warm_later,
        ),
    }


def _warm_later(rows: list[Tokenizer]) -> None:
    """The counts table's models not loaded yet, to the background loader."""
    WARMER.warm(db.get_db(), [(row.id, row.slug) for row in rows])


def render_corpus(
    corpus: Corpus,
    *,
    error: str | None = None,
    status: int = 200,
    form: dict[str, str] | None = None,
) -> tuple[str, int]:
    """The corpus page, also re-rendered with an error when a training is refused.

    A visitor sees only their own jobs and tokenisers here: the corpus link gives away no
    other link."""
    session = db.session()
    owner_id = owners.current_owner_id()
    is_owner = owners.owns(corpus)
    html = render_template(
        "corpora/show.html",
        corpus=corpus,
        preview=listings.corpus_preview(session, corpus.id),
        word_alphabet=listings.word_alphabet_size(session, corpus.id),
        truncated=corpus.char_count > PREVIEW_CHARS,
        jobs=[] if owner_id is None else jobs_of_corpus(session, corpus.id, owner_id=owner_id),
        tokenizers=listings.tokenizers_of_corpus(session, corpus.id, owner_id=owner_id),
        is_owner=is_owner,
        can_train=training_allowed(corpus),
        tokenizer_total=listings.count_tokenizers(session, corpus.id) if is_owner else None,
        **evaluations.table_context(
            session, corpus, request.args.get("sort", "bpt"), owner_id=owner_id
        ),
        error=error,
        form=form or {},
    )
    return html, status


def tokenizer_context(slug: str, *, header: bool = True) -> dict[str, Any]:
    """What every tokeniser page needs (templates/tokenizers/layout.html); a missing or deleted
    tokeniser is the 404. `header=False` for an htmx fragment, which redraws a part below the
    header: it gets the row and what the parts use, not the header's own lookups (the "compare
    with…" choices and the sample pair, the special tokens, the downloads)."""
    session = db.session()
    row = browse.get_tokenizer(session, slug)
    corpus = browse.corpus_of(session, row)
    context: dict[str, Any] = {
        "row": row,
        "corpus": corpus,
        "is_owner": owners.owns(row),
        "references": imports.references(session),  # the playground's "same text in" switch
    }
    if not header:
        return context
    context.update(
        # The corpus's link only for its owner: a tokeniser link does not give its corpus away.
        corpus_link=owners.owns(corpus),
        specials=browse.special_tokens(row),
        compare_choices=listings.compare_choices(
            session,
            row,
            owner_id=owners.current_owner_id(),
            first=sample_siblings(session, row),
        ),
        downloads=DOWNLOADS,
        pipeline=pipeline_labels(row),
    )
    return context
