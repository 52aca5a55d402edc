"""Keeping long training work interruptible: the stop check and the progress report are made
at most every 30 ms, and bulk steps are cut into slices so that one is due at least every
100 ms of work.

A step that runs in one C call (a sort, a join, freeing a list of millions of objects) cannot
be interrupted by anything in Python, so every such step over a large corpus is cut into
slices here, the stop check asked between them.
"""

from __future__ import annotations

import gc
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import repeat, starmap
from typing import Any

from bpe.training_types import MergeRecord, Progress, ProgressFn, StopFn, TrainingCancelled

# Progress and the stop check run at most this often, and at least every 100 ms of work. At
# 50 ms, a slice that ran three or four times its 15 ms (seen twice in five quiet runs of
# english_large naive, 0.15 s and ~14 s in, at 107-109 ms) put the gap past 100 ms; each check
# costs ~35 us, so checking every 30 ms costs ~0.1% of training.
_REPORT_EVERY = 0.03
# Bulk C-level steps are cut into slices of about this much work. A check falls due every
# _REPORT_EVERY but is only made between slices, so it can be late by up to one slice: this
# keeps the worst gap between checks well inside 100 ms.
_SLICE_SECONDS = 0.015
_FIRST_SLICE = 1024  # items in the first slice, before any has been timed
_SMALLEST_SLICE = 256
_paused = 0  # trainings under way that paused the collector (threads may train at once)
_resume = False  # whether the collector was enabled before the first of them paused it
_pause_lock = threading.Lock()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection while training runs.

    A full collection walks every slot of every list and dict still alive, and training
    holds lists of one slot per byte of the corpus and dicts of millions of pairs: one
    collection took 100-300 ms in one C call, at moments no stop check can choose. Training
    itself makes no reference cycles (everything it drops is freed by reference counting at
    once); whatever cycles the callbacks leave are collected once the last training ends."""
    global _paused, _resume
    with _pause_lock:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _pause_lock:
            _paused -= 1
            if _paused == 0 and _resume:
                gc.enable()


class Clock:
    """Calls should_stop and progress once at least _REPORT_EVERY seconds have passed.

    Until the trainer has counted the tokens (while the text is split, and while the trainer
    first reads the sequences), every field reported is 0; from then until the first merge,
    merges_done is 0 with the real target and token total; after it, the last merge's state."""

    def __init__(
        self,
        target: int,
        records: list[MergeRecord],
        progress: ProgressFn | None,
        should_stop: StopFn | None,
    ) -> None:
        self.target = target
        self.initial_total: int | None = None  # known once set-up has counted the tokens
        self.records = records  # the run so far: the last record is the state to report
        self.progress = progress
        self.should_stop = should_stop
        self.next_check = 0.0
        self.reported = 0  # merges done at the last report
        self.split = (0, 0)  # characters of the text split so far, of all (see `splitting`)

    def tick(self) -> None:
        if time.perf_counter() >= self.next_check:
            self.check()

    def defer(self, since: float | None = None) -> None:
        """Make the next check due a full interval after `since` (a perf_counter time, now by
        default): when the last check was made."""
        self.next_check = (time.perf_counter() if since is None else since) + _REPORT_EVERY

    def check(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise TrainingCancelled(len(self.records))
        if self.progress is not None:
            self._report()
        self.next_check = time.perf_counter() + _REPORT_EVERY

    def finish(self) -> None:
        """Report the final state, unless the last report was of it."""
        if self.progress is not None and self.records and self.reported != len(self.records):
            self._report()

    def splitting(self, total: int) -> Callable[[int], None]:
        """A callback for the splitters to say how many of the text's `total` characters are
        split so far; the next report (it does not make one) carries the figure."""

        def advanced(done: int) -> None:
            self.split = (min(done, total), total)

        return advanced

    def stop_fn(self) -> StopFn:
        """This clock as a should_stop for code that asks one (and raises itself)."""

        def due() -> bool:
            try:
                self.tick()
            except TrainingCancelled:
                return True
            return False

        return due

    def _report(self) -> None:
        assert self.progress is not None
        if not self.records:
            # Set-up of a large corpus takes seconds: say so rather than stay silent.
            if self.initial_total is None:
                done, total = self.split
                self.progress(Progress(0, 0, None, 0, 0, split_done=done, split_total=total))
            else:
                self.progress(Progress(0, self.target, None, 0, self.initial_total))
            return
        last = self.records[-1]
        pair = (last.left, last.right)
        learned = tuple((r.left, r.right, r.new_id) for r in self.records[self.reported :])
        self.progress(
            Progress(len(self.records), self.target, pair, last.count, last.tokens_after, learned)
        )
        self.reported = len(self.records)


def slices(
    n: int,
    tick: Callable[[], None],
    *,
    most: int | None = None,
    cut: Callable[[int], int] | None = None,
) -> Iterator[tuple[int, int]]:
    """(start, stop) bounds that cover range(n), calling tick after each slice's work.

    The cost of one item varies a hundredfold between corpora (bucketing the pairs of CJK text,
    with its millions of distinct pairs, misses the cache far more than English does), so no
    fixed size fits: each slice is sized from the time the last one took, to _SLICE_SECONDS,
    and to at most `most` items. `cut(i)`, if given, moves a slice's end from i to the first
    place at or after i where a slice may end (text cut only between words, say).
    """
    limit = n if most is None else max(1, most)
    start, step = 0, min(_FIRST_SLICE, limit)
    while start < n:
        stop = min(start + step, n)
        if cut is not None and stop < n:
            stop = min(max(cut(stop), start + 1), n)
        began = time.perf_counter()
        yield start, stop
        spent = time.perf_counter() - began
        tick()
        wanted = int((stop - start) * _SLICE_SECONDS / spent) if spent > 0 else 4 * step
        step = min(limit, max(_SMALLEST_SLICE, min(4 * step, wanted)))
        start = stop


def release(items: list[Any] | dict[Any, Any] | array[Any], tick: Callable[[], None]) -> None:
    """Empty a list, array or dict a slice at a time, calling tick between slices.

    Freeing a container of millions of objects is one C call: dropping the last reference
    to the token list or the pair positions of a large corpus took 100-500 ms."""
    if isinstance(items, dict):
        for start, stop in slices(len(items), tick):
            deque(starmap(items.popitem, repeat((), stop - start)), 0)
    else:
        n = len(items)
        for start, stop in slices(n, tick):
            del items[n - stop : n - start]
