"""The efficient trainer: seed 004's incremental algorithm, record for record the reference's output.

What it adds over `bpe.reference`: instead of recounting every pair after every merge, it keeps
the pair counts live and touches only the places a merge changes.

- All sequences are laid end to end in one array, with a barrier between them, so one engine
  serves every mode; each position carries its sequence's weight.
- `tok[p]` is the id of the token that starts at position p (DEAD inside a merged token,
  BARRIER between sequences); `nxt`/`prv` link each live token to its neighbours, so checking
  an occurrence and finding its neighbours is O(1) (seed 004's segment-status array, as links).
- `counts` holds every pair's live weighted count; `positions` the start positions where each
  pair was ever seen (stale entries are skipped when read, and compacted away).
- A lazy max-heap holds (count, pair) entries; counts only fall after a pair is pushed, so an
  entry popped whose count still matches the live count is the true best pair.
- Overlaps: `a a a` holds (a, a) twice, and a merge of (a, a) walks its positions in order so it
  cuts runs left to right, as `reference.merge_pair` does (seed 004 prefers right to left).
"""

from __future__ import annotations

import heapq
import time
from array import array
from collections.abc import Callable, Sequence

from bpe.training_types import MergeRecord, Progress, ProgressFn, StopFn, TrainingCancelled

BARRIER = -1  # between sequences: no pair crosses it
DEAD = -2  # a position inside a merged token
# Progress and the stop check run at most this often, and at least every 100 ms of work.
_REPORT_EVERY = 0.05
# A long merge pass is walked in slices this long so progress and stop stay timely.
_SLICE = 16_384


def train_efficient(
    sequences: Sequence[tuple[Sequence[int], int]],
    *,
    first_id: int,
    max_merges: int,
    min_frequency: int = 1,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
) -> list[MergeRecord]:
    """Learn up to max_merges merges over weighted id sequences; new ids start at first_id.

    Same contract and same result as `bpe.reference.train_reference`: ties go to the smallest
    (left_id, right_id), training stops when no pair is left or the best count is below
    min_frequency, and TrainingCancelled is raised when should_stop() answers True (asked at
    least every 100 ms of work).

    >>> [tuple(r) for r in train_efficient([([97, 97, 97, 98], 2)], first_id=256, max_merges=2)]
    [(97, 97, 256, 4, 6), (97, 98, 257, 2, 4)]
    """
    kept = [(ids, weight) for ids, weight in sequences if weight > 0]
    total = sum(len(ids) * weight for ids, weight in kept)
    top_id = max([first_id + max_merges] + [max(ids) + 1 for ids, _ in kept if len(ids)])
    corpus = _Corpus(kept, top_id, min_frequency)
    clock = _Clock(max_merges, total, progress, should_stop)
    clock.check()

    records: list[MergeRecord] = []
    for new_id in range(first_id, first_id + max_merges):
        best = corpus.pop_best()
        if best is None:
            break
        left, right, count = best
        total -= corpus.merge(left, right, new_id, clock.tick)
        records.append(MergeRecord(left, right, new_id, count, total))
        clock.merged(records[-1])
    clock.finish()
    return records


class _Clock:
    """Calls progress and should_stop when at least _REPORT_EVERY seconds have passed."""

    def __init__(
        self,
        target: int,
        total: int,
        progress: ProgressFn | None,
        should_stop: StopFn | None,
    ) -> None:
        self.progress = progress
        self.should_stop = should_stop
        self.state = Progress(0, target, None, 0, total)
        self.next_report = 0.0
        self.reported: Progress | None = None

    def merged(self, record: MergeRecord) -> None:
        pair = (record.left, record.right)
        self.state = self.state._replace(
            merges_done=self.state.merges_done + 1,
            pair=pair,
            count=record.count,
            total_tokens=record.tokens_after,
        )
        self.tick()

    def tick(self) -> None:
        if time.perf_counter() >= self.next_report:
            self.check()

    def check(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise TrainingCancelled(self.state.merges_done)
        if self.progress is not None and self.state.merges_done:
            self.progress(self.state)
            self.reported = self.state
        self.next_report = time.perf_counter() + _REPORT_EVERY

    def finish(self) -> None:
        """The final state, unless the last tick just reported it."""
        state = self.state
        if self.progress is not None and state.merges_done and self.reported is not state:
            self.progress(state)


class _Corpus:
    """The live token sequence, pair counts, pair positions and the lazy heap of best pairs."""

    def __init__(
        self, sequences: Sequence[tuple[Sequence[int], int]], top_id: int, min_frequency: int
    ) -> None:
        self.min_frequency = min_frequency
        self.k = top_id  # pair key = left * k + right, one int per pair
        self.kk = top_id * top_id  # heap key = -count * kk + pair key
        tok = array("i", [BARRIER])
        wt = array("Q", [0])
        for ids, weight in sequences:
            if len(ids) < 2:
                continue  # a lone token holds no pair and can never change
            tok.extend(ids)
            tok.append(BARRIER)
            wt.extend([weight] * (len(ids) + 1))
        self.tok = tok
        self.wt = wt
        self.nxt = array("i", range(1, len(tok) + 1))
        self.prv = array("i", range(-1, len(tok) - 1))
        self.counts, self.positions = self._initial_pairs()
        kk = self.kk
        self.heap = [-c * kk + key for key, c in self.counts.items() if c >= min_frequency]
        heapq.heapify(self.heap)

    def _initial_pairs(self) -> tuple[dict[int, int], dict[int, array]]:
        counts: dict[int, int] = {}  # pair key -> live weighted count
        positions: dict[int, array] = {}  # pair key -> start positions (some stale)
        tok, wt, k = self.tok, self.wt, self.k
        for p in range(len(tok) - 1):
            a = tok[p]
            b = tok[p + 1]
            if a < 0 or b < 0:
                continue
            key = a * k + b
            counts[key] = counts.get(key, 0) + wt[p]
            where = positions.get(key)
            if where is None:
                positions[key] = where = array("I")
            where.append(p)
        return counts, positions

    def pop_best(self) -> tuple[int, int, int] | None:
        """The pair with the highest live count (ties: smallest pair), or None if none is left
        with at least min_frequency."""
        heap, counts, kk, min_frequency = self.heap, self.counts, self.kk, self.min_frequency
        while heap:
            entry = heap[0]
            count = -(entry // kk)
            key = entry % kk
            live = counts.get(key, 0)
            if live == count:
                heapq.heappop(heap)
                return key // self.k, key % self.k, count
            # The count fell since this entry was pushed: push it back at its live count.
            if live >= min_frequency:
                heapq.heapreplace(heap, -live * kk + key)
            else:
                heapq.heappop(heap)
        return None

    def merge(self, a: int, b: int, c: int, tick: Callable[[], None]) -> int:
        """Replace every occurrence of (a, b) with c, left to right; return the weight merged."""
        tok, nxt, prv, wt, counts, k = self.tok, self.nxt, self.prv, self.wt, self.counts, self.k
        pair_key = a * k + b
        where = self.positions.pop(pair_key)
        if a == b:
            where = sorted(where)  # runs must be cut left to right
        new_positions: dict[int, array] = {}  # pair key -> where pairs with c start
        merged = 0
        ak, bk, ck = a, b * k, c * k
        for start in range(0, len(where), _SLICE):
            for p in where[start : start + _SLICE]:
                if tok[p] != a:
                    continue
                q = nxt[p]
                if tok[q] != b:
                    continue
                w = wt[p]
                merged += w
                counts[pair_key] -= w
                o = prv[p]
                left = tok[o]
                if left >= 0:
                    counts[left * k + ak] -= w
                    key = left * k + c
                    counts[key] = counts.get(key, 0) + w
                    found = new_positions.get(key)
                    if found is None:
                        new_positions[key] = found = array("I")
                    found.append(o)
                r = nxt[q]
                right = tok[r]
                if right >= 0:
                    counts[bk + right] -= w
                    key = ck + right
                    counts[key] = counts.get(key, 0) + w
                    found = new_positions.get(key)
                    if found is None:
                        new_positions[key] = found = array("I")
                    found.append(p)
                tok[p] = c
                tok[q] = DEAD
                nxt[p] = r
                prv[r] = p
            tick()
        del counts[pair_key]
        self._adopt(new_positions)
        return merged

    def _adopt(self, new_positions: dict[int, array]) -> None:
        """Keep the new pairs' positions and push them on the heap (their counts are final
        until they fall: every later merge only creates pairs with a newer id)."""
        counts, positions, heap, kk = self.counts, self.positions, self.heap, self.kk
        min_frequency = self.min_frequency
        for key, found in new_positions.items():
            count = counts[key]
            if count >= min_frequency:
                positions[key] = found
                heapq.heappush(heap, -count * kk + key)
            elif count == 0:
                del counts[key]
