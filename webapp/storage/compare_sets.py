"""The SQL of the compare pages: load a set of two to four tokenisers, and the ones a reader may
add to it. The views ask here and render what they get."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import case, select
from sqlalchemy.orm import Session

import bpe
from webapp.refusals import UserError
from webapp.storage import browse
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Corpus, Tokenizer
from webapp.storage.slugs import looks_like_slug

MIN_SET, MAX_SET = 2, 4
LETTERS = "abcd"
CANDIDATE_LIMIT = 50


@dataclass(frozen=True)
class Member:
    """One tokeniser of the set: its letter (a, b, c, d), row, corpus and library object."""

    letter: str
    row: Tokenizer
    corpus: Corpus | None
    tok: bpe.Tokenizer


def load_set(session: Session, slugs: Sequence[str]) -> list[Member]:
    """The tokenisers in the URL's order; a 404 for any missing or deleted one."""
    if not MIN_SET <= len(slugs) <= MAX_SET:
        raise UserError(
            f"A comparison takes {MIN_SET} to {MAX_SET} tokenisers, not {len(slugs)}.", status=400
        )
    members = []
    for letter, slug in zip(LETTERS, slugs, strict=False):
        row = browse.get_tokenizer(session, slug)
        members.append(
            Member(letter, row, browse.corpus_of(session, row), load_tokenizer(session, row))
        )
    return members


def resolve_addition(session: Session, value: str) -> str:
    """A tokeniser picked or pasted into the "add" form: a slug, or a link to its page."""
    value = value.strip()
    parts = [p for p in value.split("?")[0].split("#")[0].split("/") if p]
    if "t" in parts and parts.index("t") + 1 < len(parts):
        value = parts[parts.index("t") + 1]  # .../t/<slug>/anything
    elif parts:
        value = parts[-1]
    if not looks_like_slug(value):
        raise UserError(
            "To add a tokeniser, pick one from the list or paste the link of its page"
            " (…/t/<its id>).",
            status=400,
        )
    return browse.get_tokenizer(session, value).slug


def candidates(
    session: Session, members: Sequence[Member], *, owner_id: int | None
) -> list[Tokenizer]:
    """The visitor's own live tokenisers not in the set (those sharing a corpus with it first,
    then the newest), then the site's reference tokenisers, which every visitor may open. Only
    those: the page must not hand out links to anyone else's tokenisers."""
    in_set = [m.row.id for m in members]
    corpora = {m.row.corpus_id for m in members}
    shares_corpus = case((Tokenizer.corpus_id.in_(corpora), 0), else_=1)
    is_reference = Tokenizer.reference.is_not(None)
    visible = is_reference if owner_id is None else (Tokenizer.owner_id == owner_id) | is_reference
    return list(
        session.scalars(
            select(Tokenizer)
            .where(Tokenizer.id.not_in(in_set), Tokenizer.deleted_at.is_(None), visible)
            .order_by(case((is_reference, 1), else_=0), shares_corpus, Tokenizer.id.desc())
            .limit(CANDIDATE_LIMIT)
        )
    )


def corpus_names(session: Session, rows: Sequence[Tokenizer]) -> dict[int, str]:
    """corpus id -> name, for labelling candidates."""
    ids = {r.corpus_id for r in rows if r.corpus_id is not None}
    if not ids:
        return {}
    return dict(session.execute(select(Corpus.id, Corpus.name).where(Corpus.id.in_(ids))).all())
