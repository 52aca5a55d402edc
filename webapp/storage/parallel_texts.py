"""The parallel text (the UDHR in many languages) as the site stores it: one row per language,
with how it is written (`bpe.scripts`) judged once, when it is stored.

`flask fetch-udhr` (webapp/content/parallel_text.py) writes it; the languages job reads the
complete texts (stage 4-5). Stored again from other bytes, it replaces the old one whole (and
the counts measured on the old one go with it): a table never mixes two editions.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, undefer

from bpe.languages import COMPLETE_STAGE, Language
from bpe.scripts import writing
from webapp.storage.db import Database
from webapp.storage.models import LanguageJob, ParallelText


def stored_source(session: Session) -> str | None:
    """The SHA-256 of what the stored parallel text was read from; None if there is none."""
    return session.scalar(select(ParallelText.source_sha256).limit(1))


def complete_count(session: Session) -> int:
    return (
        session.scalar(
            select(func.count())
            .select_from(ParallelText)
            .where(ParallelText.stage >= COMPLETE_STAGE)
        )
        or 0
    )


def complete_texts(session: Session, *, with_text: bool = False) -> list[ParallelText]:
    """The complete texts, by code; their text loaded only if asked (the job needs it)."""
    query = select(ParallelText).where(ParallelText.stage >= COMPLETE_STAGE)
    if with_text:
        query = query.options(undefer(ParallelText.text))
    return list(session.scalars(query.order_by(ParallelText.code)))


def replace_parallel_text(
    database: Database, languages: Sequence[Language], *, source_sha256: str
) -> bool:
    """Store these languages as the parallel text; False (nothing written) if the stored one
    was read from the same bytes."""
    with database.session_scope() as session:
        if stored_source(session) == source_sha256:
            return False
        # Tables of the old edition would mix two texts: they go with it.
        session.execute(delete(LanguageJob))
        session.execute(delete(ParallelText))
        for language in languages:
            how = writing(language.text)
            session.add(
                ParallelText(
                    code=language.code,
                    name=language.name,
                    bcp47=language.bcp47,
                    iso6393=language.iso6393,
                    direction=language.direction,
                    stage=language.stage,
                    script=how.script,
                    spaced=how.spaced,
                    byte_count=len(language.text.encode("utf-8")),
                    char_count=len(language.text),
                    word_count=len(language.text.split()),
                    source_sha256=source_sha256,
                    text=language.text,
                )
            )
    return True
