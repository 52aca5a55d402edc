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
    whole pieces, so they have no merge to show. Exactly `derive_merges_by_loop`'s answer, with
    a tenth of its steps: most tokens are settled by checking one candidate pair of parts
    (`_check_parts`, docs/algorithms.md "Deriving merges from ranks") instead of running the
    joining loop; a token the check cannot settle runs the loop.

    >>> derive_merges({b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5})
    ([(1, 2, 3), (0, 1, 4), (0, 3, 5)], [])
    """
    if len(set(ranks.values())) != len(ranks):
        return derive_merges_by_loop(ranks)  # the check below tells tokens apart by rank
    merges: list[tuple[int, int, int]] = []
    orphans: list[int] = []
    get = ranks.get
    none = _NONE
    # rank -> (length of the left part, left id, right id), for each token whose merge is
    # derived and whose parts are single bytes or such tokens again: a whole tree of merges,
    # each ranked above its parts, which `_check_parts` walks down.
    tree: dict[int, tuple[int, int, int]] = {}
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        n = len(token)
        if n < 2:
            continue
        if n == 2:
            left, right = ranks[token[:1]], ranks[token[1:]]
            merges.append((left, right, rank))
            tree[rank] = (1, left, right)
            continue
        if n == 3:
            # The joining loop, unrolled for its commonest case (a fifth of o200k_base): two
            # pairs, the leftmost of the lowest joins if it ranks below the token, and the
            # two parts left are the merge.
            first, second = get(token[:2], none), get(token[1:], none)
            if first <= second and first < rank:
                cut, left, right = 2, first, ranks[token[2:]]
            elif second < first and second < rank:
                cut, left, right = 1, ranks[token[:1]], second
            else:
                orphans.append(rank)
                continue
            merges.append((left, right, rank))
            if (left if cut == 2 else right) in tree:
                tree[rank] = (cut, left, right)
            continue
        found = _find_parts(token, rank, ranks, tree) if n < _HEAP_THRESHOLD else None
        if found is None:  # undecided: the joining loop, as derive_merges_by_loop runs it
            parts = split_piece(token, ranks, max_rank=rank)
            if len(parts) != 2:
                orphans.append(rank)
                continue
            cut, left, right = len(parts[0]), ranks[parts[0]], ranks[parts[1]]
            if (cut == 1 or left in tree) and (cut == n - 1 or right in tree):
                tree[rank] = (cut, left, right)
        elif not found:
            orphans.append(rank)
            continue
        else:
            cut, left, right = found
            tree[rank] = found
        merges.append((left, right, rank))
    return merges, orphans


def _find_parts(
    token: bytes, rank: int, ranks: Mapping[bytes, int], tree: dict[int, tuple[int, int, int]]
) -> tuple[int, int, int] | tuple[()] | None:
    """(cut, left id, right id) of the two parts the joining loop leaves of `token` (joins
    ranked below `rank` only); () if it leaves more than two; None if undecided (a candidate
    part is a token without a whole tree of merges, or a single byte has no rank).

    Every pair of parts the loop could end in is a cut whose two sides are tokens: single
    bytes or tokens ranked below `rank`. Those are tried longest right part first (the right
    one is first for two tokens in three of o200k_base), each by `_check_parts`, which is exact
    for parts with whole trees; the loop ends in one pair of parts at most, so the first that
    passes is it.
    """
    get = ranks.get
    n = len(token)
    undecided = False
    for cut in range(1, n):
        right = get(token[cut:], _NONE)
        if cut < n - 1:
            if right >= rank:
                continue
            if right not in tree:
                undecided = True
                continue
        elif right == _NONE:
            undecided = True
            continue
        left = get(token[:cut], _NONE)
        if cut > 1:
            if left >= rank:
                continue
            if left not in tree:
                undecided = True
                continue
        elif left == _NONE:
            undecided = True
            continue
        if _check_parts(token, cut, left, right, ranks, tree):
            return cut, left, right
    return None if undecided else ()


def _check_parts(
    token: bytes,
    cut: int,
    left: int,
    right: int,
    ranks: Mapping[bytes, int],
    tree: dict[int, tuple[int, int, int]],
) -> bool:
    """Whether the joining loop on `token` (joins ranked below the token's own rank) ends in
    the parts token[:cut] and token[cut:], ids `left` and `right`, each a single byte or a
    token with a whole tree of merges (`tree`). Why this is exact: docs/algorithms.md,
    "Deriving merges from ranks".

    Each side alone would be built by its own tree, one merge at a time by rank. So the loop
    ends in these two parts unless it joins across the cut first: the part just left of the
    cut (x, going up the left tree's right edge) and the one just right of it (y, up the
    right tree's left edge) join when their joined bytes rank below the next merge that
    changes either. Walked here from the end back to the single bytes at the cut.
    """
    get = ranks.get
    x_len, x_rank = cut, (left if cut > 1 else -1)  # -1: a single byte, there from the start
    y_len, y_rank = len(token) - cut, (right if len(token) - cut > 1 else -1)
    x, y = left, right
    while True:
        if x_rank > y_rank:  # x was made last: before it, its right part stood by the cut
            left_len, _, x = tree[x]
            x_len -= left_len
            # a tie goes to the merge on the left, which is x's own: no join across the cut
            if get(token[cut - x_len : cut + y_len], _NONE) < x_rank:
                return False
            x_rank = x if x_len > 1 else -1
        elif y_rank >= 0:  # y was made last: before it, its left part stood by the cut
            y_len, y, _ = tree[y]
            # a tie goes to the join across the cut, which is left of y's own merge
            if get(token[cut - x_len : cut + y_len], _NONE) <= y_rank:
                return False
            y_rank = y if y_len > 1 else -1
        else:  # both sides back to single bytes, and no join across the cut came first
            return True


def derive_merges_by_loop(
    ranks: Mapping[bytes, int],
) -> tuple[list[tuple[int, int, int]], list[int]]:
    """`derive_merges` by definition: each token's bytes through the joining loop
    (`split_piece`), joins ranked below the token only; two parts left are its merge. The
    reference the faster `derive_merges` is held to (tests/test_derive_merges.py).

    >>> derive_merges_by_loop({b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5})
    ([(1, 2, 3), (0, 1, 4), (0, 3, 5)], [])
    """
    merges: list[tuple[int, int, int]] = []
    orphans: list[int] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = split_piece(token, ranks, max_rank=rank)
        if len(parts) == 2:
            merges.append((ranks[parts[0]], ranks[parts[1]], rank))
        else:
            orphans.append(rank)
    return merges, orphans
