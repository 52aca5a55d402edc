"""What a running job tells its page: which phase it is in, and a time left only once it can
be honest.

Phases, in order: reading the corpus from the database, splitting the text (chunked and
words modes), counting pairs (the trainer's set-up), merging, storing the result. Only merging
reports how far it is (merges done of a known target), so only merging gets a bar and a time
left; the others say what they are doing and for how long.

The time left comes from the merges measured so far, not from "elapsed / done * remaining":
a merge costs about a power of the tokens it rewrites, and the pair counts fall steeply as
training goes on (roughly a power law in the merge's rank), so late merges are much cheaper
than early ones and a straight-line guess is off by 10-1000x. `MergeEstimator` fits that cost
to the merges seen, extrapolates the falling counts to the target, and says nothing
("estimating…") until it has seen enough of the run (docs/training.md, "Time left").
"""

from __future__ import annotations

import math
from bisect import bisect_left
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
    wall: float  # seconds since merging began
    cpu: float  # the trainer's CPU seconds since merging began (the wall time if not given)
    merges: int
    removed: float  # tokens the merges so far took out of the training data
    count: int  # the count of the pair merged last


@dataclass(frozen=True)
class Estimate:
    """Seconds of training left as of the report at monotonic time `at`, and the range the
    estimator would not be surprised by (docs/training.md, "Time left")."""

    seconds: float
    low: float
    high: float
    at: float = 0.0

    def aged(self, now: float) -> Estimate:
        """The same prediction seen `now`: the end it foresees stays where it was, so the time
        left runs down between two estimates (a fresh one is made every few reports)."""
        gone = max(0.0, now - self.at)
        return Estimate(
            max(0.0, self.seconds - gone),
            max(0.0, self.low - gone),
            max(0.0, self.high - gone),
            now,
        )


class MergeEstimator:
    """Seconds of training left while merging, from the merges seen so far; None until that
    is honest (docs/training.md, "Time left").

    How a merge's cost evolves was measured on English, Chinese and source-code corpora, naive
    and chunked (the traces behind benchmarks/eta_check.py): the trainer's CPU time per merge
    is about a power (0.6-0.9) of the tokens the merge removes, the counts fall as a power of
    the merge's rank (1.1-1.5, steepening as the run goes on), and the wall time per merge
    jumps whenever the machine's load changes. So the fit is made on CPU time, over windows
    evenly spaced in log rank from a tenth of the merges done so far to the last:
    - `_count_fit` (the time shown): CPU per merge as k * (tokens removed per merge) ** gamma,
      gamma fitted over the windows, k so that the latest windows took what they took, and the
      counts still to come extrapolated as a power of the rank fitted on the later half;
    - `_power_fit` (the other end of the range): CPU per merge as a power of the rank.
    The CPU time left is turned into wall time at the pace of the latest merges (how loaded
    the machine is now), and the trainer's tear-down is added (TEARDOWN_CPU). The range shown
    with it spans both fits at both the latest pace and the pace since merging began.
    A fit on wall time alone was 2-8x off mid-job; a fixed-plus-per-token cost ran 1.5-2.3x
    high in naive mode, where the "fixed" part falls too.
    """

    MIN_SECONDS = 0.3  # of merging observed before any estimate
    MIN_FRACTION = 0.05  # of the target merged before any estimate
    MIN_SAMPLES = 8
    FIT_FROM = 0.1  # the fits cover ranks from this share of the merges done to the last
    WINDOWS = 10
    ANCHOR_SHARE = 0.3  # a fit's scale is set by this latest share of its windows
    COUNTS_FROM = 0.5  # the counts' power law is fitted on ranks from this share of the done
    # Wall per CPU second over the latest PACE_SHARE of the ranks merged or the latest
    # PACE_SECONDS, whichever is longer: on a loaded machine the pace of the next seconds was
    # closer to that than to the latest fifth of the ranks alone (the last second of a short
    # run is a few scheduler slices).
    PACE_SHARE = 0.2
    PACE_SECONDS = 3.0
    # The trainer's tear-down after the last merge (freeing its pair tables and heap, a slice
    # at a time) took 0.03-0.4 s of CPU on English, Chinese and code, naive and chunked: at
    # least TEARDOWN_CPU, more after a long set-up.
    TEARDOWN_CPU = 0.1
    TEARDOWN_SHARE = 0.02
    GAMMA = (0.0, 1.5)  # the count fit's exponent is kept within these
    BETA = (0.2, 1.5)  # the power fit's exponent is kept within these
    MAX_SAMPLES = 4000

    def __init__(self) -> None:
        self.start: tuple[float, float] | None = None  # (wall, cpu) when merging began
        self.initial_tokens: int | None = None
        self.target = 0
        self.samples: list[_Sample] = []
        self._last_before: tuple[float, float] | None = None
        self._setup_from: float | None = None  # CPU time of the first set-up report
        self.setup_cpu = 0.0

    def observe(
        self,
        now: float,
        merges_done: int,
        merges_target: int,
        count: int,
        total_tokens: int,
        *,
        cpu: float | None = None,
    ) -> None:
        """Feed every progress report (any phase), with a monotonic time and, if known, the
        training thread's CPU time (`time.thread_time()` in the progress callback)."""
        used = now if cpu is None else cpu
        if not merges_done:
            self._last_before = (now, used)
            if total_tokens:
                self.initial_tokens = total_tokens
                if self._setup_from is None:
                    self._setup_from = used
            return
        if self.start is None:
            self.start = self._last_before if self._last_before is not None else (now, used)
            if self._setup_from is not None:
                self.setup_cpu = max(0.0, self.start[1] - self._setup_from)
            if self.initial_tokens is None:
                # No set-up report (the reference trainer): the first merges removed ~count each.
                self.initial_tokens = total_tokens + count * merges_done
        if self.samples and merges_done <= self.samples[-1].merges:
            return  # the tear-down reports the last merge again: nothing new to fit
        removed = max(0, (self.initial_tokens or total_tokens) - total_tokens)
        if len(self.samples) >= self.MAX_SAMPLES:
            self.samples = self.samples[::2]  # a long run keeps every other sample, bounded
        wall, cpu0 = self.start
        self.samples.append(_Sample(now - wall, used - cpu0, merges_done, removed, count))
        self.target = merges_target

    def seconds_left(self) -> float | None:
        found = self.estimate()
        return None if found is None else found.seconds

    def estimate(self) -> Estimate | None:
        edges = self._fit_edges()
        if edges is None:
            return None
        shown, other = self._count_fit(edges), self._power_fit(edges)
        if shown is None or other is None:
            return None
        extra = max(self.TEARDOWN_CPU, self.TEARDOWN_SHARE * self.setup_cpu)
        fits = (shown + extra, other + extra)
        now, overall = self._pace(), self._pace_overall()
        seconds = fits[0] * now
        low = min(min(fits) * min(now, overall), seconds)
        high = max(max(fits) * max(now, overall), seconds)
        assert self.start is not None
        return Estimate(seconds, low, high, self.start[0] + self.samples[-1].wall)

    def _fit_edges(self) -> list[float] | None:
        """The fits' window edges once the run has shown enough to fit (None until then):
        MIN_SAMPLES reports, MIN_SECONDS of merging and MIN_FRACTION of the merges."""
        if len(self.samples) < self.MIN_SAMPLES or self.start is None:
            return None
        last = self.samples[-1]
        if last.wall < self.MIN_SECONDS or last.merges < self.MIN_FRACTION * self.target:
            return None
        return self._edges()

    def _edges(self) -> list[float] | None:
        """The fits' window edges, in merges: evenly spaced in log rank."""
        m = self.samples[-1].merges
        low = max(m * self.FIT_FROM, self.samples[0].merges)
        if m < 1.5 * low:
            return None
        return [low * (m / low) ** (i / self.WINDOWS) for i in range(self.WINDOWS + 1)]

    def _windows(self, edges: list[float]) -> list[tuple[float, float, float, float]]:
        """(CPU seconds, merges, tokens removed, mid rank) of each window that took time."""
        found = []
        for x0, x1 in zip(edges, edges[1:], strict=False):
            (t0, r0), (t1, r1) = self._at(x0), self._at(x1)
            if t1 > t0:
                found.append((t1 - t0, x1 - x0, r1 - r0, math.sqrt(x0 * x1)))
        return found

    def _at(self, merges: float) -> tuple[float, float]:
        """(CPU seconds, tokens removed) when `merges` merges were done, interpolated."""
        samples = self.samples
        i = bisect_left(samples, merges, key=lambda s: s.merges)
        i = min(max(i, 1), len(samples) - 1)
        a, b = samples[i - 1], samples[i]
        f = min(max((merges - a.merges) / (b.merges - a.merges), 0.0), 1.0)
        return a.cpu + f * (b.cpu - a.cpu), a.removed + f * (b.removed - a.removed)

    def _latest(self, windows: list[tuple[float, float, float, float]]) -> list:
        """The windows that set a fit's scale: the latest ANCHOR_SHARE of them."""
        return windows[-max(1, round(len(windows) * self.ANCHOR_SHARE)) :]

    def _count_fit(self, edges: list[float]) -> float | None:
        """CPU seconds left if a merge costs k * removed ** gamma, `removed` the tokens it takes
        out: gamma is the slope of log CPU per merge against log tokens removed per merge over
        the windows, k is set by the latest windows, and the counts still to come follow
        count(rank) = c * (rank / m) ** -alpha from the pace of removal over the latest merges.
        """
        windows = [w for w in self._windows(edges) if w[2] > 0]
        if len(windows) < 3:
            return None
        gamma = _slope(
            [math.log(dr / dm) for _, dm, dr, _ in windows],
            [math.log(t / dm) for t, dm, _, _ in windows],
        )
        gamma = min(max(1.0 if gamma is None else gamma, self.GAMMA[0]), self.GAMMA[1])
        latest = self._latest(windows)
        k = sum(t for t, _, _, _ in latest) / sum(
            dm * (dr / dm) ** gamma for _, dm, dr, _ in latest
        )
        last = self.samples[-1]
        m, n = last.merges, self.target
        if n <= m:
            return 0.0
        beta = self._count_exponent(last) * gamma
        count, rank = self._recent_count(last)
        return k * count**gamma * rank**beta * _integral(m, n, beta)

    def _power_fit(self, edges: list[float]) -> float | None:
        """CPU seconds left if the time per merge is k * rank ** -beta: beta fitted on log
        time per merge against log rank over the windows, k set by the latest windows."""
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
        latest = self._latest(windows)
        k = sum(t for t, _, _, _ in latest) / sum(dm * mid**-beta for _, dm, _, mid in latest)
        last = self.samples[-1]
        if self.target <= last.merges:
            return 0.0
        return k * _integral(last.merges, self.target, beta)

    def _pace(self) -> float:
        """Wall seconds per CPU second of the trainer now: over the latest PACE_SHARE of the
        ranks done or the latest PACE_SECONDS, whichever is longer (1 with no CPU times)."""
        samples = self.samples
        last = samples[-1]
        since = last.merges * (1 - self.PACE_SHARE)
        i = bisect_left(samples, since, key=lambda s: s.merges)
        j = bisect_left(samples, last.wall - self.PACE_SECONDS, key=lambda s: s.wall)
        return self._pace_from(samples[max(0, min(i, j, len(samples) - 3))])

    def _pace_overall(self) -> float:
        """Wall seconds per CPU second since merging began."""
        return self._pace_from(_Sample(0.0, 0.0, 0, 0, 0))

    def _pace_from(self, first: _Sample) -> float:
        last = self.samples[-1]
        cpu, wall = last.cpu - first.cpu, last.wall - first.wall
        if cpu <= 0 or wall <= 0:
            return 1.0
        return min(max(wall / cpu, 1.0), 50.0)

    def _count_exponent(self, last: _Sample) -> float:
        """alpha of count(rank) ~ rank ** -alpha, fitted on log count against log rank over the
        later ranks merged so far (the fall steepens as a run goes on)."""
        points = [
            (math.log(s.merges), math.log(s.count))
            for s in self.samples
            if s.merges >= last.merges * self.COUNTS_FROM and s.count > 0
        ]
        slope = None
        if len(points) >= 3:
            slope = _slope([x for x, _ in points], [y for _, y in points])
        return min(max(1.0 if slope is None else -slope, 0.2), 3.0)

    def _recent_count(self, last: _Sample) -> tuple[float, float]:
        """(tokens removed per merge, rank) over the latest tenth of the ranks: where the
        extrapolated counts start (steadier than one pair's count). A falling count averaged
        over ranks a..b is about its value at sqrt(a * b), so that is the rank given."""
        first = self.samples[bisect_left(self.samples, 0.9 * last.merges, key=lambda s: s.merges)]
        if last.merges > first.merges and last.removed > first.removed:
            rate = (last.removed - first.removed) / (last.merges - first.merges)
            return rate, math.sqrt(first.merges * last.merges)
        return float(max(last.count, 1)), float(last.merges)


def _slope(xs: list[float], ys: list[float]) -> float | None:
    """The least-squares slope of ys against xs (None if the xs do not vary)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def _integral(a: float, b: float, exponent: float) -> float:
    """The integral of rank ** -exponent from rank a to rank b."""
    if abs(1.0 - exponent) < 1e-6:
        return math.log(b / a)
    return (b ** (1 - exponent) - a ** (1 - exponent)) / (1 - exponent)
