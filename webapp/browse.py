"""The SQL behind the tokeniser pages and the JSON API: find a tokeniser, page its vocabulary
and its merges. Filtering, sorting and paging all happen in the database, so a page of a
50,000-entry vocabulary costs the same as a page of a small one.

Both the HTML views and the API read their parameters through `VocabQuery.from_args` and
`MergeQuery.from_args`, so a link and an API call with the same query string agree.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import LargeBinary, Select, and_, bindparam, func, or_, select
from sqlalchemy.orm import Session, aliased

from bpe.token_info import CATEGORIES
from webapp.errors import UserError
from webapp.models import Corpus, Merge, Tokenizer, VocabEntry
from webapp.slugs import looks_like_slug
from webapp.token_display import TokenInfo

PER_PAGE_CHOICES = (25, 50, 100, 200)
DEFAULT_PER_PAGE = 50
MATCH_KINDS = ("text", "hex", "id")
VOCAB_SORTS = {
    # name -> (label, ORDER BY columns); the id breaks ties so paging is stable
    "id": ("id ↑", (VocabEntry.token_id.asc(),)),
    "-id": ("id ↓", (VocabEntry.token_id.desc(),)),
    "-length": ("longest first", (VocabEntry.byte_length.desc(), VocabEntry.token_id.asc())),
    "length": ("shortest first", (VocabEntry.byte_length.asc(), VocabEntry.token_id.asc())),
    "-count": (
        "most frequent pair first",
        (VocabEntry.pair_count.is_(None), VocabEntry.pair_count.desc(), VocabEntry.token_id),
    ),
    "count": (
        "least frequent pair first",
        (VocabEntry.pair_count.is_(None), VocabEntry.pair_count.asc(), VocabEntry.token_id),
    ),
}
VOCAB_KINDS = {
    # name -> label; which ids: merges learned from the corpus, the base ids, special tokens
    "learned": "learned tokens",
    "base": "base bytes or characters",
    "special": "special tokens",
    "all": "all tokens",
}
_HEX_NOISE = re.compile(r"0x|\\x|[\s,:]", re.IGNORECASE)


# ----- the tokeniser ------------------------------------------------------------------------------
def get_tokenizer(session: Session, slug: str) -> Tokenizer:
    """The live tokeniser with this slug; a missing and a deleted one get the same 404."""
    row = None
    if looks_like_slug(slug):
        row = session.scalar(
            select(Tokenizer).where(Tokenizer.slug == slug, Tokenizer.deleted_at.is_(None))
        )
    if row is None:
        raise UserError(
            "There is no tokeniser at this address (the link may be mistyped, or it was deleted).",
            status=404,
        )
    return row


def special_tokens(row: Tokenizer) -> dict[str, int]:
    return json.loads(row.special_tokens or "{}")


def base_size(row: Tokenizer) -> int:
    """Ids below this are bytes (or words mode's characters and `</w>`), not merges."""
    return row.vocab_size - row.merge_count - len(special_tokens(row))


def corpus_of(session: Session, row: Tokenizer) -> Corpus | None:
    return session.get(Corpus, row.corpus_id)


def check_token_id(row: Tokenizer, token_id: int) -> None:
    if not 0 <= token_id < row.vocab_size:
        raise UserError(
            f"There is no token {token_id} in this tokeniser: "
            f"its ids run 0 to {row.vocab_size - 1}.",
            status=404,
        )


# ----- query-string parsing --------------------------------------------------------------------
def _int_arg(args: Any, name: str, default: int | None, *, low: int, high: int) -> int | None:
    raw = (args.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UserError(f"{name} must be a whole number, not {raw[:40]!r}.", status=400) from None
    if not low <= value <= high:
        raise UserError(f"{name} must be between {low} and {high}, not {value}.", status=400)
    return value


def parse_hex(raw: str) -> bytes:
    """'e4 b8', '0xE4B8', '\\xe4\\xb8' -> b'\\xe4\\xb8'; a clear 400 for anything else."""
    digits = _HEX_NOISE.sub("", raw)
    if not digits or len(digits) % 2 or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        raise UserError(
            f"{raw[:40]!r} is not hex bytes: give pairs of hex digits, like 'e4 b8' or '0x20'.",
            status=400,
        )
    return bytes.fromhex(digits)


@dataclass(frozen=True)
class Paging:
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    @classmethod
    def from_args(cls, args: Any) -> Paging:
        page = _int_arg(args, "page", 1, low=1, high=10**7)
        per_page = _int_arg(args, "per_page", DEFAULT_PER_PAGE, low=1, high=max(PER_PAGE_CHOICES))
        return cls(page=page or 1, per_page=per_page or DEFAULT_PER_PAGE)


@dataclass(frozen=True)
class Search:
    """A search box: text (a substring of the token's bytes), hex bytes, or a token id."""

    q: str = ""
    match: str = "text"

    @classmethod
    def from_args(cls, args: Any) -> Search:
        match = args.get("match", "text")
        if match not in MATCH_KINDS:
            raise UserError(f"match must be one of {', '.join(MATCH_KINDS)}.", status=400)
        return cls(q=args.get("q", "")[:200], match=match)

    def needle(self) -> bytes | None:
        if not self.q:
            return None
        return parse_hex(self.q) if self.match == "hex" else self.q.encode("utf-8", "replace")

    def token_id(self) -> int | None:
        if self.match != "id" or not self.q.strip():
            return None
        try:
            return int(self.q.strip())
        except ValueError:
            raise UserError(f"{self.q[:40]!r} is not a token id.", status=400) from None


@dataclass(frozen=True)
class VocabQuery:
    search: Search = Search()
    kind: str = "all"  # VOCAB_KINDS: which part of the id range
    category: str = ""
    min_length: int | None = None
    max_length: int | None = None
    sort: str = "id"
    paging: Paging = Paging()
    default_kind: str = "all"  # the page starts on learned tokens; the API on all of them

    @classmethod
    def from_args(cls, args: Any, *, default_kind: str = "all") -> VocabQuery:
        kind = args.get("kind") or default_kind
        if kind not in VOCAB_KINDS:
            raise UserError(f"kind must be one of {', '.join(VOCAB_KINDS)}.", status=400)
        category = args.get("category", "")
        if category and category not in CATEGORIES:
            raise UserError(f"category must be one of {', '.join(CATEGORIES)}.", status=400)
        sort = args.get("sort", "id")
        if sort not in VOCAB_SORTS:
            raise UserError(f"sort must be one of {', '.join(VOCAB_SORTS)}.", status=400)
        return cls(
            search=Search.from_args(args),
            kind=kind,
            category=category,
            min_length=_int_arg(args, "min_len", None, low=0, high=10**6),
            max_length=_int_arg(args, "max_len", None, low=0, high=10**6),
            sort=sort,
            paging=Paging.from_args(args),
            default_kind=default_kind,
        )

    def query(self, **changes: Any) -> dict[str, Any]:
        """Query-string parameters that reproduce this query (with changes), empties left out."""
        filters = {
            "kind": self.kind if self.kind != self.default_kind else "",
            "category": self.category,
            "min_len": self.min_length,
            "max_len": self.max_length,
            "sort": self.sort if self.sort != "id" else "",
        }
        return _query_params(self.search, self.paging, filters, changes)


@dataclass(frozen=True)
class MergeQuery:
    search: Search = Search()
    paging: Paging = Paging()

    @classmethod
    def from_args(cls, args: Any) -> MergeQuery:
        return cls(search=Search.from_args(args), paging=Paging.from_args(args))

    def query(self, **changes: Any) -> dict[str, Any]:
        return _query_params(self.search, self.paging, {}, changes)


def _query_params(search: Search, paging: Paging, filters: dict, changes: dict) -> dict[str, Any]:
    values = {
        "q": search.q,
        "match": search.match if search.q else "",
        **filters,
        "per_page": paging.per_page if paging.per_page != DEFAULT_PER_PAGE else "",
        "page": paging.page if paging.page != 1 else "",
        **changes,
    }
    return {k: v for k, v in values.items() if v not in ("", None)}


# ----- pages --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Page:
    rows: list[Any]
    total: int
    paging: Paging

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.paging.per_page))

    @property
    def first_index(self) -> int:
        return (self.paging.page - 1) * self.paging.per_page


def contains_bytes(session: Session, column: Any, needle: bytes) -> Any:
    """`needle in column` on binary data, byte-exact (LIKE is neither, for NUL or %)."""
    if session.get_bind().dialect.name == "postgresql":
        # position(needle IN haystack) is PostgreSQL's bytea substring search
        return func.position(bindparam("needle", needle, LargeBinary).op("IN")(column)) > 0
    return func.instr(column, bindparam("needle", needle, LargeBinary)) > 0


def _paged(session: Session, stmt: Select, order: tuple, paging: Paging) -> Page:
    total = session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery())) or 0
    offset = (paging.page - 1) * paging.per_page
    rows = session.execute(stmt.order_by(*order).limit(paging.per_page).offset(offset)).all()
    return Page(rows=list(rows), total=total, paging=paging)


def vocab_page(session: Session, row: Tokenizer, query: VocabQuery) -> Page:
    conditions = [VocabEntry.tokenizer_id == row.id]
    token_id = query.search.token_id()
    if token_id is not None:
        conditions.append(VocabEntry.token_id == token_id)
    else:
        needle = query.search.needle()
        if needle is not None:
            conditions.append(contains_bytes(session, VocabEntry.token_bytes, needle))
    base = base_size(row)
    if query.kind == "learned":
        conditions.append(VocabEntry.token_id.between(base, base + row.merge_count - 1))
    elif query.kind == "base":
        conditions.append(VocabEntry.token_id < base)
    elif query.kind == "special":
        conditions.append(VocabEntry.token_id >= base + row.merge_count)
    if query.category:
        conditions.append(VocabEntry.category == query.category)
    if query.min_length is not None:
        conditions.append(VocabEntry.byte_length >= query.min_length)
    if query.max_length is not None:
        conditions.append(VocabEntry.byte_length <= query.max_length)
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
    return _paged(session, stmt, VOCAB_SORTS[query.sort][1], query.paging)


def merges_page(session: Session, row: Tokenizer, query: MergeQuery) -> Page:
    """Merges in rank order with the bytes of both parts and of the merged token.

    Filtering, counting and paging run on the merges alone (joining the merged token only for
    a text or hex search); the three vocabulary joins are made for the page's rows only.
    """
    left, right, new = (aliased(VocabEntry) for _ in range(3))

    def joined(alias: Any, column: Any) -> Any:
        return and_(alias.tokenizer_id == Merge.tokenizer_id, alias.token_id == column)

    ranks = select(Merge.rank).where(Merge.tokenizer_id == row.id)
    token_id = query.search.token_id()
    if token_id is not None:
        ranks = ranks.where(
            or_(Merge.new_id == token_id, Merge.left_id == token_id, Merge.right_id == token_id)
        )
    else:
        needle = query.search.needle()
        if needle is not None:
            ranks = ranks.join(new, joined(new, Merge.new_id)).where(
                contains_bytes(session, new.token_bytes, needle)
            )
    total = session.scalar(select(func.count()).select_from(ranks.subquery())) or 0
    paging = query.paging
    page_ranks = (
        ranks.order_by(Merge.rank)
        .limit(paging.per_page)
        .offset((paging.page - 1) * paging.per_page)
    )
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
        .where(Merge.tokenizer_id == row.id, Merge.rank.in_(page_ranks.scalar_subquery()))
        .order_by(Merge.rank)
    ).all()
    return Page(rows=list(rows), total=total, paging=paging)


def merges_using(session: Session, row: Tokenizer, token_id: int, *, limit: int = 20) -> Page:
    """Merges that take this token as one of their parts (its first uses)."""
    return merges_page(
        session,
        row,
        MergeQuery(search=Search(q=str(token_id), match="id"), paging=Paging(1, limit)),
    )


# ----- rows -> display --------------------------------------------------------------------------
@dataclass(frozen=True)
class Describer:
    """Turns stored ids and bytes into TokenInfo; knows the tokeniser's id layout."""

    base: int
    merge_end: int
    words: bool

    @classmethod
    def for_row(cls, row: Tokenizer) -> Describer:
        base = base_size(row)
        return cls(base=base, merge_end=base + row.merge_count, words=row.mode == "words")

    def info(self, token_id: int, data: bytes, *, special: bool = False, ends_word: bool = False):
        rank = token_id - self.base if self.base <= token_id < self.merge_end else None
        return TokenInfo(
            token_id,
            bytes(data),
            rank=None if special else rank,
            special=special or token_id >= self.merge_end,
            ends_word=ends_word,
            base_kind="character" if self.words else "byte",
        )


def with_page(query: Any, page: int) -> Any:
    return replace(query, paging=replace(query.paging, page=page))
