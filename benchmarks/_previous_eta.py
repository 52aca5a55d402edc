"""The job page's previous time-left estimator, kept only as benchmarks/eta_check.py's peer.

It fitted each step's wall seconds ~= per_merge * merges + per_token * tokens removed over the
recent half of merging, and extrapolated the falling counts; webapp/jobs/progress.py replaced
it (docs/training.md, "Time left").
"""

from __future__ import annotations

from dataclasses import dataclass

from _common import ROOT  # noqa: F401 - puts this checkout first on sys.path

from webapp.jobs.progress import MergeEstimator


@dataclass(frozen=True)
class _Sample:
    seconds: float  # since merging began
    merges: int
    removed: int  # tokens the merges so far took out of the training data
    count: int  # the count of the pair merged last


class PreviousEstimator:
    """Seconds of merging left, as the job page estimated them before (a wall-time fit)."""

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

    # The falling counts were extrapolated as the estimator does still.
    _future_removed = MergeEstimator._future_removed
