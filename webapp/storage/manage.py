"""What owners change about their corpora and tokenisers: names, who may train, deletion.

Each change is one transaction on the write path. Deletion removes rows for good (the text is
the user's, and a public site keeps nothing they deleted): a corpus goes with every tokeniser
trained on it, their merges, vocabularies and shares, and every job on it, so no row is left
pointing at nothing. Jobs still queued or running on it are cancelled first.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from sqlalchemy import Select, delete, func, select, update
from sqlalchemy.orm import Session

from webapp.refusals import UserError
from webapp.storage.db import Database
from webapp.storage.models import (
    ACTIVE_STATUSES,
    Corpus,
    Merge,
    PlaygroundShare,
    Tokenizer,
    TrainingJob,
    VocabEntry,
)


@dataclass(frozen=True)
class CorpusFootprint:
    """What deleting a corpus takes with it (the confirmation page shows these counts)."""

    tokenizers: int
    active_jobs: int


def clean_corpus_name(raw: object) -> str:
    name = clean_name(raw, what="corpus")
    assert name is not None  # clean_name refuses an empty one unless allow_empty
    return name


def clean_name(raw: object, *, what: str, allow_empty: bool = False) -> str | None:
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise UserError(f"The {what}'s name must be text.", status=422)
    # Not clean_display: a name is no filename, so "a/b" stays "a/b". Control and format
    # characters (bidi overrides included) go; the page escapes the rest.
    name = "".join(c for c in raw if unicodedata.category(c)[0] != "C").strip()[:200]
    if not name:
        if allow_empty:
            return None
        raise UserError(f"Give the {what} a name (up to 200 characters).", status=422)
    return name


def footprint(session: Session, corpus_id: int) -> CorpusFootprint:
    tokenizers = session.scalar(
        select(func.count()).select_from(Tokenizer).where(Tokenizer.corpus_id == corpus_id)
    )
    active = session.scalar(
        select(func.count())
        .select_from(TrainingJob)
        .where(TrainingJob.corpus_id == corpus_id, TrainingJob.status.in_(ACTIVE_STATUSES))
    )
    return CorpusFootprint(tokenizers=tokenizers or 0, active_jobs=active or 0)


def rename_corpus(database: Database, corpus_id: int, name: str) -> None:
    with database.session_scope() as session:
        session.execute(update(Corpus).where(Corpus.id == corpus_id).values(name=name))


def set_allow_training(database: Database, corpus_id: int, allow: bool) -> None:
    with database.session_scope() as session:
        session.execute(update(Corpus).where(Corpus.id == corpus_id).values(allow_training=allow))


def rename_tokenizer(database: Database, tokenizer_id: int, name: str | None) -> None:
    with database.session_scope() as session:
        session.execute(update(Tokenizer).where(Tokenizer.id == tokenizer_id).values(name=name))


def active_job_ids(session: Session, corpus_id: int) -> list[int]:
    return list(
        session.scalars(
            select(TrainingJob.id).where(
                TrainingJob.corpus_id == corpus_id, TrainingJob.status.in_(ACTIVE_STATUSES)
            )
        )
    )


def check_confirmed(tokenizers: int, confirmed: int | None) -> None:
    """Refuse (409) unless the owner confirmed deleting at least this many tokenisers."""
    if tokenizers and confirmed is not None and tokenizers > confirmed:
        raise UserError(
            f"This corpus has {tokenizers} tokeniser{'s' if tokenizers != 1 else ''} trained on"
            " it, and deleting it deletes them too: confirm that to go on.",
            status=409,
        )


def delete_corpus(database: Database, corpus_id: int, *, confirmed_tokenizers: int | None) -> bool:
    """Delete the corpus and all that hangs on it, in one transaction.

    `confirmed_tokenizers` is how many tokenisers the owner agreed to delete with it (None: all
    of them); if more exist by now (someone trained meanwhile) nothing is deleted and
    UserError (409) asks again.
    The caller cancels the corpus's active jobs first. Returns False if it was already gone.
    """
    with database.session_scope() as session:
        if session.get(Corpus, corpus_id) is None:
            return False
        tokenizer_ids = select(Tokenizer.id).where(Tokenizer.corpus_id == corpus_id)
        count = session.scalar(select(func.count()).select_from(tokenizer_ids.subquery()))
        check_confirmed(count or 0, confirmed_tokenizers)
        session.execute(delete(TrainingJob).where(TrainingJob.corpus_id == corpus_id))
        _delete_tokenizer_rows(session, tokenizer_ids)
        session.execute(delete(Corpus).where(Corpus.id == corpus_id))
    return True


def delete_tokenizer(database: Database, tokenizer_id: int) -> bool:
    """Delete one tokeniser, its rows and the job that made it. False if it was already gone."""
    with database.session_scope() as session:
        if session.get(Tokenizer, tokenizer_id) is None:
            return False
        makers = select(TrainingJob.id).where(TrainingJob.tokenizer_id == tokenizer_id)
        session.execute(
            update(TrainingJob)
            .where(TrainingJob.rerun_of_id.in_(makers.scalar_subquery()))
            .values(rerun_of_id=None)
        )
        session.execute(delete(TrainingJob).where(TrainingJob.tokenizer_id == tokenizer_id))
        _delete_tokenizer_rows(session, select(Tokenizer.id).where(Tokenizer.id == tokenizer_id))
    return True


def _delete_tokenizer_rows(session: Session, tokenizer_ids: Select[int]) -> None:
    """Explicit deletes, not ON DELETE CASCADE: the same on SQLite with foreign keys off."""
    ids = tokenizer_ids.scalar_subquery()
    for table in (PlaygroundShare, Merge, VocabEntry):
        session.execute(delete(table).where(table.tokenizer_id.in_(ids)))
    session.execute(delete(Tokenizer).where(Tokenizer.id.in_(ids)))
