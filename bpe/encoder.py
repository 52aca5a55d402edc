"""Encoding by seed 002's rule: repeatedly apply the learned pair with the lowest id, everywhere.

A merge (left, right) -> new_id always has left, right < new_id, so applying merge k can only
create pairs of rank greater than k. That lets a heap of (rank, position) entries, popped in
order, reproduce the rule exactly (same rank: leftmost first, which is the left-to-right scan of
`merge_pair`) in O(n log n) instead of the O(n * merges) of rescanning. Short sequences, the usual
case for chunks, use the plain rescanning loop, which is faster when n is small.
"""

from __future__ import annotations

import heapq

# Below this length the rescanning loop beats the heap's bookkeeping.
_HEAP_THRESHOLD = 48


def encode_ids(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    """Apply the learned merges (pair -> new_id, the id doubling as rank) to a sequence of ids."""
    if len(ids) < 2:
        return list(ids)
    if len(ids) < _HEAP_THRESHOLD:
        return _encode_by_rescanning(list(ids), ranks)
    return _encode_with_heap(ids, ranks)


def _encode_by_rescanning(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    get = ranks.get
    while len(ids) >= 2:
        best_rank = None
        for pair in zip(ids, ids[1:]):
            rank = get(pair)
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank = rank
        if best_rank is None:
            break
        merged: list[int] = []
        i = 0
        n = len(ids)
        while i < n:
            if i + 1 < n and get((ids[i], ids[i + 1])) == best_rank:
                merged.append(best_rank)
                i += 2
            else:
                merged.append(ids[i])
                i += 1
        ids = merged
    return ids


def _encode_with_heap(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    n = len(ids)
    symbol = list(ids)  # symbol[i]: the token starting at position i (valid while alive[i])
    alive = [True] * n
    nxt = list(range(1, n + 1))  # nxt[i]: next live position, n for none
    prv = list(range(-1, n - 1))  # prv[i]: previous live position, -1 for none
    get = ranks.get
    heap = [(rank, i) for i in range(n - 1) if (rank := get((ids[i], ids[i + 1]))) is not None]
    heapq.heapify(heap)
    while heap:
        rank, i = heapq.heappop(heap)
        if not alive[i]:
            continue
        j = nxt[i]
        # The entry is stale if the pair at i has changed since it was pushed.
        if j >= n or get((symbol[i], symbol[j])) != rank:
            continue
        symbol[i] = rank
        alive[j] = False
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
            right_rank = get((rank, symbol[k]))
            if right_rank is not None:
                heapq.heappush(heap, (right_rank, i))
        p = prv[i]
        if p >= 0:
            left_rank = get((symbol[p], rank))
            if left_rank is not None:
                heapq.heappush(heap, (left_rank, p))
    out: list[int] = []
    i = 0
    while i < n:
        out.append(symbol[i])
        i = nxt[i]
    return out
