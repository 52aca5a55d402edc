"""What a running job tells its page: which phase it is in, and a time left only once it can
be honest.

Phases, in order: reading the corpus from the database, splitting the text (chunked and
words modes), counting pairs (the trainer's set-up), merging, storing the result. Only merging
reports how far it is (merges done of a known target), so only merging gets a bar and a time
left; the others say what they are doing and for how long.

The time left comes from the merges measured so far, not from "elapsed / done * remaining":
each merge costs a fixed part plus a part that grows with how many tokens it rewrites, and
the pair counts fall steeply as training goes on (roughly a power law in the merge's rank),
so late merges are much cheaper than early ones and a straight-line guess is off by 10-1000x.
`MergeEstimator` fits the two costs to the merges seen, extrapolates the falling counts to the
target, and says nothing ("estimating…") until it has seen enough of the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PHASES = {
    "reading": "reading the corpus",
    "splitting": "splitting the text into chunks",
    "counting": "counting pairs",
    "merging": "merging",
    "storing": "storing the tokeniser",
}


def phase_of(merges_done: int, merges_target: int, total_tokens: int) -> str:
    """The phase a bpe.Progress report belongs to (see bpe.Progress: all zero while the text
    is split; merges_done 0 with the target known during the trainer's set-up)."""
    if merges_done:
        return "merging"
    if merges_target or total_tokens:
        return "counting"
    return "splitting"


@dataclass(frozen=True)
class _Sample:
    seconds: float  # since merging began
    merges: int
    removed: int  # tokens the merges so far took out of the training data
    count: int  # the count of the pair merged last


class MergeEstimator:
    """Seconds of merging left, from the merges seen so far; None until that is honest."""

    MIN_SECONDS = 0.5  # of merging observed before any estimate
    MIN_FRACTION = 0.02  # of the target merged before any estimate
    MIN_SAMPLES = 5

    def __init__(self) -> None:
        self.start: float | None = None  # when merging began (the last report before it)
        self.initial_tokens: int | None = None
        self.target = 0
        self.samples: list[_Sample] = []
        self._last_before: float | None = None

    def observe(
        self, now: float, merges_done: int, merges_target: int, count: int, total_tokens: int
    ) -> None:
        """Feed every progress report (any phase), with a monotonic time."""
        if not merges_done:
            self._last_before = now
            if total_tokens:
                self.initial_tokens = total_tokens
            return
        if self.start is None:
            self.start = self._last_before if self._last_before is not None else now
            if self.initial_tokens is None:
                # No set-up report (the reference trainer): the first merges removed ~count each.
                self.initial_tokens = total_tokens + count * merges_done
        removed = max(0, (self.initial_tokens or total_tokens) - total_tokens)
        if len(self.samples) >= 4000:
            self.samples = self.samples[::2]  # a long run keeps every other sample, bounded
        self.samples.append(_Sample(now - self.start, merges_done, removed, count))
        self.target = merges_target

    def seconds_left(self) -> float | None:
        if len(self.samples) < self.MIN_SAMPLES:
            return None
        last = self.samples[-1]
        if last.seconds < self.MIN_SECONDS or last.merges < self.MIN_FRACTION * self.target:
            return None
        per_merge, per_token = self._fit()
        left = max(0, self.target - last.merges)
        return per_merge * left + per_token * self._future_removed(last)

    def _recent(self) -> list[_Sample]:
        """The samples of the later half of the merging time so far (what is coming is more
        like what just happened than like the first, most expensive merges)."""
        half = self.samples[-1].seconds / 2
        recent = [s for s in self.samples if s.seconds >= half]
        return recent if len(recent) >= 3 else self.samples[-3:]

    def _fit(self) -> tuple[float, float]:
        """Each step's seconds ~= per_merge * merges + per_token * tokens removed, least
        squares over the recent steps, both costs kept non-negative."""
        recent = self._recent()
        steps = [
            (b.seconds - a.seconds, b.merges - a.merges, b.removed - a.removed)
            for a, b in zip(recent, recent[1:], strict=False)
        ]
        smm = sum(m * m for _, m, _ in steps)
        srr = sum(r * r for _, _, r in steps)
        smr = sum(m * r for _, m, r in steps)
        stm = sum(t * m for t, m, _ in steps)
        str_ = sum(t * r for t, _, r in steps)
        det = smm * srr - smr * smr
        if det > 0:
            a = (stm * srr - str_ * smr) / det
            b = (str_ * smm - stm * smr) / det
            if a >= 0 and b >= 0:
                return a, b
        # One cost only: whichever of the two fits the steps better.
        a = stm / smm if smm else 0.0
        b = str_ / srr if srr else 0.0
        err_a = sum((t - a * m) ** 2 for t, m, _ in steps)
        err_b = sum((t - b * r) ** 2 for t, _, r in steps)
        return (a, 0.0) if err_a <= err_b or not srr else (0.0, b)

    def _future_removed(self, last: _Sample) -> float:
        """Tokens the remaining merges will take out, if counts keep falling as they have:
        count(rank) ~ c * (rank / m) ** -alpha, alpha fitted on log count against log rank over
        the later half of the ranks merged so far."""
        m, n, c = last.merges, self.target, last.count
        if c <= 0 or n <= m:
            return 0.0
        points = [
            (math.log(s.merges), math.log(s.count))
            for s in self.samples
            if s.merges >= m / 2 and s.count > 0
        ]
        alpha = 1.0
        if len(points) >= 3:
            mx = sum(x for x, _ in points) / len(points)
            my = sum(y for _, y in points) / len(points)
            sxx = sum((x - mx) ** 2 for x, _ in points)
            if sxx > 0:
                alpha = -sum((x - mx) * (y - my) for x, y in points) / sxx
        alpha = min(max(alpha, 0.2), 3.0)
        if abs(1.0 - alpha) < 1e-6:
            return c * m * math.log(n / m)
        return c * m**alpha * (n ** (1 - alpha) - m ** (1 - alpha)) / (1 - alpha)
