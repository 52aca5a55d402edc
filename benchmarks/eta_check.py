"""Is the job page's "time left" honest? Train naive and chunked on the 6.5 MB and the 57 MB
English corpora, feed every progress report to the estimator the jobs use
(webapp.jobs.progress.MergeEstimator, with the trainer thread's CPU time and a fresh estimate
every 0.25 s that runs down until the next, as webapp/jobs/task.py does), and compare what
the page would show with the time that was actually left (until the trainer returned).

The bar: from 20% of the merges on, every estimate shown within 1.5x of the truth either way
(when both are under a second the page says "less than a second left", which is then true,
and such reports are counted as agreeing). Also printed: the ratio at 20%, 30%, ... 90% of
the merges, and where the first estimate came.

Peers, from the same reports of the same run: the estimate the job page showed before this
one (benchmarks/_previous_eta.py, the geometric mean of a fixed-plus-per-token fit and a
power-of-the-rank fit of the CPU time, run down between estimates like the new one) and the
straight line (elapsed / merges done * merges left).

    .venv/bin/python benchmarks/eta_check.py [--corpora english_small english_large]
        [--modes naive chunked] [--naive-vocab 8000] [--chunked-vocab 16000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT  # puts this checkout first on sys.path
from _previous_eta import PreviousEstimator

import bpe
from webapp.jobs.progress import MergeEstimator
from webapp.jobs.task import ESTIMATE_EVERY

CORPORA = Path(os.environ.get("BPE_CORPORA_DIR", ROOT / "corpora-data"))
BAR = 1.5
FROM = 0.2
MARKS = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


class Shown:
    """What one estimator shows: a fresh estimate every ESTIMATE_EVERY seconds, as a job, and
    in between that estimate run down by the time since it was made (Estimate.aged, as
    webapp/jobs/task.py reports it)."""

    def __init__(self, estimate) -> None:
        self.estimate, self.at, self.value = estimate, float("-inf"), None

    def update(self, now: float) -> float | None:
        if now - self.at >= ESTIMATE_EVERY:
            self.at, self.value = now, self.estimate()
        return None if self.value is None else self.value.aged(now).seconds


def run(text: str, mode: str, vocab: int) -> dict:
    new, old = MergeEstimator(), PreviousEstimator()
    shown_new, shown_old = Shown(new.estimate), Shown(old.estimate)
    started = time.monotonic()
    merging_from: list[float] = []
    reports: list[tuple[float, int, int, float | None, float | None, float | None]] = []

    def progress(p: bpe.Progress) -> None:
        now = time.monotonic()
        cpu = time.thread_time()
        new.observe(now, p.merges_done, p.merges_target, p.count, p.total_tokens, cpu=cpu)
        old.observe(now, p.merges_done, p.merges_target, p.count, p.total_tokens, cpu=cpu)
        if not p.merges_done:
            merging_from[:] = [now]
            return
        straight = (now - merging_from[0]) / p.merges_done * (p.merges_target - p.merges_done)
        reports.append(
            (now, p.merges_done, p.merges_target, shown_new.update(now), shown_old.update(now),
             straight)
        )  # fmt: skip

    tok = bpe.train(text, vocab_size=vocab, mode=mode, progress=progress)
    ended = time.monotonic()
    target = reports[-1][2]
    out: dict = {"mode": mode, "merges": len(tok.merges), "seconds": ended - started}
    out["merging"] = ended - merging_from[0]
    worst = {"new": 1.0, "old": 1.0, "straight": 1.0}
    out["worst_at"] = None
    for now, done, _, *estimates in reports:
        if done < FROM * target or done >= target:
            continue
        actual = ended - now
        for name, value in zip(worst, estimates, strict=True):
            off = miss(value, actual)
            if off > worst[name]:
                worst[name] = off
                if name == "new":
                    out["worst_at"] = (done / target, actual)
    out["worst"] = worst
    for share in MARKS:
        now, done, _, *estimates = next(r for r in reports if r[1] >= share * target)
        out[share] = (done, ended - now, *estimates)
    first = next((r for r in reports if r[3] is not None), None)
    out["first"] = (first[0] - merging_from[0], first[1] / target) if first else None
    return out


def miss(estimate: float | None, actual: float) -> float:
    """How far off, as a factor (1 is exact); both under a second counts as exact."""
    if estimate is None or estimate <= 0:
        return math.inf
    if estimate < 1 and actual < 1:
        return 1.0
    return max(estimate / actual, actual / estimate)


def ratio(value: float | None, actual: float) -> str:
    return "   none" if value is None else f"{value / actual:6.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="+", default=["english_small", "english_large"])
    parser.add_argument("--modes", nargs="+", default=["naive", "chunked"])
    parser.add_argument("--naive-vocab", type=int, default=8000)
    parser.add_argument("--chunked-vocab", type=int, default=16000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    vocabs = {"naive": args.naive_vocab, "chunked": args.chunked_vocab}
    met = True
    for name in args.corpora:
        text = (CORPORA / f"{name}.txt").read_text(encoding="utf-8")
        print(f"\n{name}: {len(text.encode()):,} bytes; vocab sizes {vocabs}")
        for mode in args.modes:
            for n in range(args.repeat):
                result = run(text, mode, vocabs[mode])
                print(
                    f"{mode} run {n + 1}: {result['merges']:,} merges, training"
                    f" {result['seconds']:.1f} s, of which merging {result['merging']:.1f} s"
                )
                print("    at   done  actual left   shown  previous  straight line")
                for share in MARKS:
                    done, actual, shown, previous, straight = result[share]
                    print(
                        f"  {share:4.0%} {done:>6,} {actual:10.2f} s {ratio(shown, actual)}"
                        f"  {ratio(previous, actual)}  {ratio(straight, actual)}"
                    )
                worst = result["worst"]
                first = result["first"]
                at = result["worst_at"]
                where = f" (at {at[0]:.0%}, {at[1]:.1f} s left)" if at else ""
                print(
                    f"  worst from {FROM:.0%} on: shown {worst['new']:.2f}x{where}, previous"
                    f" {worst['old']:.2f}x, straight line {worst['straight']:.2f}x"
                )
                if first:
                    print(f"  first estimate {first[0]:.1f} s into merging, at {first[1]:.0%}")
                met = met and worst["new"] <= BAR
    print(f"\nbar (every estimate from {FROM:.0%} on within {BAR}x): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
