"""The query strings of every list (vocabulary, merges, the side-by-side merges): parsed and
checked in one place, so the same parameter is refused the same way everywhere, and a query
turned back into the parameters that reproduce it (for links and pagers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from bpe.token_info import CATEGORIES
from webapp.refusals import UserError
from webapp.storage.models import Merge, VocabEntry, in_id_range

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
MERGE_SORTS = {
    # name -> (label, ORDER BY columns); the rank breaks ties
    "rank": ("learned first", (Merge.rank.asc(),)),
    "-rank": ("learned last first", (Merge.rank.desc(),)),
    "-count": ("most frequent pair first", (Merge.pair_count.desc(), Merge.rank.asc())),
    "count": ("least frequent pair first", (Merge.pair_count.asc(), Merge.rank.asc())),
}
MAX_TOKEN_BYTES = 10**6  # bound of min_len / max_len
_HEX_NOISE = re.compile(r"0x|\\x|[\s,:]", re.IGNORECASE)


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
        """The id searched for; ids no column can hold match nothing (not an overflow)."""
        if self.match != "id" or not self.q.strip():
            return None
        try:
            value = int(self.q.strip())
        except ValueError:
            raise UserError(f"{self.q[:40]!r} is not a token id.", status=400) from None
        return value if in_id_range(value) else NO_TOKEN


NO_TOKEN = -1  # an id no token has, inside every back end's integer range


def sort_arg(args: Any, sorts: dict[str, Any], default: str) -> str:
    """`sort`, checked against the sorts this list offers (the same check on every list)."""
    sort = args.get("sort", "") or default
    if sort not in sorts:
        raise UserError(f"sort must be one of {', '.join(sorts)}.", status=400)
    return sort


def kind_arg(args: Any, default: str) -> str:
    """`kind` (VOCAB_KINDS), checked the same on every list."""
    kind = args.get("kind") or default
    if kind not in VOCAB_KINDS:
        raise UserError(f"kind must be one of {', '.join(VOCAB_KINDS)}.", status=400)
    return kind


def token_filters(args: Any) -> dict[str, Any]:
    """`category`, `min_len`, `max_len`: the token filters, checked the same on every list."""
    category = args.get("category", "")
    if category and category not in CATEGORIES:
        raise UserError(f"category must be one of {', '.join(CATEGORIES)}.", status=400)
    return {
        "category": category,
        "min_length": _int_arg(args, "min_len", None, low=0, high=MAX_TOKEN_BYTES),
        "max_length": _int_arg(args, "max_len", None, low=0, high=MAX_TOKEN_BYTES),
    }


def _filter_params(query: Any, default_sort: str) -> dict[str, Any]:
    return {
        "kind": query.kind if query.kind != query.default_kind else "",
        "category": query.category,
        "min_len": query.min_length,
        "max_len": query.max_length,
        "sort": query.sort if query.sort != default_sort else "",
    }


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
        return cls(
            search=Search.from_args(args),
            kind=kind_arg(args, default_kind),
            **token_filters(args),
            sort=sort_arg(args, VOCAB_SORTS, "id"),
            paging=Paging.from_args(args),
            default_kind=default_kind,
        )

    def query(self, **changes: Any) -> dict[str, Any]:
        """Query-string parameters that reproduce this query (with changes), empties left out."""
        return _query_params(self.search, self.paging, _filter_params(self, "id"), changes)


@dataclass(frozen=True)
class MergeQuery:
    """A page of merges: the search and the token filters apply to the merged token (which is
    always a learned one, so `kind=base` or `special` matches nothing)."""

    search: Search = Search()
    kind: str = "all"
    category: str = ""
    min_length: int | None = None
    max_length: int | None = None
    sort: str = "rank"
    paging: Paging = Paging()
    default_kind: str = "all"

    @classmethod
    def from_args(cls, args: Any) -> MergeQuery:
        return cls(
            search=Search.from_args(args),
            kind=kind_arg(args, "all"),
            **token_filters(args),
            sort=sort_arg(args, MERGE_SORTS, "rank"),
            paging=Paging.from_args(args),
        )

    def query(self, **changes: Any) -> dict[str, Any]:
        return _query_params(self.search, self.paging, _filter_params(self, "rank"), changes)


def _query_params(
    search: Search, paging: Paging, filters: dict[str, Any], changes: dict[str, Any]
) -> dict[str, Any]:
    values = {
        "q": search.q,
        "match": search.match if search.q else "",
        **filters,
        "per_page": paging.per_page if paging.per_page != DEFAULT_PER_PAGE else "",
        "page": paging.page if paging.page != 1 else "",
        **changes,
    }
    return {k: v for k, v in values.items() if v not in ("", None)}


def with_page(query: Any, page: int) -> Any:
    return replace(query, paging=replace(query.paging, page=page))
