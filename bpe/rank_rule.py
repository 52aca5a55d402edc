"""tiktoken's encoding rule, in pure Python: join by the rank of the joined bytes.

tiktoken stores no merge list, only `mergeable_ranks` (token bytes -> rank, the rank doubling
as the id). A piece of text (one match of the split pattern) is encoded so:
1. if the piece's bytes are a token, that token, at once;
2. otherwise start from single bytes and repeatedly join the adjacent pair whose joined bytes
   have the lowest rank (the leftmost such pair on a tie), until no adjacent join is a token.

This differs from our own rule (`bpe.reference.encode_reference`), which applies only learned pairs:
with ranks `b c bc ab abc`, ours would never join `a|bc`, tiktoken does. Short pieces use a list
scan (what tiktoken itself does); long ones a heap, so a 50 KB run of letters stays O(n log n)
instead of tiktoken's quadratic loop.

`derive_merges` recovers, for display, the pair each token is made of, as tiktoken's
educational module does: a token's two parts are what the rule gives for its bytes when only
joins of a lower rank are allowed.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Mapping

_NONE = sys.maxsize  # "no such token": larger than any rank, still an int so min() works
# Below this piece length the list scan beats the heap's bookkeeping.
_HEAP_THRESHOLD = 256


def encode_piece(piece: bytes, ranks: Mapping[bytes, int]) -> list[int]:
    """The ids of one piece by tiktoken's rule.

    >>> ranks = {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5, b"ca": 6}
    >>> encode_piece(b"abc", ranks), encode_piece(b"abca", ranks)
    ([5], [5, 0])
    """
    token = ranks.get(piece)
    if token is not None:
        return [token]
    return [ranks[part] for part in split_piece(piece, ranks)]


def split_piece(piece: bytes, ranks: Mapping[bytes, int], *, max_rank: int = _NONE) -> list[bytes]:
    """The parts the joining loop leaves, joining only pairs ranked below `max_rank`.

    Every single byte must be a token (the importers check it); the whole-piece shortcut of
    `encode_piece` is not taken here.
    """
    if len(piece) < 2:
        return [piece]
    if len(piece) < _HEAP_THRESHOLD:
        return _split_by_scanning(piece, ranks, max_rank)
    return _split_with_heap(piece, ranks, max_rank)


def _split_by_scanning(piece: bytes, ranks: Mapping[bytes, int], max_rank: int) -> list[bytes]:
    get = ranks.get
    bounds = list(range(len(piece) + 1))  # part k is piece[bounds[k]:bounds[k + 1]]
    pair_rank = [get(piece[i : i + 2], _NONE) for i in range(len(piece) - 1)]  # parts k, k+1
    while pair_rank:
        best = min(pair_rank)
        if best >= max_rank:
            break
        k = pair_rank.index(best)  # the leftmost of the lowest
        del bounds[k + 1]
        del pair_rank[k]
        if k < len(pair_rank):
            pair_rank[k] = get(piece[bounds[k] : bounds[k + 2]], _NONE)
        if k > 0:
            pair_rank[k - 1] = get(piece[bounds[k - 1] : bounds[k + 1]], _NONE)
    return [piece[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)]


def _split_with_heap(piece: bytes, ranks: Mapping[bytes, int], max_rank: int) -> list[bytes]:
    # Parts are a linked list over start offsets; the heap holds (rank, start, end) of every
    # adjacent pair, stale entries skipped when popped. Ties pop the smallest start first, which
    # is tiktoken's leftmost choice. A pair is still current iff its left part is alive and the
    # part after its right neighbour starts at `end` (parts only grow, so that pins both parts).
    n = len(piece)
    get = ranks.get
    nxt = list(range(1, n + 1))  # nxt[s]: start of the part after the one starting at s (n: none)
    prv = list(range(-1, n - 1))
    alive = bytearray(b"\x01") * n
    heap = []
    for i in range(n - 1):
        rank = get(piece[i : i + 2], _NONE)
        if rank < max_rank:
            heap.append((rank, i, i + 2))
    heapq.heapify(heap)
    while heap:
        _, start, end = heapq.heappop(heap)
        middle = nxt[start]
        if not alive[start] or middle >= n or nxt[middle] != end:
            continue
        alive[middle] = 0
        nxt[start] = end
        if end < n:
            prv[end] = start
            rank = get(piece[start : nxt[end]], _NONE)
            if rank < max_rank:
                heapq.heappush(heap, (rank, start, nxt[end]))
        before = prv[start]
        if before >= 0:
            rank = get(piece[before:end], _NONE)
            if rank < max_rank:
                heapq.heappush(heap, (rank, before, end))
    parts = []
    start = 0
    while start < n:
        parts.append(piece[start : nxt[start]])
        start = nxt[start]
    return parts


def derive_merges(ranks: Mapping[bytes, int]) -> tuple[list[tuple[int, int, int]], list[int]]:
    """The merges (left_id, right_id, new_id) behind a rank table, by rank, and the ids of
    tokens of two bytes or more that no single pair of lower-ranked parts makes.

    Those tokens (none in the real GPT-2/GPT-4/GPT-4o files) can only come out of tiktoken as
    whole pieces, so they have no merge to show.

    >>> derive_merges({b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5})
    ([(1, 2, 3), (0, 1, 4), (0, 3, 5)], [])
    """
    merges: list[tuple[int, int, int]] = []
    orphans: list[int] = []
    get = ranks.get
    none = _NONE
    starts = [list(range(n + 1)) for n in range(_HEAP_THRESHOLD)]  # copied, not rebuilt
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        n = len(token)
        if n < 2:
            continue
        if n == 2:
            merges.append((ranks[token[:1]], ranks[token[1:]], rank))
            continue
        if n == 3:
            # The loop below, unrolled for its commonest case (a fifth of o200k_base): two
            # pairs, the leftmost of the lowest joins if it ranks below the token, and the
            # two parts left are the merge.
            first, second = get(token[:2], none), get(token[1:], none)
            if first <= second and first < rank:
                merges.append((first, ranks[token[2:]], rank))
            elif second < first and second < rank:
                merges.append((ranks[token[:1]], second, rank))
            else:
                orphans.append(rank)
            continue
        if n >= _HEAP_THRESHOLD:
            # The scan below is quadratic in a token's length: one token of 16 kB took seconds.
            parts = _split_with_heap(token, ranks, rank)
            if len(parts) == 2:
                merges.append((ranks[parts[0]], ranks[parts[1]], rank))
            else:
                orphans.append(rank)
            continue
        # `_split_by_scanning` inlined, with the bound: this runs once per token (200k for
        # o200k_base) and the call and list overheads were most of an import's time.
        bounds = starts[n][:]
        pair_rank = [get(token[i : i + 2], none) for i in range(n - 1)]
        while len(pair_rank) > 1:
            best = min(pair_rank)
            if best >= rank:
                break
            k = pair_rank.index(best)
            del bounds[k + 1]
            del pair_rank[k]
            if k < len(pair_rank):
                pair_rank[k] = get(token[bounds[k] : bounds[k + 2]], none)
            if k > 0:
                pair_rank[k - 1] = get(token[bounds[k - 1] : bounds[k + 1]], none)
        if len(bounds) == 3:
            merges.append((ranks[token[: bounds[1]]], ranks[token[bounds[1] :]], rank))
        else:
            orphans.append(rank)
    return merges, orphans
