"""The SQL behind the home and corpus pages: recent items, a corpus by its slug, its preview
and its tokenisers, and a tokeniser's "compare with…" choices. Views pass their request
session in and render what comes back; they write no queries of their own.

Every list is one owner's: a page never hands out a link its visitor was not given,
so a visitor who owns nothing (owner_id None) gets empty lists."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload

from webapp.storage.models import Corpus, CorpusPreview, CorpusStats, Tokenizer
from webapp.storage.slugs import looks_like_slug

RECENT = 50
COMPARE_CHOICES = 50


def recent_corpora(session: Session, *, owner_id: int | None, limit: int = RECENT) -> list[Corpus]:
    if owner_id is None:
        return []
    return list(
        session.scalars(
            select(Corpus)
            .where(Corpus.deleted_at.is_(None), Corpus.owner_id == owner_id)
            .order_by(Corpus.created_at.desc(), Corpus.id.desc())
            .limit(limit)
        )
    )


def recent_tokenizers(
    session: Session, *, owner_id: int | None, limit: int = RECENT
) -> list[Tokenizer]:
    if owner_id is None:
        return []
    return list(
        session.scalars(
            select(Tokenizer)
            .outerjoin(Corpus)  # imported tokenisers have no corpus
            .where(
                Tokenizer.deleted_at.is_(None),
                Corpus.deleted_at.is_(None),
                Tokenizer.owner_id == owner_id,
            )
            .options(joinedload(Tokenizer.corpus))
            .order_by(Tokenizer.created_at.desc(), Tokenizer.id.desc())
            .limit(limit)
        )
    )


def live_corpus(session: Session, slug: str) -> Corpus | None:
    """The live corpus with this slug; None for a missing, deleted or malformed one."""
    if not looks_like_slug(slug):
        return None
    return session.scalar(select(Corpus).where(Corpus.slug == slug, Corpus.deleted_at.is_(None)))


def corpus_preview(session: Session, corpus_id: int) -> str:
    """What the upload stored as the corpus's preview, never a read of its text (SQLite loads
    a whole value even to take a substring of it)."""
    preview = session.scalar(select(CorpusPreview.text).where(CorpusPreview.corpus_id == corpus_id))
    return preview or ""


def word_alphabet_size(session: Session, corpus_id: int) -> int | None:
    """Words mode's alphabet as counted at upload (or by the migration that added the count);
    None for a corpus nobody counted, whose words jobs then learn their floor from the trainer."""
    return session.scalar(
        select(CorpusStats.word_alphabet_size).where(CorpusStats.corpus_id == corpus_id)
    )


def tokenizers_of_corpus(
    session: Session, corpus_id: int, *, owner_id: int | None
) -> list[Tokenizer]:
    """One owner's live tokenisers of a corpus, newest first."""
    if owner_id is None:
        return []
    return list(
        session.scalars(
            select(Tokenizer)
            .where(
                Tokenizer.corpus_id == corpus_id,
                Tokenizer.deleted_at.is_(None),
                Tokenizer.owner_id == owner_id,
            )
            .order_by(Tokenizer.id.desc())
        )
    )


def count_tokenizers(session: Session, corpus_id: int) -> int:
    """Every live tokeniser trained on the corpus, whoever trained it (deleting it deletes all)."""
    return session.execute(
        select(func.count())
        .select_from(Tokenizer)
        .where(Tokenizer.corpus_id == corpus_id, Tokenizer.deleted_at.is_(None))
    ).scalar_one()


def compare_choices(
    session: Session, row: Tokenizer, *, owner_id: int | None, first: list[Tokenizer]
) -> list[Tokenizer]:
    """The visitor's own other live tokenisers of the same corpus, newest first (the "compare
    with…" choices), after `first` (the site's sample pair when `row` is one of them: their
    links are on the home page for everyone)."""
    siblings = list(first)
    if owner_id is None:
        return siblings
    return siblings + list(
        session.scalars(
            select(Tokenizer)
            .where(
                Tokenizer.corpus_id == row.corpus_id,
                Tokenizer.id != row.id,
                Tokenizer.deleted_at.is_(None),
                Tokenizer.owner_id == owner_id,
            )
            .order_by(Tokenizer.id.desc())
            .limit(COMPARE_CHOICES)
        )
    )
