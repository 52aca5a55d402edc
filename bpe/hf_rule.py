"""HuggingFace's BPE merge loop, as `tokenizers` runs it on one pre-tokenized word.

A file's merges are ranked by their position in the list (0 first). Starting from one symbol per
byte-level character, the lowest-ranked pair present is applied at its leftmost position, one
occurrence at a time, until no adjacent pair is a merge. A queued occurrence that has gone stale
is skipped when the pair now at its position no longer makes the same new id, which is exactly
`tokenizers`' check (so a file whose merges give one id two ways behaves as there too).

With `ignore_merges` (HF's option, set by Llama 3 and others) a word that is itself in the
vocabulary is that token at once, before any merge.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

MergeMap = Mapping[tuple[int, int], tuple[int, int]]  # (left_id, right_id) -> (rank, new_id)


def merge_word(symbols: list[int], merges: MergeMap) -> list[int]:
    """Apply the merges to a word's symbol ids.

    >>> merge_word([1, 2, 3], {(1, 2): (0, 10), (2, 3): (1, 11), (10, 3): (2, 12)})
    [12]
    >>> merge_word([1, 2, 3], {(2, 3): (0, 11), (1, 2): (1, 10), (10, 3): (2, 12)})
    [1, 11]
    """
    n = len(symbols)
    if n < 2:
        return list(symbols)
    ids = list(symbols)
    nxt = list(range(1, n + 1))  # n: none
    prv = list(range(-1, n - 1))
    alive = bytearray(b"\x01") * n
    get = merges.get
    queue = []  # (rank, position, new_id)
    for i in range(n - 1):
        found = get((ids[i], ids[i + 1]))
        if found is not None:
            queue.append((found[0], i, found[1]))
    heapq.heapify(queue)
    while queue:
        _, i, new_id = heapq.heappop(queue)
        if not alive[i]:
            continue
        j = nxt[i]
        if j >= n:
            continue
        found = get((ids[i], ids[j]))
        if found is None or found[1] != new_id:
            continue
        ids[i] = new_id
        alive[j] = 0
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
        p = prv[i]
        if p >= 0:
            found = get((ids[p], new_id))
            if found is not None:
                heapq.heappush(queue, (found[0], p, found[1]))
        if k < n:
            found = get((new_id, ids[k]))
            if found is not None:
                heapq.heappush(queue, (found[0], i, found[1]))
    out = []
    i = 0
    while i < n:
        out.append(ids[i])
        i = nxt[i]
    return out
