"""What the pages read of evaluations: one by its id (if the visitor may see it), the rows of a
corpus, the tokenisers a corpus can be evaluated with, and a finished row's figures as
`bpe.evaluate` gives them. The queue (asking, claiming, cancelling) is `webapp.jobs.evaluations`.
"""

from __future__ import annotations

import json
from array import array
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session, joinedload

from bpe.evaluate import Evaluation as BpeEvaluation
from webapp.storage.models import EvaluationRow, Tokenizer


def _visible(owner_id: int | None) -> ColumnElement[bool]:
    """References (public) and the visitor's own tokenisers: a corpus page lists no other's."""
    return Tokenizer.reference.is_not(None) | (
        (Tokenizer.owner_id == owner_id) if owner_id is not None else False
    )


def _evaluation_visible(owner_id: int | None) -> ColumnElement[bool]:
    """An evaluation is shown to a visitor who may see its tokeniser, or who asked for it (they
    had the tokeniser's link then); to nobody else, so no list hands out another's link."""
    if owner_id is None:
        return _visible(owner_id)
    return _visible(owner_id) | (EvaluationRow.owner_id == owner_id)


def rows_of_corpus(
    session: Session, corpus_id: int, *, owner_id: int | None = None
) -> list[EvaluationRow]:
    """The corpus's evaluations this visitor may see, with their tokenisers loaded."""
    return list(
        session.scalars(
            select(EvaluationRow)
            .join(Tokenizer, Tokenizer.id == EvaluationRow.tokenizer_id)
            .where(
                EvaluationRow.corpus_id == corpus_id,
                Tokenizer.deleted_at.is_(None),
                _evaluation_visible(owner_id),
            )
            .options(joinedload(EvaluationRow.tokenizer))
        ).all()
    )


def get_evaluation(
    session: Session, corpus_id: int, evaluation_id: int, *, owner_id: int | None | bool
) -> EvaluationRow | None:
    """The evaluation, if this visitor may see it (see `_evaluation_visible`): ids are
    sequential, so to anyone else it is missing, like another owner's job. `owner_id=True`:
    whoever may see it (a change then asks for its owner, and says 403 to anyone else)."""
    query = (
        select(EvaluationRow)
        .join(Tokenizer, Tokenizer.id == EvaluationRow.tokenizer_id)
        .where(
            EvaluationRow.id == evaluation_id,
            EvaluationRow.corpus_id == corpus_id,
            Tokenizer.deleted_at.is_(None),
        )
        .options(joinedload(EvaluationRow.tokenizer))
    )
    if owner_id is not True:
        query = query.where(_evaluation_visible(owner_id))
    return session.scalar(query)


def never_used_ids(row: EvaluationRow) -> list[int]:
    ids = array("I")
    ids.frombytes(row.never_used or b"")
    return ids.tolist()


def longest_pairs(row: EvaluationRow) -> list[tuple[int, int]]:
    return [(int(i), int(c)) for i, c in json.loads(row.longest or "[]")]


def candidates(session: Session, *, owner_id: int | None = None) -> list[Tokenizer]:
    """The references and the visitor's own live tokenisers, references first: what a corpus
    can be evaluated with (no list hands out a link to another owner's tokeniser)."""
    return list(
        session.scalars(
            select(Tokenizer)
            .where(Tokenizer.deleted_at.is_(None), _visible(owner_id))
            .order_by(Tokenizer.reference.is_(None), Tokenizer.id.desc())
            .limit(200)
        )
    )


# ----- figures, wherever they were measured -------------------------------------------------------
def figures_of(row: EvaluationRow) -> BpeEvaluation | None:
    """A finished evaluation's figures as `bpe.evaluate` returns them; None until then."""
    if row.tokens is None:
        return None
    return BpeEvaluation(
        bytes=row.byte_count or 0,
        characters=row.characters or 0,
        words=row.words or 0,
        tokens=row.tokens,
        vocab_size=row.vocab_size or 0,
        used=row.used or 0,
        never_used=never_used_ids(row),
        longest=longest_pairs(row),
        seconds=row.seconds or 0.0,
        script=row.script,
        spaced=row.spaced is not False,  # null: measured before migration 0021, as it was then
    )


FIGURE_KEYS = (
    "bytes",
    "characters",
    "words",
    "tokens",
    "bytes_per_token",
    "chars_per_token",
    "tokens_per_word",
    "tokens_per_char",
    "script",
    "spaced",
    "vocab_size",
    "used",
    "vocab_share",
    "never_used",
    "longest",
    "seconds",
)


def figures_json(figures: BpeEvaluation | None) -> dict[str, Any]:
    """The figures as the JSON API gives them (nulls, and empty lists, until measured)."""
    if figures is None:
        return {k: [] if k in ("never_used", "longest") else None for k in FIGURE_KEYS}
    data = figures.to_dict()
    return {k: data[k] for k in FIGURE_KEYS}
