"""What every trainer takes and gives back: the records of a run and its link to the outside.

A trainer's only contact with the world is a progress callback and a stop check, so the same
trainer runs in a test, on the command line and in a web job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class MergeRecord(NamedTuple):
    """One learned merge: (left, right) -> new_id, with the pair's count when it was learned and
    the total number of tokens in the training data right after it was applied."""

    left: int
    right: int
    new_id: int
    count: int  # type: ignore[assignment]  # shadows tuple.count; the saved, public field name
    tokens_after: int


class Progress(NamedTuple):
    """Where training is. While the text is still being split (and the trainer has not yet
    counted its tokens), every field is 0 (and pair None) but split_done and split_total;
    during the rest of the trainer's set-up merges_done is 0 with the real target and token
    total."""

    merges_done: int
    merges_target: int
    pair: tuple[int, int] | None  # the pair merged last, None before the first merge
    count: int  # type: ignore[assignment]  # that pair's count; shadows tuple.count, a public name
    total_tokens: int  # tokens in the training data after the last merge
    # Every merge made since the previous report, oldest first, as (left, right, new id): a
    # watcher can then name each token it sees, however many merges one report spans.
    learned: tuple[tuple[int, int, int], ...] = ()
    # While the text is split: how many of its characters are split so far, of split_total
    # (both 0 when splitting is not measured: naive mode, or a pattern split in one piece).
    split_done: int = 0
    split_total: int = 0


ProgressFn = Callable[[Progress], None]
StopFn = Callable[[], bool]


class TrainingCancelled(Exception):
    """Raised by a trainer when its stop check answered True; no partial result is returned."""

    def __init__(self, merges_done: int) -> None:
        super().__init__(f"training cancelled after {merges_done} merges")
        self.merges_done = merges_done
