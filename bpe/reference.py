"""The references: the literal training loop and the literal encoding rule, kept as oracles.

`train_reference` recounts every pair from scratch for every merge, so it is slow (O(corpus) per
merge) and obviously right; the efficient trainer must return exactly what it returns, record
for record (docs/algorithms.md, "Training"). `encode_reference` applies learned merges the way
they were learned: repeatedly the present pair with the lowest new id, everywhere, left to
right; every faster encoder (`bpe.encoder`, the chunk caches, the tiktoken fast path) must give
exactly its ids (docs/algorithms.md, "Encoding").
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from bpe.training_types import MergeRecord, Progress, ProgressFn, StopFn, TrainingCancelled


def get_pair_counts(
    sequences: Sequence[tuple[list[int], int]],
) -> dict[tuple[int, int], int]:
    """Count adjacent pairs, each sequence weighted by how often it occurs.

    Overlaps count: `a a a` holds the pair `(a, a)` twice.
    """
    counts: dict[tuple[int, int], int] = {}  # (left, right) -> weighted count
    for ids, weight in sequences:
        for pair in itertools.pairwise(ids):
            counts[pair] = counts.get(pair, 0) + weight
    return counts


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of pair with new_id, scanning left to right (`a a a` -> `aa a`)."""
    merged: list[int] = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def best_pair(counts: dict[tuple[int, int], int]) -> tuple[int, int]:
    """The pair with the highest count; ties go to the smallest (left_id, right_id)."""
    return min(counts, key=lambda pair: (-counts[pair], pair))


def train_reference(
    sequences: Sequence[tuple[Sequence[int], int]],
    *,
    first_id: int,
    max_merges: int,
    min_frequency: int = 1,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
) -> list[MergeRecord]:
    """Learn up to max_merges merges over weighted id sequences; new ids start at first_id.

    Stops early when no pair is left or the best pair's count is below min_frequency. Raises
    TrainingCancelled when should_stop() answers True (checked before every merge).
    """
    working = [(list(ids), weight) for ids, weight in sequences if weight > 0]
    total = sum(len(ids) * weight for ids, weight in working)
    records: list[MergeRecord] = []
    for new_id in range(first_id, first_id + max_merges):
        if should_stop is not None and should_stop():
            raise TrainingCancelled(len(records))
        counts = get_pair_counts(working)
        if not counts:
            break
        pair = best_pair(counts)
        count = counts[pair]
        if count < min_frequency:
            break
        working = [(merge_pair(ids, pair, new_id), weight) for ids, weight in working]
        total = sum(len(ids) * weight for ids, weight in working)
        records.append(MergeRecord(pair[0], pair[1], new_id, count, total))
        if progress is not None:
            learned = ((pair[0], pair[1], new_id),)
            progress(Progress(len(records), max_merges, pair, count, total, learned))
    return records


def encode_reference(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    """Encode a sequence of base ids with learned merges, literally: find the lowest new id
    among the pairs present, merge that pair everywhere left to right, and rescan, until no
    learned pair is present. `ranks` maps (left_id, right_id) -> new_id (`Tokenizer.ranks`); the
    new id doubles as the rank, since a merge is always learned after its parts.

    >>> ranks = {(97, 97): 256, (256, 97): 257, (257, 98): 258}
    >>> encode_reference(list(b"abaaab"), ranks)
    [97, 98, 258]
    >>> encode_reference(list(b"aaaa"), {(97, 97): 256})
    [256, 256]

    Where two learned pairs overlap, the lower id wins, wherever it stands:

    >>> encode_reference(list(b"abc"), {(97, 98): 257, (98, 99): 256})
    [97, 256]
    """
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
