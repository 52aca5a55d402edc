"""`derive_merges` (a candidate pair of parts checked by walking their merge trees) gives
exactly `derive_merges_by_loop`'s answer (each token through tiktoken's joining loop), on the
three reference files and on random rank tables: BPE-like ones, where the check settles nearly
every token, and scrambled ones, with orphans, parts ranked above their token, ties between a
merge and a join across the cut, and parts without a whole tree (docs/algorithms.md,
"Deriving merges from ranks").

The saving is counted, not timed: the keys looked up in the rank table.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe import rank_rule
from bpe.import_tiktoken import parse_rank_file
from bpe.rank_rule import derive_merges, derive_merges_by_loop, split_piece
from tests.reference_files import NAMES, reference_dir

BYTES = {bytes([b]): b for b in range(256)}


def bpe_like(seed: int, size: int, alphabet: bytes, *, trained: bool = False) -> dict[bytes, int]:
    """Tokens made by joining two earlier tokens, ranked in the order made (a trained file's
    shape), over a small alphabet so that tokens overlap a lot. `trained`: only tokens that
    tiktoken's loop makes from the two joined (a real file's shape: no orphans)."""
    rng = random.Random(seed)
    ranks = dict(BYTES)
    pool = [bytes([c]) for c in alphabet]
    while len(ranks) < 256 + size:
        left, right = rng.choice(pool), rng.choice(pool)
        token = left + right
        if token in ranks or len(token) > 12:
            continue
        if trained and split_piece(token, ranks) != [left, right]:
            continue
        ranks[token] = len(ranks)
        pool.append(token)
    return ranks


def scrambled(seed: int, size: int, alphabet: bytes, swaps: int) -> dict[bytes, int]:
    """A BPE-like table with `swaps` pairs of ranks exchanged (bytes included) and a few
    random strings added: parts ranked above their token, orphans, equal joined bytes."""
    rng = random.Random(seed)
    ranks = bpe_like(seed, size, alphabet)
    for _ in range(size // 4):
        token = bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 9)))
        ranks.setdefault(token, len(ranks))
    tokens = list(ranks)
    for _ in range(swaps):
        a, b = rng.choice(tokens), rng.choice(tokens)
        ranks[a], ranks[b] = ranks[b], ranks[a]
    return ranks


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    size=st.integers(1, 300),
    alphabet=st.sampled_from([b"ab", b"abc", b"abcd", b"a b\n", bytes(range(97, 110))]),
    trained=st.booleans(),
)
def test_property_bpe_like_tables_derive_as_the_loop_does(seed, size, alphabet, trained):
    ranks = bpe_like(seed, size, alphabet, trained=trained)
    assert derive_merges(ranks) == derive_merges_by_loop(ranks)


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    size=st.integers(1, 200),
    alphabet=st.sampled_from([b"ab", b"abc", b"abcd"]),
    swaps=st.integers(0, 40),
)
def test_property_scrambled_tables_derive_as_the_loop_does(seed, size, alphabet, swaps):
    ranks = scrambled(seed, size, alphabet, swaps)
    assert derive_merges(ranks) == derive_merges_by_loop(ranks)


@pytest.mark.parametrize(
    "ranks",
    [
        # which of a merge inside a part and a join across the cut comes first:
        BYTES | {b"ab": 256, b"bc": 257, b"abc": 258},  # ab first, then ab|c
        BYTES | {b"bc": 256, b"ab": 257, b"abc": 258},  # bc first, then a|bc
        BYTES | {b"ab": 256, b"cd": 257, b"bc": 258, b"abcd": 259},  # ab|cd, bc too late
        BYTES | {b"bc": 256, b"ab": 257, b"cd": 258, b"abcd": 259},  # bc first: an orphan
        BYTES | {b"aa": 256, b"aaaa": 257, b"aaa": 258, b"aaaaaaa": 259},  # equal joined bytes
        BYTES | {b"ab": 256, b"abab": 257, b"ba": 258, b"ababab": 259, b"bab": 260},
        # a part ranked above its token, a single byte ranked high
        {bytes([b]): b + 10 for b in range(256)} | {b"ab": 0, b"abc": 1, b"bc": 2},
        # the only candidate's right part is an orphan: the loop decides
        BYTES | {b"bc": 256, b"ab": 257, b"cd": 258, b"abcd": 259, b"xabcd": 260, b"xa": 261},
    ],
)
def test_hand_made_tables_derive_as_the_loop_does(ranks):
    assert derive_merges(ranks) == derive_merges_by_loop(ranks)


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_files_derive_as_the_loop_does(name):
    ranks = parse_rank_file((reference_dir() / f"{name}.tiktoken").read_bytes())
    merges, orphans = derive_merges(ranks)
    assert (merges, orphans) == derive_merges_by_loop(ranks)
    assert orphans == [] and len(merges) == len(ranks) - 256


class CountingRanks(dict[bytes, int]):
    """token -> rank that counts the keys looked up."""

    lookups = 0

    def get(self, key: bytes, default: object = None) -> object:  # type: ignore[override]
        self.lookups += 1
        return super().get(key, default)

    def __getitem__(self, key: bytes) -> int:
        self.lookups += 1
        return super().__getitem__(key)


def lookups(derive, ranks: dict[bytes, int]) -> int:
    counted = CountingRanks(ranks)
    derive(counted)
    return counted.lookups


def test_a_bpe_like_table_is_settled_by_the_check_with_fewer_lookups(monkeypatch):
    # Every part of a trained-like table has a whole tree of merges, so no token runs the
    # loop; and the check looks up fewer keys (o200k_base: 1.67 M against the loop's 2.99 M).
    ranks = bpe_like(7, 3000, bytes(range(97, 123)), trained=True)
    assert max(map(len, ranks)) >= 8
    loop = lookups(derive_merges_by_loop, ranks)
    monkeypatch.setattr(rank_rule, "split_piece", None)  # any call fails
    ours = lookups(derive_merges, ranks)
    assert ours < loop * 0.6, (ours, loop)
