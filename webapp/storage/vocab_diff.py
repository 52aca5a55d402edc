"""Two tokenisers' vocabularies side by side, in SQL: the tokens (by their bytes) both have,
those only the first has, those only the second has; counted per category and paged with the
vocabulary browser's own filters and sorts (`VocabQuery`).

A token is the same in both when what it stands for (the `hex` column: its bytes, but Llama 2's
`▁the` as ` the`, webapp/storage/convert.py) and its end-of-word mark agree (words mode's
`the</w>` is not a byte-level `the`). Each listed token asks whether the other vocabulary has
its key (an EXISTS probe): PostgreSQL answers it as a hashed semi-join, SQLite through the
index on (tokenizer, hex, end of word) that only SQLite gets (migration 0019; PostgreSQL's
btree could not hold a 16 kB token, and needs no index for a hash join). Vocabularies never
change, so a pair's counts are computed once per process (`_COUNTS`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock
from typing import Any

from sqlalchemy import and_, exists, func, select
from sqlalchemy.orm import Session, aliased

from webapp.refusals import UserError
from webapp.storage.browse import Page, filter_conditions, paged, vocab_search
from webapp.storage.list_queries import VOCAB_SORTS, VocabQuery
from webapp.storage.models import Tokenizer, VocabEntry

SIDES = {"both": "in both", "a": "only in A", "b": "only in B"}
COUNTS_KEPT = 64  # pairs whose counts a process keeps (a few hundred bytes each)


@dataclass(frozen=True)
class DiffCounts:
    """Tokens per category and side: `by_category[category][side]`, with the sides' totals."""

    by_category: dict[str, dict[str, int]]
    totals: dict[str, int]


_COUNTS: OrderedDict[tuple[str, str], DiffCounts] = OrderedDict()
_COUNTS_LOCK = Lock()


def clear_counts() -> None:
    """Forget every pair's counts (a benchmark's first view)."""
    with _COUNTS_LOCK:
        _COUNTS.clear()


def side_arg(args: Any) -> str:
    side = args.get("side", "") or "both"
    if side not in SIDES:
        raise UserError(f"side must be one of {', '.join(SIDES)}.", status=400)
    return side


def _sides(first: Tokenizer, second: Tokenizer, side: str) -> tuple[Tokenizer, Tokenizer]:
    """The vocabulary a side lists, and the one it is probed against."""
    return (second, first) if side == "b" else (first, second)


def _in_other(other: Tokenizer) -> tuple[Any, Any]:
    """EXISTS (the listed row's key is in `other`), and `other`'s id for that key."""
    match = aliased(VocabEntry)
    same = and_(
        match.tokenizer_id == other.id,
        match.hex == VocabEntry.hex,
        match.ends_word == VocabEntry.ends_word,
    )
    found = exists().where(same)
    # Any id of the key (a vocabulary spelling two ids alike is rare): asking for the lowest
    # makes SQLite, without statistics, walk the whole vocabulary in id order per row.
    other_id = select(match.token_id).where(same).limit(1).scalar_subquery()
    return found, other_id


def _side_conditions(first: Tokenizer, second: Tokenizer, side: str) -> tuple[list[Any], Any]:
    listed, other = _sides(first, second, side)
    found, other_id = _in_other(other)
    return [VocabEntry.tokenizer_id == listed.id, found if side == "both" else ~found], other_id


def diff_counts(session: Session, first: Tokenizer, second: Tokenizer) -> DiffCounts:
    key = (first.slug, second.slug)  # slugs are never reused, ids may be in another database
    with _COUNTS_LOCK:
        if key in _COUNTS:
            _COUNTS.move_to_end(key)
            return _COUNTS[key]
    by_category: dict[str, dict[str, int]] = {}
    # Two passes, not three: A's tokens split by the probe into "both" and "a", then B's.
    for listed, other, sides in ((first, second, ("a", "both")), (second, first, ("b", None))):
        found, _ = _in_other(other)
        shared = found.label("shared")
        stmt = (
            select(VocabEntry.category, shared, func.count())
            .where(VocabEntry.tokenizer_id == listed.id)
            .group_by(VocabEntry.category, shared)
        )
        for category, is_shared, count in session.execute(stmt):
            side = sides[1] if is_shared else sides[0]
            if side is not None:
                by_category.setdefault(category, dict.fromkeys(SIDES, 0))[side] = count
    totals = {side: sum(row[side] for row in by_category.values()) for side in SIDES}
    counts = DiffCounts(by_category=dict(sorted(by_category.items())), totals=totals)
    with _COUNTS_LOCK:
        _COUNTS[key] = counts
        while len(_COUNTS) > COUNTS_KEPT:
            _COUNTS.popitem(last=False)
    return counts


def _unfiltered(query: VocabQuery) -> bool:
    return not (
        query.search.q or query.category or query.min_length is not None or query.max_length
    )


def diff_page(
    session: Session,
    first: Tokenizer,
    second: Tokenizer,
    side: str,
    query: VocabQuery,
    counts: DiffCounts | None = None,
) -> Page:
    """One page of a side's tokens, filtered and sorted as the vocabulary page does (its
    `kind` is left out: which ids are learned differs between the two). With `counts` and no
    filter, the total is the counted one instead of a second pass over the vocabulary."""
    conditions, other_id = _side_conditions(first, second, side)
    found = vocab_search(session, _sides(first, second, side)[0], query.search)
    if found is not None:
        conditions.append(found)
    conditions.extend(filter_conditions(VocabEntry, query))
    stmt = select(
        VocabEntry.token_id,
        other_id.label("other_id"),
        VocabEntry.token_bytes,
        VocabEntry.hex,
        VocabEntry.byte_length,
        VocabEntry.char_length,
        VocabEntry.category,
        VocabEntry.pair_count,
        VocabEntry.is_special,
        VocabEntry.ends_word,
    ).where(and_(*conditions))
    total = counts.totals[side] if counts is not None and _unfiltered(query) else None
    return paged(session, stmt, VOCAB_SORTS[query.sort][1], query.paging, total)
