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
    """Seconds of training left: the two fits' geometric mean, and the two themselves."""

    seconds: float
    low: float
    high: float


class MergeEstimator:
    """Seconds of training left while merging, from the merges seen so far; None until that
    is honest (docs/training.md, "Time left").

    How a merge's cost evolves was measured on english_small and english_large, naive and
    chunked (the traces behind benchmarks/eta_check.py): the trainer's CPU time per merge
    falls steadily with the merge's rank (in naive mode about as count ** 0.75, the counts
    themselves falling as a power of the rank), while the wall time per merge jumps whenever
    the machine's load changes. So both fits are made on CPU time, over windows evenly spaced
    in log rank from a tenth of the merges done so far to the last (a wide range is what tells
    the shapes apart):
    - `_cost_fit`: a fixed part per merge plus a part per token it removes, the counts still
      to come extrapolated as a power law; it runs high (the fixed part falls too);
    - `_power_fit`: the CPU time per merge as a power of the rank; it runs low (the fall
      slows down late in a run).
    The estimate is their geometric mean and the range between them is shown with it. The CPU
    time left is turned into wall time at the pace of the latest fifth of the merges (how
    loaded the machine is now), and the trainer's tear-down is added (TEARDOWN_CPU).
    A fit on wall time alone was 2-8x off mid-job.
    """

    MIN_SECONDS = 0.3  # of merging observed before any estimate
    MIN_FRACTION = 0.05  # of the target merged before any estimate
    MIN_SAMPLES = 8
    FIT_FROM = 0.1  # the fits cover ranks from this share of the merges done to the last
    WINDOWS = 10
    PACE_SHARE = 0.2  # wall per CPU second over this latest share of the ranks merged
    # The trainer's tear-down after the last merge took 0.01-0.1 s of CPU on both corpora (and
    # its wall time the pace times that): at least TEARDOWN_CPU, more after a long set-up.
    TEARDOWN_CPU = 0.04
    TEARDOWN_SHARE = 0.02
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
        if len(self.samples) < self.MIN_SAMPLES:
            return None
        last = self.samples[-1]
        if last.wall < self.MIN_SECONDS or last.merges < self.MIN_FRACTION * self.target:
            return None
        edges = self._edges()
        if edges is None:
            return None
        high, low = self._cost_fit(edges), self._power_fit(edges)
        if high is None or low is None:
            return None
        extra = max(self.TEARDOWN_CPU, self.TEARDOWN_SHARE * self.setup_cpu)
        pace = self._pace()
        high, low = (high + extra) * pace, (low + extra) * pace
        high, low = max(high, low), min(high, low)
        return Estimate(math.sqrt(high * low), low, high)

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
        xs = [math.log(mid) for _, _, _, mid in windows]
        ys = [math.log(t / dm) for t, dm, _, _ in windows]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        if sxx <= 0:
            return None
        beta = -sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
        beta = min(max(beta, self.BETA[0]), self.BETA[1])

        def integral(a: float, b: float) -> float:  # of rank ** -beta from a to b
            if abs(1.0 - beta) < 1e-6:
                return math.log(b / a)
            return (b ** (1 - beta) - a ** (1 - beta)) / (1 - beta)

        last = self.samples[-1]
        half = math.sqrt(edges[0] * last.merges)
        spent = last.cpu - self._at(half)[0]
        if spent <= 0 or self.target <= last.merges:
            return 0.0
        return spent / integral(half, last.merges) * integral(last.merges, self.target)

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
