"""The job page's previous time-left estimator, kept only as benchmarks/eta_check.py's peer.

It fitted the trainer's CPU time two ways, a fixed cost per merge plus a cost per token removed
(which ran high: the "fixed" part falls too) and the CPU time per merge as a power of the rank
(from a tenth of the merges done), and showed their geometric mean; webapp/jobs/progress.py
replaced it (docs/training.md, "Time left"). It reads the reports as the new one does, and
its estimates run down between two as the page's now do (Estimate.aged), so the two differ in
their fits, pace and tear-down only.
"""

from __future__ import annotations

import math

from _common import ROOT  # noqa: F401 - puts this checkout first on sys.path

from webapp.jobs.progress import Estimate, MergeEstimator, _integral, _Sample, _slope


class PreviousEstimator(MergeEstimator):
    """Seconds of training left while merging, as the job page estimated them before."""

    TEARDOWN_CPU = 0.04
    TEARDOWN_SHARE = 0.02
    PACE_SHARE = 0.2

    def estimate(self) -> Estimate | None:
        edges = self._fit_edges()
        if edges is None:
            return None
        high, low = self._cost_fit(edges), self._power_fit(edges)
        if high is None or low is None:
            return None
        extra = max(self.TEARDOWN_CPU, self.TEARDOWN_SHARE * self.setup_cpu)
        pace = self._pace()
        high, low = (high + extra) * pace, (low + extra) * pace
        high, low = max(high, low), min(high, low)
        assert self.start is not None
        return Estimate(math.sqrt(high * low), low, high, self.start[0] + self.samples[-1].wall)

    def _cost_fit(self, edges: list[float]) -> float | None:
        """CPU seconds left if each merge costs per_merge + per_token * tokens it removes:
        both fitted to the windows (least squares on the relative error, both kept
        non-negative), the tokens still to remove extrapolated from the falling counts."""
        steps = [(t, dm, dr) for t, dm, dr, _ in self._windows(edges)]
        if len(steps) < 3:
            return None
        weights = [1 / t**2 for t, _, _ in steps]
        rows = list(zip(weights, steps, strict=True))
        smm = sum(w * dm * dm for w, (_, dm, _) in rows)
        srr = sum(w * dr * dr for w, (_, _, dr) in rows)
        smr = sum(w * dm * dr for w, (_, dm, dr) in rows)
        stm = sum(w * t * dm for w, (t, dm, _) in rows)
        str_ = sum(w * t * dr for w, (t, _, dr) in rows)
        det = smm * srr - smr * smr
        a = b = -1.0
        if det > 1e-12 * smm * srr:
            a = (stm * srr - str_ * smr) / det
            b = (str_ * smm - stm * smr) / det
        if a < 0 or b < 0:  # one cost only: whichever of the two fits the windows better
            a = stm / smm if smm else 0.0
            b = str_ / srr if srr else 0.0
            err_a = sum(w * (t - a * dm) ** 2 for w, (t, dm, _) in rows)
            err_b = sum(w * (t - b * dr) ** 2 for w, (t, _, dr) in rows)
            a, b = (a, 0.0) if err_a <= err_b or not srr else (0.0, b)
        last = self.samples[-1]
        left = max(0, self.target - last.merges)
        return a * left + b * self._future_removed(last)

    def _power_fit(self, edges: list[float]) -> float | None:
        """CPU seconds left if the time per merge is k * rank ** -beta: beta fitted on log
        time per merge against log rank over the windows, k so that the later half of the
        fitted ranks took what it took."""
        windows = self._windows(edges)
        if len(windows) < 3:
            return None
        slope = _slope(
            [math.log(mid) for _, _, _, mid in windows],
            [math.log(t / dm) for t, dm, _, _ in windows],
        )
        if slope is None:
            return None
        beta = min(max(-slope, self.BETA[0]), self.BETA[1])
        last = self.samples[-1]
        half = math.sqrt(edges[0] * last.merges)
        spent = last.cpu - self._at(half)[0]
        if spent <= 0 or self.target <= last.merges:
            return 0.0
        return (
            spent / _integral(half, last.merges, beta) * _integral(last.merges, self.target, beta)
        )

    def _pace(self) -> float:
        """Wall seconds per CPU second of the trainer over the latest merges (the last
        PACE_SHARE of the ranks done): how loaded the machine is now (1 with no CPU times)."""
        last = self.samples[-1]
        since = last.merges * (1 - self.PACE_SHARE)
        first = next(s for s in self.samples if s.merges >= since)
        if first is last or self.samples.index(first) > len(self.samples) - 3:
            first = self.samples[max(0, len(self.samples) - 3)]
        cpu, wall = last.cpu - first.cpu, last.wall - first.wall
        if cpu <= 0 or wall <= 0:
            return 1.0
        return min(max(wall / cpu, 1.0), 50.0)

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
        slope = None
        if len(points) >= 3:
            slope = _slope([x for x, _ in points], [y for _, y in points])
        alpha = min(max(1.0 if slope is None else -slope, 0.2), 3.0)
        return c * m**alpha * _integral(m, n, alpha)
