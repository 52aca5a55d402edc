"""Importing a tiktoken rank file takes time linear in its size, however long one token is.

The work is counted, not timed: the ranks are ints that count every comparison made on them
and the table counts the bytes of every key looked up, so the measure is the same on a loaded
machine. Doubling a long token's length must roughly double the count (n log n gives ~2.1);
the quadratic scan it replaces gave ~4.
"""

from __future__ import annotations

import base64

import pytest

from bpe.importers import import_bytes
from bpe.rank_rule import derive_merges


class Work:
    def __init__(self) -> None:
        self.count = 0


class CountedRank(int):
    """A rank that adds one to its `work` on every comparison (min, list.index, heapq)."""

    work: Work

    def _cmp(self, other: object, op: str) -> bool:
        self.work.count += 1
        return bool(getattr(int, op)(self, other))

    def __lt__(self, other: object) -> bool:  # type: ignore[override]
        return self._cmp(other, "__lt__")

    def __le__(self, other: object) -> bool:  # type: ignore[override]
        return self._cmp(other, "__le__")

    def __gt__(self, other: object) -> bool:  # type: ignore[override]
        return self._cmp(other, "__gt__")

    def __ge__(self, other: object) -> bool:  # type: ignore[override]
        return self._cmp(other, "__ge__")

    def __eq__(self, other: object) -> bool:
        return self._cmp(other, "__eq__")

    __hash__ = int.__hash__


class CountedRanks(dict[bytes, int]):
    """token -> rank that adds the length of every key looked up to `work`."""

    def __init__(self, ranks: dict[bytes, int], work: Work) -> None:
        rank_type = type("Rank", (CountedRank,), {"work": work})
        super().__init__({token: rank_type(rank) for token, rank in ranks.items()})
        self.work = work

    def get(self, key: bytes, default: object = None) -> object:  # type: ignore[override]
        self.work.count += len(key)
        return super().get(key, default)

    def __getitem__(self, key: bytes) -> int:
        self.work.count += len(key)
        return super().__getitem__(key)


def byte_ranks() -> dict[bytes, int]:
    return {bytes([b]): b for b in range(256)}


def pairs_then_run(n: int) -> dict[bytes, int]:
    """`aa`, then a run of n `a`s: every pair of it is ranked, the run has no two-part merge."""
    return byte_ranks() | {b"aa": 256, b"a" * n: 257}


def doublings(n: int) -> dict[bytes, int]:
    """`a`, `aa`, `aaaa`, ... up to n: each is the merge of two halves."""
    ranks = byte_ranks()
    length = 2
    while length <= n:
        ranks[b"a" * length] = len(ranks)
        length *= 2
    return ranks


def work_of(ranks: dict[bytes, int]) -> int:
    work = Work()
    derive_merges(CountedRanks(ranks, work))
    return work.count


@pytest.mark.parametrize("table", [pairs_then_run, doublings], ids=["pairs-then-run", "doublings"])
def test_a_token_twice_as_long_takes_about_twice_the_work(table):
    small, large = work_of(table(16384)), work_of(table(32768))
    assert large / small < 2.5, (small, large)


def test_long_tokens_still_get_their_merges():
    ranks = doublings(32768)
    merges, orphans = derive_merges(ranks)
    half = ranks[b"a" * 16384]
    assert merges[-1] == (half, half, ranks[b"a" * 32768])
    assert orphans == []
    _, orphans = derive_merges(pairs_then_run(32768))
    assert orphans == [257]  # 16384 parts of `aa` are left: no single pair makes the run


def test_a_rank_file_with_a_32_kb_token_imports():
    lines = [f"{base64.b64encode(t).decode()} {r}" for t, r in pairs_then_run(32768).items()]
    tok = import_bytes("\n".join(lines).encode(), filename="long.tiktoken", pattern="gpt2")
    assert tok.tokens is not None and tok.tokens[257] == b"a" * 32768
