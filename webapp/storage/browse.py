"""The SQL behind the tokeniser pages and the JSON API: find a tokeniser, page its vocabulary
and its merges. Filtering, sorting and paging all happen in the database, so a page of a
50,000-entry vocabulary costs the same as a page of a small one.

Both the HTML views and the API read their parameters through `VocabQuery.from_args` and
`MergeQuery.from_args` (webapp/storage/list_queries.py), so a link and an API call with the same
query string agree.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import LargeBinary, Select, and_, bindparam, false, func, or_, select
from sqlalchemy.orm import Session, aliased

from webapp.refusals import UserError
from webapp.storage.list_queries import (
    DEFAULT_PER_PAGE,
    MATCH_KINDS,
    MERGE_SORTS,
    PER_PAGE_CHOICES,
    VOCAB_KINDS,
    VOCAB_SORTS,
    MergeQuery,
    Paging,
    Search,
    VocabQuery,
    kind_arg,
    parse_hex,
    sort_arg,
    token_filters,
    with_page,
)
from webapp.storage.models import Corpus, Merge, Tokenizer, VocabEntry
from webapp.storage.slugs import looks_like_slug

__all__ = [  # the names re-exported from list_queries (the module's own are public too)
    "DEFAULT_PER_PAGE",
    "MATCH_KINDS",
    "MERGE_SORTS",
    "PER_PAGE_CHOICES",
    "VOCAB_KINDS",
    "VOCAB_SORTS",
    "MergeQuery",
    "Paging",
    "Search",
    "VocabQuery",
    "parse_hex",
    "sort_arg",
    "kind_arg",
    "token_filters",
    "with_page",
]


# ----- the tokeniser ------------------------------------------------------------------------------
def get_tokenizer(session: Session, slug: str) -> Tokenizer:
    """The live tokeniser with this slug; a missing and a deleted one get the same 404."""
    row = None
    if looks_like_slug(slug):
        row = session.scalar(
            select(Tokenizer).where(Tokenizer.slug == slug, Tokenizer.deleted_at.is_(None))
        )
    if row is None:
        raise _no_tokenizer()
    return row


# Built once: making the statement cost more than running it (the encode API's hot path).
_LIVE_TOKENIZER_ID = select(Tokenizer.id).where(
    Tokenizer.slug == bindparam("slug"), Tokenizer.deleted_at.is_(None)
)


def live_tokenizer_id(session: Session, slug: str) -> int:
    """get_tokenizer's id alone: one narrow Core query for the encode API's hot path, which
    needs nothing else of the row while the tokeniser is in convert's cache."""
    found = None
    if looks_like_slug(slug):
        found = session.connection().execute(_LIVE_TOKENIZER_ID, {"slug": slug}).scalar()
    if found is None:
        raise _no_tokenizer()
    return found


def _no_tokenizer() -> UserError:
    return UserError(
        "There is no tokeniser at this address (the link may be mistyped, or it was deleted).",
        status=404,
    )


def special_tokens(row: Tokenizer) -> dict[str, int]:
    return json.loads(row.special_tokens or "{}")


def base_size(row: Tokenizer) -> int:
    """Ids below this are bytes (or words mode's characters and `</w>`), not merges."""
    return row.vocab_size - row.merge_count - len(special_tokens(row))


def corpus_of(session: Session, row: Tokenizer) -> Corpus | None:
    if row.corpus_id is None:
        return None  # imported: no corpus
    return session.get(Corpus, row.corpus_id)


def id_limit(row: Tokenizer) -> int:
    """One more than the largest id: imported files may leave holes below it."""
    return row.id_limit or row.vocab_size


def check_token_id(row: Tokenizer, token_id: int, tok: Any = None) -> None:
    """404 for an id the tokeniser lacks; `tok` (its bpe.Tokenizer) settles ids in holes."""
    limit = id_limit(row)
    missing = not 0 <= token_id < limit or (tok is not None and not tok.has_id(token_id))
    if missing:
        holes = " (some ids in between are unused)" if limit != row.vocab_size else ""
        raise UserError(
            f"There is no token {token_id} in this tokeniser: its ids run 0 to {limit - 1}{holes}.",
            status=404,
        )


def check_ids(row: Tokenizer, ids: list[int], tok: Any, *, name: str = "Item") -> None:
    """422 naming the first id the tokeniser lacks (by its own vocabulary, so a special token
    above the learned ids and a hole below the last id are told apart)."""
    for position, token_id in enumerate(ids, start=1):
        if not tok.has_id(token_id):
            limit = id_limit(row)
            holes = " (some ids in between are unused)" if limit != row.vocab_size else ""
            raise UserError(
                f"{name} {position:,}, id {token_id:,}, is not in this tokeniser: its ids run"
                f" 0 to {limit - 1:,}{holes}.",
                status=422,
            )


# ----- filters -----------------------------------------------------------------------------------
def filter_conditions(entry: Any, query: Any) -> list[Any]:
    """The token filters of a query as conditions on a vocabulary row (or alias)."""
    conditions = []
    if query.category:
        conditions.append(entry.category == query.category)
    if query.min_length is not None:
        conditions.append(entry.byte_length >= query.min_length)
    if query.max_length is not None:
        conditions.append(entry.byte_length <= query.max_length)
    return conditions


# ----- pages --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Page:
    rows: list[Any]
    total: int
    paging: Paging

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.paging.per_page))

    def must_exist(self) -> Page:
        """This page, or a 404 for one past the last: "page 500 of 55" is not a page.

        >>> Page([], total=110, paging=Paging(page=3, per_page=50)).must_exist().pages
        3
        >>> Page([], total=110, paging=Paging(page=4, per_page=50)).must_exist()
        Traceback (most recent call last):
        ...
        webapp.refusals.UserError: There is no page 4 here: the list has 3 pages.
        """
        if self.paging.page > self.pages:
            count = f"{self.pages:,} page{'s' if self.pages != 1 else ''}"
            raise UserError(
                f"There is no page {self.paging.page:,} here: the list has {count}.", status=404
            )
        return self


def contains_bytes(session: Session, column: Any, needle: bytes) -> Any:
    """`needle in column` on binary data, byte-exact (LIKE is neither, for NUL or %)."""
    if session.get_bind().dialect.name == "postgresql":
        # position(needle IN haystack) is PostgreSQL's bytea substring search
        return func.position(bindparam("needle", needle, LargeBinary).op("IN")(column)) > 0
    return func.instr(column, bindparam("needle", needle, LargeBinary)) > 0


def contains_text(session: Session, column: Any, needle: str) -> Any:
    """`needle in column` on text, exact (LIKE is not, for % and _)."""
    if session.get_bind().dialect.name == "postgresql":
        return func.strpos(column, bindparam("text_needle", needle)) > 0
    return func.instr(column, bindparam("text_needle", needle)) > 0


def paged(
    session: Session, stmt: Select, order: tuple, paging: Paging, total: int | None = None
) -> Page:
    """One page of `stmt`; `total` when the caller already knows how many rows it has."""
    if total is None:
        query = select(func.count()).select_from(stmt.order_by(None).subquery())
        total = session.scalar(query) or 0
    offset = (paging.page - 1) * paging.per_page
    rows = session.execute(stmt.order_by(*order).limit(paging.per_page).offset(offset)).all()
    return Page(rows=list(rows), total=total, paging=paging)


def vocab_search(session: Session, row: Tokenizer, search: Search) -> Any | None:
    """The search box as a condition on a vocabulary row of `row`, or None when empty."""
    token_id = search.token_id()
    if token_id is not None:
        return VocabEntry.token_id == token_id
    needle = search.needle()
    if needle is None:
        return None
    found = contains_bytes(session, VocabEntry.token_bytes, needle)
    if row.encode_rule == "hf_pipeline" and search.match == "text":
        # Llama 2's rows keep `▁the` as the file spells it; the reader types " the", which its
        # shown text holds.
        found = or_(found, contains_text(session, VocabEntry.display_text, search.q))
    return found


def vocab_page(session: Session, row: Tokenizer, query: VocabQuery) -> Page:
    conditions = [VocabEntry.tokenizer_id == row.id]
    found = vocab_search(session, row, query.search)
    if found is not None:
        conditions.append(found)
    base = base_size(row)
    if row.imported:
        # The file's own ids: base tokens anywhere, specials among them; go by the rows. A
        # learned token is one a merge makes: in byte-level files every token longer than a
        # byte (one indexed comparison); in HF's whole pipeline, whose base can be characters
        # and `<0xNN>` bytes of any length (Llama 2), the merges say.
        not_special = VocabEntry.category != "special"
        made: Any = VocabEntry.byte_length > 1
        if row.encode_rule == "hf_pipeline":
            made = (
                select(Merge.new_id)
                .where(Merge.tokenizer_id == row.id, Merge.new_id == VocabEntry.token_id)
                .exists()
            )
        if query.kind == "learned":
            conditions += [made, not_special]
        elif query.kind == "base":
            conditions += [~made, not_special]
        elif query.kind == "special":
            conditions.append(VocabEntry.category == "special")
    elif query.kind == "learned":
        conditions.append(VocabEntry.token_id.between(base, base + row.merge_count - 1))
    elif query.kind == "base":
        conditions.append(VocabEntry.token_id < base)
    elif query.kind == "special":
        conditions.append(VocabEntry.token_id >= base + row.merge_count)
    conditions.extend(filter_conditions(VocabEntry, query))
    stmt = select(
        VocabEntry.token_id,
        VocabEntry.token_bytes,
        VocabEntry.byte_length,
        VocabEntry.char_length,
        VocabEntry.category,
        VocabEntry.pair_count,
        VocabEntry.is_special,
        VocabEntry.ends_word,
    ).where(and_(*conditions))
    return paged(session, stmt, VOCAB_SORTS[query.sort][1], query.paging)


def merges_page(session: Session, row: Tokenizer, query: MergeQuery) -> Page:
    """Merges in rank order with the bytes of both parts and of the merged token.

    Filtering, counting and paging run on the merges alone (joining the merged token only for
    a text or hex search); the three vocabulary joins are made for the page's rows only.
    """
    left, right, new = (aliased(VocabEntry) for _ in range(3))

    def joined(alias: Any, column: Any) -> Any:
        return and_(alias.tokenizer_id == Merge.tokenizer_id, alias.token_id == column)

    ranks = select(Merge.rank).where(Merge.tokenizer_id == row.id)
    on_new = filter_conditions(new, query)
    token_id = query.search.token_id()
    if token_id is not None:
        ranks = ranks.where(
            or_(Merge.new_id == token_id, Merge.left_id == token_id, Merge.right_id == token_id)
        )
    else:
        needle = query.search.needle()
        if needle is not None:
            on_new.append(contains_bytes(session, new.token_bytes, needle))
    if on_new:
        ranks = ranks.join(new, joined(new, Merge.new_id)).where(*on_new)
    if query.kind in ("base", "special"):
        ranks = ranks.where(false())  # every merged token is a learned one
    total = session.scalar(select(func.count()).select_from(ranks.subquery())) or 0
    paging = query.paging
    order = MERGE_SORTS[query.sort][1]
    # The page's ranks first, then their rows by that list: given `rank IN (subquery)`,
    # PostgreSQL planned whole-table joins of a 446,000-merge import (minutes for one page).
    page_ranks = session.scalars(
        ranks.order_by(*order).limit(paging.per_page).offset((paging.page - 1) * paging.per_page)
    ).all()
    if not page_ranks:
        return Page(rows=[], total=total, paging=paging)
    rows = session.execute(
        select(
            Merge.rank,
            Merge.left_id,
            Merge.right_id,
            Merge.new_id,
            Merge.pair_count,
            Merge.tokens_after,
            left.token_bytes.label("left_bytes"),
            left.ends_word.label("left_ends_word"),
            right.token_bytes.label("right_bytes"),
            right.ends_word.label("right_ends_word"),
            new.token_bytes.label("new_bytes"),
            new.ends_word.label("new_ends_word"),
        )
        .join(left, joined(left, Merge.left_id))
        .join(right, joined(right, Merge.right_id))
        .join(new, joined(new, Merge.new_id))
        .where(Merge.tokenizer_id == row.id, Merge.rank.in_(page_ranks))
        .order_by(*order)
    ).all()
    return Page(rows=list(rows), total=total, paging=paging)


def merges_using(session: Session, row: Tokenizer, token_id: int, *, limit: int = 20) -> Page:
    """Merges that take this token as one of their parts (its first uses)."""
    return merges_page(
        session,
        row,
        MergeQuery(search=Search(q=str(token_id), match="id"), paging=Paging(1, limit)),
    )
