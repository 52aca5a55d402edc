"""Encoding by seed 002's rule: repeatedly apply the learned pair with the lowest id, everywhere.

A merge (left, right) -> new_id always has left, right < new_id, so applying merge k can only
create pairs of rank greater than k. That lets ranks be taken from a heap in increasing order,
each applied at its candidate positions from left to right (the left-to-right scan of
`merge_pair`), which reproduces the rule exactly in O(n log n) instead of the O(n * merges) of
rescanning. Short sequences, the usual
case for chunks, use the plain rescanning loop, which is faster when n is small.
"""

from __future__ import annotations

import heapq
import itertools

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
        for pair in itertools.pairwise(ids):
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
    # The heap holds ranks only; each rank has a bucket of candidate positions. A bucket is
    # sorted once when its rank comes up (positions added while earlier ranks were applied can
    # arrive out of order), which is far cheaper than one heap entry per position.
    n = len(ids)
    symbol = list(ids)  # symbol[i]: the token starting at position i (valid while alive[i])
    alive = bytearray(b"\x01") * n
    nxt = list(range(1, n + 1))  # nxt[i]: next live position, n for none
    prv = list(range(-1, n - 1))  # prv[i]: previous live position, -1 for none
    get = ranks.get
    buckets: dict[int, list[int]] = {}  # rank -> positions where that pair may start
    for i, pair in enumerate(itertools.pairwise(ids)):
        rank = get(pair)
        if rank is not None:
            bucket = buckets.get(rank)
            if bucket is None:
                buckets[rank] = [i]
            else:
                bucket.append(i)
    pending = list(buckets)
    heapq.heapify(pending)
    while pending:
        rank = heapq.heappop(pending)
        positions = buckets.pop(rank)
        positions.sort()
        for i in positions:
            if not alive[i]:
                continue
            j = nxt[i]
            # Stale if the pair starting at i has changed since i was filed under this rank.
            if j >= n or get((symbol[i], symbol[j])) != rank:
                continue
            symbol[i] = rank
            alive[j] = 0
            k = nxt[j]
            nxt[i] = k
            # Filing the two new neighbour pairs is written out twice rather than through a
            # helper: a call per merge costs more than the rest of the loop body.
            if k < n:
                prv[k] = i
                new_rank = get((rank, symbol[k]))
                if new_rank is not None:
                    bucket = buckets.get(new_rank)
                    if bucket is None:
                        buckets[new_rank] = [i]
                        heapq.heappush(pending, new_rank)
                    else:
                        bucket.append(i)
            p = prv[i]
            if p >= 0:
                new_rank = get((symbol[p], rank))
                if new_rank is not None:
                    bucket = buckets.get(new_rank)
                    if bucket is None:
                        buckets[new_rank] = [p]
                        heapq.heappush(pending, new_rank)
                    else:
                        bucket.append(p)
    out: list[int] = []
    i = 0
    while i < n:
        out.append(symbol[i])
        i = nxt[i]
    return out
