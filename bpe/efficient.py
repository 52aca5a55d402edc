"""The efficient trainer: the incremental algorithm of docs/algorithms.md ("Efficient training"),
record for record the reference's output.

What it adds over `bpe.reference`: instead of recounting every pair after every merge, it keeps
the pair counts live and touches only the places a merge changes.

- All sequences are laid end to end, with a barrier between them, so one merge loop serves
  every mode. Sequences weighing more than 1 come first and keep a weight per position; the rest
  (most of them, in natural text) need no weight look-up at all.
- `tok[p]` is the id of the token that starts at position p (DEAD inside a merged token,
  BARRIER between sequences); `nxt`/`prv` link each live token to its neighbours, so checking
  an occurrence and finding its neighbours is O(1) (a segment-status array, as links).
- `counts` holds the live weighted count of every tracked pair, `positions` where each starts
  (ascending; stale entries are skipped when read and compacted away once they dominate).
- A lazy max-heap holds (count, pair) entries; counts only fall after a pair is pushed, so an
  entry popped whose count still matches the live count is the true best pair.
- A merge's hot loop only relinks tokens and notes the neighbours; the counts then change once
  per distinct neighbour, in bulk (`_Corpus._recount`).
- Overlaps: `a a a` holds (a, a) twice, and a merge of (a, a) walks its positions in order so it
  cuts runs left to right, as `reference.merge_pair` does (not right to left).
"""

from __future__ import annotations

import heapq
import sys
from array import array
from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from functools import partial
from itertools import accumulate, compress, islice, repeat
from operator import add, eq, ge, mul, sub

from bpe.pacing import Clock, collector_paused, release
from bpe.pacing import slices as _slices
from bpe.training_types import MergeRecord, ProgressFn, StopFn

BARRIER = -1  # between sequences: no pair crosses it
DEAD = -2  # a position inside a merged token
_new_positions = partial(array, "I")
# Pairs rarer than this are not tracked until training gets down to them (see _Corpus).
_FLOOR = 4
# On a large corpus the floor starts at one count per this many positions: with a floor of 4,
# a naive training on 150 MB tracked 1.7M pairs by its 7,300th merge (~470 MB more than at
# its 1,000th), nearly all far rarer than any pair a 10k vocab merges. Once training gets down
# to the floor it is divided by _FLOOR_STEP (each time a recount of every pair), so a large
# corpus never goes straight to tracking pairs seen once.
_POSITIONS_PER_FLOOR = 1 << 21
_FLOOR_STEP = 8
# Stale positions are compacted away only while the lists hold more than this many positions
# per corpus position, and only from lists longer than _SHORT.
_STORED_PER_POSITION = 2
_SHORT = 1024
# A long merge pass is walked in slices this long so progress and stop stay timely.
_SLICE = 16_384
# Merges of at most this many positions take one plain loop (`_Corpus._merge_few`): per merge
# it costs half the bulk path's time up to ~1000 positions on every case (chunked-en, whose
# merges mostly have few positions, in distinct chunks: 0.97 -> 0.69 s trainer CPU); on larger
# merges of naive English, whose neighbours repeat, the bulk path catches up (trainer CPU per
# merge, same process, under load 2.5).
_SMALL = 4096
# From this many positions on, token ids are kept in an array (2 or 4 bytes each) rather than
# a list (8 bytes a slot): a naive job on 150 MB would need 1.2 GB for the list alone.
_ARRAY_FROM = 1 << 23
_COPY_BYTES = 1 << 23  # the byte layout is copied this much at a time (~2 ms), then a tick


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
    if max_merges <= 0:
        return []
    records: list[MergeRecord] = []
    clock = Clock(max_merges, records, progress, should_stop)
    clock.check()
    with collector_paused():
        kept: list[tuple[Sequence[int], int]] = []
        total = 0
        top_id = first_id + max_merges  # every id is below it
        # Scanning for the largest id takes long on long id lists (words mode on unspaced text).
        for start, stop in _slices(len(sequences), clock.tick):
            part = [(ids, weight) for ids, weight in sequences[start:stop] if weight > 0]
            kept += part
            total += sum(len(ids) * weight for ids, weight in part)
            # Bytes need no scan: they are below 256.
            tops = [256 if isinstance(ids, bytes) else max(ids) + 1 for ids, _ in part if len(ids)]
            top_id = max([top_id, *tops])
        clock.initial_total = total
        corpus = _Corpus(kept, top_id, min_frequency, clock.tick)
        for new_id in range(first_id, first_id + max_merges):
            best = corpus.pop_best()
            if best is None:
                break
            left, right, count = best
            total -= corpus.merge(left, right, new_id, clock.tick)
            records.append(MergeRecord(left, right, new_id, count, total))
            clock.tick()
        # Freeing the state of a large corpus takes 100-500 ms: a slice at a time, checking.
        _tear_down(corpus, clock.tick)
        release(kept, clock.tick)
    clock.finish()
    return records


class _Corpus:
    """The live token sequence, pair counts, pair positions and the lazy heap of best pairs.

    Only pairs counted at least `floor` times are tracked. A pair's count never rises after it
    is created, so while the best tracked pair has at least `floor`, no untracked pair can beat
    or tie it; if training gets that far, everything is recounted with a lower floor (at last
    min_frequency). Most pairs a merge creates are rare, so this saves most of the bookkeeping
    and, on a large corpus (a floor that grows with it), most of the memory.

    A token's length (in positions) depends on its id alone, so the token after the one at p
    starts at p + length[tok[p]]: no link array. The one before is found from its last
    position, which holds `_end(id)` (a token of one position holds its id there already).
    Large corpora keep `tok` in a 2- or 4-byte array instead of a list (8 bytes a slot); lists
    index faster, so small ones keep the list.
    """

    def __init__(
        self,
        sequences: Sequence[tuple[Sequence[int], int]],
        top_id: int,
        min_frequency: int,
        tick: Callable[[], None],
    ) -> None:
        self.min_frequency = min_frequency
        self.tick = tick
        # Pair key = left * k + right. k - 1 is no id, so a pair with a barrier on its right
        # gets a key with k - 1 on the right, and one with a barrier on its left a negative key.
        self.k = k = top_id + 1
        self.kk = k * k  # heap key = -count * kk + pair key
        self.length = [1] * top_id  # id -> positions its token spans (input ids span one)
        ordered, self.weights = _order(sequences, tick)
        layout = _byte_layout(ordered, tick)
        if layout is None:
            ids = _id_layout(ordered, tick)
            self.tok: list[int] | array[int] = ids
            if len(ids) >= _ARRAY_FROM:
                self.tok = array(_id_typecode(top_id), ids)
            del ids
            pairs = _live_pairs(self.tok, self.length, k, tick)
        else:
            pairs = _byte_pairs(layout, k, tick)
            tick()
            large = len(layout) >= _ARRAY_FROM
            self.tok = _byte_tokens(layout, _id_typecode(top_id) if large else None, tick)
            ends = accumulate(len(ids) + 1 for ids in ordered)
            for start, stop in _slices(len(ordered), tick):
                for p in islice(ends, stop - start):
                    self.tok[p] = BARRIER
            self.tok[0] = BARRIER
        del layout, ordered
        self.counts: dict[int, int] = {}  # pair key -> live weighted count (tracked pairs)
        self.positions: dict[int, array[int]] = {}  # pair key -> where it starts (some stale)
        self.heap: list[int] = []  # -count * kk + pair key, lazily checked against counts
        tick()
        self._track(max(min_frequency, _FLOOR, len(self.tok) // _POSITIONS_PER_FLOOR), pairs)

    def _weight(self, where: array[int]) -> int:
        """The total weight of the pairs starting at these positions."""
        weights = self.weights
        if not weights:
            return len(where)
        heavy = bisect_left(where, len(weights))  # where is ascending
        if heavy <= _SLICE:
            return len(where) - heavy + sum(map(weights.__getitem__, where[:heavy]))
        total = len(where) - heavy
        for start, stop in _slices(heavy, self.tick):
            total += sum(map(weights.__getitem__, where[start:stop]))
        return total

    def _track(self, floor: int, pairs: dict[int, array[int]]) -> None:
        """Count every live pair (pair key -> where it starts) from scratch and track those
        counted at least floor times."""
        self.floor = floor
        self.counts, self.positions, self.heap = {}, {}, []
        self.stored = 0  # positions held in all lists
        kk = self.kk
        weighed = 0  # positions since the last tick: pairs weigh a millionfold apart
        # Taken out of pairs as they are weighed, so an untracked list is freed at once.
        # Text with many distinct pairs (CJK) has millions of them to weigh.
        for start, stop in _slices(len(pairs), self.tick):
            for _ in range(stop - start):
                key, where = pairs.popitem()
                weighed += len(where)
                if weighed > _SLICE:
                    self.tick()
                    weighed = 0
                count = self._weight(where)
                if count >= floor:
                    self.counts[key] = count
                    self.positions[key] = where
                    self.stored += len(where)
                    self.heap.append(-count * kk + key)
        heapq.heapify(self.heap)

    def pop_best(self) -> tuple[int, int, int] | None:
        """The pair with the highest live count (ties: smallest pair), or None if none is left
        with at least min_frequency."""
        kk, min_frequency = self.kk, self.min_frequency
        while True:
            heap, counts = self.heap, self.counts
            while heap:
                entry = heap[0]
                count = -(entry // kk)
                key = entry % kk
                live = counts.get(key, 0)
                if live != count:
                    # The count fell since this entry was pushed: push it back at its live count.
                    if live >= min_frequency:
                        heapq.heapreplace(heap, -live * kk + key)
                        self._compact(key, live)
                    else:
                        heapq.heappop(heap)
                        counts.pop(key, None)
                        self.stored -= len(self.positions.pop(key, ()))
                    continue
                if live < self.floor:
                    break  # an untracked pair might tie or beat it
                heapq.heappop(heap)
                return key // self.k, key % self.k, count
            if self.floor <= min_frequency:
                return None
            lower = self.floor // _FLOOR_STEP
            floor = lower if lower > _FLOOR else min_frequency
            self._track(
                max(floor, min_frequency), _live_pairs(self.tok, self.length, self.k, self.tick)
            )

    def _compact(self, key: int, live: int) -> None:
        """Drop a pair's stale positions once they are most of its list (a count is at least
        the number of live positions), while the lists hold more than _STORED_PER_POSITION
        positions per corpus position. Without it they could reach three (each merged
        occurrence records two), so this caps memory at little cost: on natural text it rarely
        has to run."""
        where = self.positions[key]
        if self.stored <= _STORED_PER_POSITION * len(self.tok) or len(where) < 2 * live + _SHORT:
            return
        tok = self.tok
        left, right = divmod(key, self.k)
        shift = self.length[left]
        kept = array("I")
        for start, stop in _slices(len(where), self.tick):  # a list may hold millions
            part = where[start:stop]
            lefts_ok = array("I", compress(part, map(eq, map(tok.__getitem__, part), repeat(left))))
            starts = map(tok.__getitem__, map(add, lefts_ok, repeat(shift)))
            kept.extend(compress(lefts_ok, map(eq, starts, repeat(right))))
        self.positions[key] = kept
        self.stored -= len(where) - len(kept)

    def merge(self, a: int, b: int, c: int, tick: Callable[[], None]) -> int:
        """Replace every occurrence of (a, b) with c, left to right; return the weight merged.

        Position lists are always ascending (the initial buckets are, and every list made
        later is filled in the order a merge walks its own list), so walking `where` in order
        cuts runs like `a a a` left to right, as the reference does.
        """
        pair_key = a * self.k + b
        where = self.positions.pop(pair_key)
        self.stored -= len(where)
        del self.counts[pair_key]
        self.length[c] = self.length[a] + self.length[b]
        if len(where) <= _SMALL:
            tick()  # the bulk path asks part way; this one, before it starts
            return self._merge_few(where, a, b, c)
        done = _Pass()
        if len(where) <= _SLICE:
            self._relink(where, a, b, c, done)
        else:
            for start in range(0, len(where), _SLICE):
                self._relink(where[start : start + _SLICE], a, b, c, done)
                tick()
        del where
        self._recount(a, b, c, done, tick)
        return self._weight(done.merged)

    def _merge_few(self, where: array[int], a: int, b: int, c: int) -> int:
        """`merge` of a pair with few positions, with the same result in one plain loop: most
        merges of chunked text have under 30 positions (chunked-en: 8.1k of 9.7k), and for them
        the bulk path's fixed cost (a _Pass of three arrays, two defaultdicts of arrays, the
        list of changes) was most of the time; where neighbours rarely repeat (CJK, distinct
        chunks), so was its cost per distinct neighbour (an array, a change, a weighing).

        The neighbours are read once the pass is over: the mark at p - 1 cannot change later in
        a left-to-right pass, and a token right of c that is c now merged later in it (that
        pair is the next c's left side). Returns the weight merged."""
        tok, length, k = self.tok, self.length, self.k
        la, lb = length[a], length[b]
        lc, end_c = la + lb, _end(c)
        merged = []
        for p in where:
            if tok[p] != a:
                continue
            q = p + la
            if tok[q] != b:
                continue
            tok[p] = c
            tok[q] = DEAD
            tok[q + lb - 1] = end_c  # q itself when b spans one position
            merged.append(p)
        weights = self.weights
        light = len(weights)  # positions from here on weigh 1
        lefts: dict[int, list[int]] = {}  # mark left of c -> weight, then where c stands
        rights: dict[int, list[int]] = {}  # id right of c -> the same
        total = 0
        for p in merged:
            w = weights[p] if p < light else 1
            total += w
            mark = tok[p - 1]
            if mark != BARRIER:
                seen = lefts.get(mark)
                if seen is None:
                    lefts[mark] = [w, p]
                else:
                    seen[0] += w
                    seen.append(p)
            right = tok[p + lc]
            if right != c:
                seen = rights.get(right)
                if seen is None:
                    rights[right] = [w, p]
                else:
                    seen[0] += w
                    seen.append(p)
        counts, positions, heap, kk, floor = (
            self.counts,
            self.positions,
            self.heap,
            self.kk,
            self.floor,
        )
        get, push = counts.get, heapq.heappush
        for mark, seen in lefts.items():
            other = mark if mark >= 0 else _end(mark)  # _end is its own inverse
            gone = b * k + a if other == c else other * k + a
            n = seen[0]
            before = get(gone)  # None: untracked, or (a, b) itself
            if before is not None:
                counts[gone] = before - n
            if n >= floor:
                key = other * k + c
                counts[key] = n
                positions[key] = array("I", map(sub, islice(seen, 1, None), repeat(length[other])))
                self.stored += len(seen) - 1
                push(heap, -n * kk + key)
        ck = c * k
        for right, seen in rights.items():
            n = seen[0]
            before = get(b * k + right)
            if before is not None:
                counts[b * k + right] = before - n
            if n >= floor and right != BARRIER:
                key = ck + right
                counts[key] = n
                positions[key] = array("I", islice(seen, 1, None))
                self.stored += len(seen) - 1
                push(heap, -n * kk + key)
        return total

    def _relink(self, where: Sequence[int], a: int, b: int, c: int, done: _Pass) -> None:
        """The hot loop: merge each live occurrence of (a, b) in where, noting its neighbours.

        `a` at p spans la positions, so `b` starts at q = p + la and the token after it at r;
        c's last position r - 1 gets its end mark, the one of the token before p is at p - 1.
        """
        tok, length = self.tok, self.length
        la, lb = length[a], length[b]
        end_c = _end(c)
        at, left_end, right_id = done.merged.append, done.left_ends.append, done.right_ids.append
        for p in where:
            if tok[p] != a:
                continue
            q = p + la
            if tok[q] != b:
                continue
            r = q + lb
            tok[p] = c
            tok[q] = DEAD
            tok[r - 1] = end_c  # q itself when b spans one position
            at(p)
            left_end(tok[p - 1])  # final: nothing left of p changes later in this pass
            right_id(tok[r])  # an `a` here may yet become c: see _recount

    def _recount(self, a: int, b: int, c: int, done: _Pass, tick: Callable[[], None]) -> None:
        """Update the counts from the state after the merge, in bulk.

        Around each new c at p, with L its left and R its right neighbour now:
        - L is an old token: (L, a) is gone and (L, c) is new, starting at L;
        - L is c too (`a b a b` -> `c c`): (b, a) between them is gone and (c, c) is new;
        - R is an old token: (b, R) is gone and (c, R) is new, starting at p;
        - R is c: nothing, that is the next c's left side. (a, b) itself is gone everywhere.
        L is known by the mark at p - 1 (its id, or its end mark), and starts length[L]
        positions before p (the same sequence, so the same weight).
        """
        tok, k, lc = self.tok, self.k, self.length[c]
        by_left: defaultdict[int, array[int]] = defaultdict(_new_positions)
        by_right: defaultdict[int, array[int]] = defaultdict(_new_positions)
        merged, left_ends, right_ids = done.merged, done.left_ends, done.right_ids
        sliced = len(merged) > _SLICE  # most merges are short: no copies for them
        for start in range(0, len(done.merged), _SLICE):
            if sliced:
                span = slice(start, start + _SLICE)
                merged, left_ends, right_ids = (
                    done.merged[span],
                    done.left_ends[span],
                    done.right_ids[span],
                )
            deque(map(array.append, map(by_left.__getitem__, left_ends), merged), 0)
            deque(map(array.append, map(by_right.__getitem__, right_ids), merged), 0)
            tick()
        if a in by_right:  # R was `a` when p merged; it became c if it merged later
            where, kept = by_right[a], array("I")
            for start, stop in _slices(len(where), tick):  # millions, in a run-heavy merge
                part = where[start:stop]
                still = map(eq, map(tok.__getitem__, map(add, part, repeat(lc))), repeat(a))
                kept.extend(compress(part, still))
            by_right[a] = kept

        changes = []  # (gone pair key, new pair key, where c stands, shift to the new pairs)
        for mark, where in by_left.items():
            if mark == BARRIER:
                continue
            other = mark if mark >= 0 else _end(mark)  # _end is its own inverse
            gone = b * k + a if other == c else other * k + a
            changes.append((gone, other * k + c, where, self.length[other]))
        by_right.pop(c, None)
        ck = c * k
        changes += [(b * k + other, ck + other, where, 0) for other, where in by_right.items()]
        self._apply(changes, tick)

    def _apply(
        self, changes: list[tuple[int, int, array[int], int]], tick: Callable[[], None]
    ) -> None:
        """For each (gone pair key, new pair key, where, shift): the new pairs start at where
        minus shift (the same weight as where); move that weight from the gone pair to the new
        one, and track the new one if common enough. New keys with a barrier on the right
        (k - 1) are skipped."""
        counts, positions, heap, kk, floor, k = (
            self.counts,
            self.positions,
            self.heap,
            self.kk,
            self.floor,
            self.k,
        )
        weights = self.weights
        light = len(weights)  # positions from here on weigh 1
        get = counts.get
        push = heapq.heappush
        stored = 0
        since_tick = 0  # positions weighed since the last tick: weighing is the slow part
        for gone, key, where, shift in changes:
            count = len(where)
            if not count or key % k == k - 1:
                continue
            since_tick += count
            if since_tick > _SLICE:
                tick()
                since_tick = 0
            if light and where[0] < light:
                heavy = bisect_left(where, light)
                count += sum(map(weights.__getitem__, where[:heavy])) - heavy
            before = get(gone)  # None: untracked, or (a, b) itself
            if before is not None:
                counts[gone] = before - count
            if count >= floor:
                if shift:
                    where = array("I", map(sub, where, repeat(shift)))
                counts[key] = count
                positions[key] = where
                stored += len(where)
                push(heap, -count * kk + key)
        self.stored += stored


def _id_typecode(top_id: int) -> str:
    """The array type that holds every id below top_id and every end mark: 2 bytes if it can."""
    return "h" if _end(top_id) >= -(1 << 15) else "i"


def _end(token_id: int) -> int:
    """The mark on the last position of a token spanning two or more: below DEAD and BARRIER,
    and its own inverse (_end(_end(i)) == i)."""
    return -3 - token_id


class _Pass:
    """What one merge did: where c now stands, and the marks and ids of its neighbours."""

    __slots__ = ("left_ends", "merged", "right_ids")

    def __init__(self) -> None:
        self.merged = array("I")  # where each new c starts
        self.left_ends = array("i")  # the mark left of it: an id, its end mark, or BARRIER
        self.right_ids = array("i")  # the id right of it when it merged


def _byte_tokens(
    layout: bytes | bytearray, typecode: str | None, tick: Callable[[], None]
) -> list[int] | array[int]:
    """The layout's bytes as token ids: a list, or an array of 2- or 4-byte ids widened from
    the bytes a slice at a time (each byte into the low byte of its slot)."""
    if typecode is None:
        tok: list[int] = []
        for start, stop in _slices(len(layout), tick):
            tok += layout[start:stop]
        return tok
    ids = array(typecode)
    width = ids.itemsize
    low = slice(0, None, width) if sys.byteorder == "little" else slice(width - 1, None, width)
    for start, stop in _slices(len(layout), tick):
        wide = bytearray(width * (stop - start))
        wide[low] = layout[start:stop]
        ids.frombytes(wide)
    return ids


def _tear_down(corpus: _Corpus, tick: Callable[[], None]) -> None:
    """Empty every container the trainer's state holds, a slice at a time."""
    for value in vars(corpus).values():
        if isinstance(value, list | dict | array):
            release(value, tick)


def _order(
    sequences: Sequence[tuple[Sequence[int], int]], tick: Callable[[], None]
) -> tuple[list[Sequence[int]], list[int]]:
    """The sequences worth laying out, heavy ones first, and the weights of their positions.

    Sequences of weight above 1 come first and each of their positions' weight is kept; those
    of weight 1 (most of them in natural text) follow from position len(weights) on, where no
    weight needs looking up. Order does not matter: no pair crosses a barrier, and ties are
    broken by ids, never by position. A lone token holds no pair and never changes: left out.
    """
    heavy: list[tuple[Sequence[int], int]] = []
    light: list[Sequence[int]] = []
    for start, stop in _slices(len(sequences), tick):  # a million chunks, in a large corpus
        part = sequences[start:stop]
        heavy += [(ids, weight) for ids, weight in part if weight > 1 and len(ids) >= 2]
        light += [ids for ids, weight in part if weight == 1 and len(ids) >= 2]
    # position -> weight, before the light ones. A list: its bound __getitem__ is a direct
    # method call, an array's a slot wrapper (about half as fast), and weighing is a lookup per
    # merged occurrence of a chunk. Built here, each sequence's positions share its one int
    # object, so the list costs its 8-byte slots alone. It was an array converted to a list:
    # both were held at once, and every weight above 256 became an int object of its own; on
    # a corpus whose every chunk occurs more than once (every position heavy: the distinct
    # chunks of 119 MB weighing as in 1 GB, 14.6 M positions) the set-up peaked at 419 MiB
    # against 345 MiB now.
    weights = [0] if heavy else []
    for start, stop in _slices(len(heavy), tick):
        for ids, weight in heavy[start:stop]:
            weights.extend(repeat(weight, len(ids) + 1))
    ordered = [ids for ids, _ in heavy]
    ordered += light
    return ordered, weights


def _id_layout(ordered: list[Sequence[int]], tick: Callable[[], None]) -> list[int]:
    """All sequences end to end, with a barrier before, between and after them."""
    tok = [BARRIER]
    for start, stop in _slices(len(ordered), tick):
        for ids in ordered[start:stop]:
            tok.extend(ids)
            tok.append(BARRIER)
    return tok


def _byte_layout(ordered: list[Sequence[int]], tick: Callable[[], None]) -> bytearray | None:
    """The same as bytes with 0xFF as the barrier, if every sequence is bytes without 0xFF
    (UTF-8 never holds it), else None. Joined a slice at a time: a large corpus's layout
    joined in one call took ~100 ms."""
    layout = bytearray(b"\xff")
    for start, stop in _slices(len(ordered), tick):
        part = ordered[start:stop]
        if not all(map(isinstance, part, repeat(bytes))):
            return None
        joined = b"\xff".join(part)  # type: ignore[arg-type]  # each part is bytes, checked above
        barriers = 0
        # A naive corpus is one sequence: copied and checked a piece at a time.
        for at in range(0, len(joined), _COPY_BYTES):
            barriers += joined.count(b"\xff", at, at + _COPY_BYTES)
            layout += memoryview(joined)[at : at + _COPY_BYTES]
            tick()
        if barriers != len(part) - 1:  # a 0xFF inside a sequence
            return None
        layout += b"\xff"
    return layout


def _byte_pairs(
    layout: bytes | bytearray, k: int, tick: Callable[[], None]
) -> dict[int, array[int]]:
    """Pair key -> every position where the pair starts, ascending, for a byte layout.

    Each pair is read as one 16-bit word (a slice's bytes and the same bytes shifted by one,
    interleaved), so bucketing runs in C without a key computation, and in position order: the
    buckets come out ascending and become the position lists as they are, with no sort and no
    second copy (on a large naive corpus they are the largest structure of the set-up).
    """
    n = len(layout) - 1  # pairs start at 0 .. n - 1
    buckets: defaultdict[int, array[int]] = defaultdict(_new_positions)
    lefts = slice(0, None, 2) if sys.byteorder == "little" else slice(1, None, 2)
    rights = slice(1, None, 2) if sys.byteorder == "little" else slice(0, None, 2)
    for start, stop in _slices(n, tick):
        words = bytearray(2 * (stop - start))
        words[lefts] = layout[start:stop]
        words[rights] = layout[start + 1 : stop + 1]
        keys = memoryview(words).cast("H")
        deque(map(array.append, map(buckets.__getitem__, keys), range(start, stop)), 0)
    pairs: dict[int, array[int]] = {}
    for word, where in buckets.items():
        left, right = word & 0xFF, word >> 8
        if left != 0xFF and right != 0xFF:
            pairs[left * k + right] = where
    return pairs


def _live_pairs(
    tok: list[int] | array[int], length: list[int], k: int, tick: Callable[[], None]
) -> dict[int, array[int]]:
    """Pair key -> every position where the pair starts now, in ascending order, bucketed in C
    by chained maps (no Python loop over positions), a slice at a time so the stop check is
    asked between slices.

    Only positions holding an id start a token (dead ones, end marks and barriers are
    negative); the token after the one at p starts at p + length[tok[p]]. Keys with a barrier
    on the right have k - 1 on the right; they are dropped.
    """
    n = len(tok) - 1
    buckets: defaultdict[int, array[int]] = defaultdict(_new_positions)
    for first, last in _slices(n, tick):
        # Real slices, not islice: islice would walk from 0 to `first` every time.
        part = tok[first:last]
        starts = list(compress(range(first, last), map(ge, part, repeat(0))))
        lefts = list(map(tok.__getitem__, starts))
        rights = map(tok.__getitem__, map(add, starts, map(length.__getitem__, lefts)))
        keys = map(add, map(mul, lefts, repeat(k)), rights)
        deque(map(array.append, map(buckets.__getitem__, keys), starts), 0)
    # Dropped in place: at most k keys have a barrier on the right (left * k - 1, for every
    # left id), while CJK text has millions of pairs, which a filtered copy took ~200 ms to
    # make in one go.
    deque(map(buckets.pop, range(-1, (k - 1) * k, k), repeat(None)), 0)
    buckets.default_factory = None
    return buckets
