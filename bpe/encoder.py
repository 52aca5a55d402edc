"""Encoding by our own rule, fast: repeatedly apply the learned pair with the lowest id, everywhere.

`bpe.reference.encode_reference` is the rule written literally (rescanning after every merge);
everything here gives exactly its ids (docs/algorithms.md, "Encoding"). A merge
(left, right) -> new_id always has left, right < new_id, so applying merge k can only create
pairs of rank greater than k. That lets ranks be taken from a heap in increasing order, each
applied at its candidate positions from left to right (the left-to-right scan of
`merge_pair`), which reproduces the rule exactly in O(n log n) instead of the O(n * merges) of
rescanning. Short sequences, the usual case for chunks, use a rescanning loop with the pairs'
ranks kept in a list, which is faster when n is small.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable, Iterable
from typing import TypeVar

from bpe.reference import encode_reference

_T = TypeVar("_T")

# Below this length rescanning (each pass in C) beats the heap's bookkeeping: timed on the
# distinct naive pieces of 2 MB of code, passes take 29 us against the heap's 35 us at 24-31
# bytes, and are slower from ~40 bytes on.
_HEAP_THRESHOLD = 32
# Pieces shorter than this many bytes are encoded whole, by the rescanning loop, never cut.
SHORT_PIECE_BYTES = _HEAP_THRESHOLD
_NO_RANK = 1 << 62  # ranks.get's default while rescanning: later than any learned pair


def encode_ids(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    """Apply the learned merges (pair -> new_id, the id doubling as rank) to a sequence of ids."""
    if len(ids) < 2:
        return list(ids)
    if len(ids) < _HEAP_THRESHOLD:
        return _encode_by_passes(list(ids), ranks)
    return _encode_with_heap(ids, ranks)


def fill_cache(
    cache: dict[str, list[int]],
    pieces: list[str],
    encode: Callable[[str], list[int]],
    limit: int,
    encode_many: Callable[[set[str]], dict[str, list[int]]] | None = None,
) -> dict[str, list[int]]:
    """A table holding every piece's ids: each distinct piece not in `cache` is encoded once by
    `encode` (or all of them by `encode_many`) and added to it. Cold text repeats its pieces
    (2 MB of English: 422k chunks, 26k distinct), so the Python work is per distinct piece and
    the rest runs in C. Past `limit` entries the cache starts over; the table returned still
    holds all of this text's pieces."""
    new = set(pieces).difference(cache)
    if not new:
        return cache
    if encode_many is not None:
        encoded = encode_many(new)
    else:
        encoded = dict(zip(new, map(encode, new), strict=True))
    if len(cache) + len(encoded) <= limit:
        cache.update(encoded)
        return cache
    table = cache | encoded
    cache.clear()
    if len(encoded) <= limit:
        cache.update(encoded)
    return table


def encode_all(
    cache: dict[str, list[int]],
    pieces: list[str],
    encode: Callable[[str], list[int]],
    limit: int,
    encode_many: Callable[[set[str]], dict[str, list[int]]] | None = None,
) -> list[list[int]]:
    """Every piece's ids, in order, through `fill_cache`."""
    return _look_up(cache, pieces, encode, limit, encode_many, list)


def encode_joined(
    cache: dict[str, list[int]],
    pieces: list[str],
    encode: Callable[[str], list[int]],
    limit: int,
    encode_many: Callable[[set[str]], dict[str, list[int]]] | None = None,
) -> list[int]:
    """`encode_all`'s lists joined, without building the list of lists first."""
    return _look_up(cache, pieces, encode, limit, encode_many, _joined)


def _joined(encodings: Iterable[list[int]]) -> list[int]:
    return list(itertools.chain.from_iterable(encodings))


def _look_up(
    cache: dict[str, list[int]],
    pieces: list[str],
    encode: Callable[[str], list[int]],
    limit: int,
    encode_many: Callable[[set[str]], dict[str, list[int]]] | None,
    collect: Callable[[Iterable[list[int]]], _T],
) -> _T:
    table = fill_cache(cache, pieces, encode, limit, encode_many)
    try:
        return collect(map(table.__getitem__, pieces))
    except KeyError:  # another thread started the shared cache over since it was filled
        private = fill_cache({}, pieces, encode, len(pieces), encode_many)
        return collect(map(private.__getitem__, pieces))


def encode_pieces(
    new: set[str],
    ranks: dict[tuple[int, int], int],
    whole: dict[str, int],
    encode_other: Callable[[str], list[int]],
) -> dict[str, list[int]]:
    """Each of `new`'s pieces and its ids: those that are one token (`whole`, see
    `bpe.stitch.whole_tokens`) by one lookup, those under 32 bytes by the rescanning loop over
    their bytes, the others by `encode_other`. The lookups, the sorting and the calls run in C, one
    Python frame per short piece (most of English's and code's 15-25k new pieces per 2 MB)."""
    table = {piece: [whole[piece]] for piece in whole.keys() & new}
    rest = new.difference(table) if table else new
    # Short in bytes, whatever the script: a word of accented Latin, Cyrillic or Devanagari is
    # as cheap to rescan whole as an English one, and cutting it first only adds the cut's cost.
    candidates = [piece for piece in rest if len(piece) < _HEAP_THRESHOLD]
    encoded = zip(candidates, map(str.encode, candidates), strict=True)
    short = [(piece, data) for piece, data in encoded if len(data) < _HEAP_THRESHOLD]
    table.update(
        zip(
            map(operator.itemgetter(0), short),
            map(
                _encode_by_passes,
                map(list, map(operator.itemgetter(1), short)),
                itertools.repeat(ranks),
            ),
            strict=True,
        )
    )
    if len(short) < len(rest):
        others = rest.difference(table)
        table.update(zip(others, map(encode_other, others), strict=True))
    return table


class CharacterEncoder(dict[str, tuple[int, ...]]):
    """character -> the ids of its UTF-8 bytes encoded alone, filled on first use.

    Text that holds no partial token (`bpe.cuts`: a token with part of a character across a
    character boundary) encodes as the sequence of its characters encoded alone, merged on:
    every token that crosses a character boundary is then made of whole characters, so a
    character's bytes only ever merge among themselves until the character is one token, and
    merging them first changes nothing for the merges between characters (those have larger
    ids than the character's token, and a token still in parts takes part in none of them).
    """

    def __init__(self, ranks: dict[tuple[int, int], int]) -> None:
        super().__init__()
        self.ranks = ranks

    def __missing__(self, char: str) -> tuple[int, ...]:
        ids = tuple(encode_ids(list(char.encode("utf-8")), self.ranks))
        self[char] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """The ids of text that holds no partial token."""
        return encode_ids(
            list(itertools.chain.from_iterable(map(self.__getitem__, text))), self.ranks
        )


def _encode_by_passes(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    """The rescanning rule for short sequences: the ranks of all pairs kept in a list (min and
    index run in C), the leftmost lowest merged, and only its two new neighbour pairs looked up.
    Merging the leftmost occurrence one at a time is the rule's left-to-right pass: the pairs a
    merge makes rank later, and an overlapping occurrence ("aaa") is gone once its left is."""
    get = ranks.get
    found = list(map(get, itertools.pairwise(ids), itertools.repeat(_NO_RANK)))
    while found:
        best = min(found)
        if best == _NO_RANK:
            break
        at = found.index(best)
        # One slot set, one deleted: the slice assignment it replaced (a tuple built, the list
        # resized) was 5-10% slower over the distinct words of ten UDHR scripts.
        ids[at] = best
        del ids[at + 1], found[at]
        if at:
            found[at - 1] = get((ids[at - 1], best), _NO_RANK)
        if at < len(found):
            found[at] = get((best, ids[at + 1]), _NO_RANK)
    return ids


# The literal rule lives with the reference trainer; the old name stays for callers of it.
_encode_by_rescanning = encode_reference


def _encode_with_heap(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    # The heap holds ranks only; each rank has a bucket of candidate positions. A bucket is
    # sorted once when its rank comes up (positions added while earlier ranks were applied can
    # arrive out of order), which is far cheaper than one heap entry per position.
    n = len(ids)
    # symbol[i]: the token starting at position i, -1 once i is inside a merged token. The
    # extra last slot is a sentinel, which symbol[-1] also reads: no pair ever holds it, so the
    # first and last positions need no bounds checks.
    symbol = [*ids, -1]
    nxt = list(range(1, n + 2))  # nxt[i]: next live position (n: none)
    prv = list(range(-1, n))  # prv[i]: previous live position (-1: none)
    get = ranks.get
    buckets: dict[int, list[int]] = {}  # rank -> positions where that pair may start
    pair_of: dict[int, tuple[int, int]] = {}  # rank -> its pair, for the validity check
    for i, pair in enumerate(itertools.pairwise(ids)):
        rank = get(pair)
        if rank is not None:
            bucket = buckets.get(rank)
            if bucket is None:
                buckets[rank] = [i]
                pair_of[rank] = pair
            else:
                bucket.append(i)
    pending = list(buckets)
    heapq.heapify(pending)
    heappush = heapq.heappush
    while pending:
        rank = heapq.heappop(pending)
        positions = buckets.pop(rank)
        if len(positions) > 1:
            positions.sort()
        left, right = pair_of[rank]
        for i in positions:
            # Stale if the pair starting at i has changed since i was filed (tokens only grow,
            # so a pair never comes back at the same position once it is gone).
            if symbol[i] != left:
                continue
            j = nxt[i]
            if symbol[j] != right:
                continue
            symbol[i] = rank
            symbol[j] = -1
            k = nxt[j]
            nxt[i] = k
            prv[k] = i
            # Filing the two new neighbour pairs is written out twice rather than through a
            # helper: a call per merge costs more than the rest of the loop body.
            after = symbol[k]
            new_rank = get((rank, after))
            if new_rank is not None:
                bucket = buckets.get(new_rank)
                if bucket is None:
                    buckets[new_rank] = [i]
                    pair_of[new_rank] = (rank, after)
                    heappush(pending, new_rank)
                else:
                    bucket.append(i)
            p = prv[i]
            before = symbol[p]
            new_rank = get((before, rank))
            if new_rank is not None:
                bucket = buckets.get(new_rank)
                if bucket is None:
                    buckets[new_rank] = [p]
                    pair_of[new_rank] = (before, rank)
                    heappush(pending, new_rank)
                else:
                    bucket.append(p)
    out: list[int] = []
    i = 0
    while i < n:
        out.append(symbol[i])
        i = nxt[i]
    return out
