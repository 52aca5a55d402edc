"""What "watch it learn" costs a training job (webapp/jobs/learning.py): a job's training
(`webapp.jobs.task.train_job`, as a runner calls it) on english_small (6.5 MB), with the
watcher and with a watcher that does nothing, runs interleaved; and, in the runs with it, the
time spent inside the watcher itself (building the sample, applying each merge to it, the
snapshots), measured directly.

The peer is the same job without the watcher, in the same run.

    .venv/bin/python benchmarks/learn_overhead.py [--corpus english_small] [--mode chunked]
        [--vocab 4000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT  # puts this checkout first on sys.path

import webapp.jobs.task
from webapp.jobs.learning import LearningWatch
from webapp.jobs.settings import JobSettings

CORPORA = Path(os.environ.get("BPE_CORPORA_DIR", ROOT / "corpora-data"))


class TimedWatch(LearningWatch):
    """The watcher, adding up the wall and the CPU time spent inside it."""

    spent = 0.0
    cpu = 0.0

    def __init__(self, *args, **kwargs) -> None:
        with inside():
            super().__init__(*args, **kwargs)

    def observe(self, *args, **kwargs) -> None:
        with inside():
            super().observe(*args, **kwargs)

    def snapshot(self) -> str:
        with inside():
            return super().snapshot()


@contextmanager
def inside() -> Iterator[None]:
    began, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        TimedWatch.spent += time.perf_counter() - began
        TimedWatch.cpu += time.thread_time() - cpu


class IdleWatch:
    """A watcher that watches nothing: the job as it was before."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def observe(self, *args, **kwargs) -> None:
        pass

    def snapshot(self) -> str:
        return ""


def job_seconds(settings: JobSettings, text: str, watch: type) -> tuple[float, float]:
    """(wall, CPU of this thread) seconds of the job's training."""
    webapp.jobs.task.LearningWatch = watch  # type: ignore[assignment,misc]
    began, cpu = time.perf_counter(), time.thread_time()
    webapp.jobs.task.train_job(settings, text, report=lambda update: None, should_stop=bool)
    return time.perf_counter() - began, time.thread_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="english_small")
    parser.add_argument("--mode", default="chunked")
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    text = (CORPORA / f"{args.corpus}.txt").read_text(encoding="utf-8")
    settings = JobSettings(mode=args.mode, vocab_size=args.vocab)
    print(f"{args.corpus}: {len(text.encode()):,} bytes, {args.mode}, vocab {args.vocab:,}")
    with_watch, without, shares = [], [], []
    for n in range(args.repeat):
        TimedWatch.spent = TimedWatch.cpu = 0.0
        (wall, cpu), (idle_wall, idle_cpu) = (
            job_seconds(settings, text, TimedWatch),
            job_seconds(settings, text, IdleWatch),
        )
        with_watch.append((wall, cpu))
        without.append((idle_wall, idle_cpu))
        shares.append((TimedWatch.spent / wall, TimedWatch.cpu / cpu))
        print(
            f"run {n + 1}: with the watcher {wall:.2f} s wall, {cpu:.2f} s CPU (inside it"
            f" {TimedWatch.spent:.3f} s wall, {TimedWatch.cpu:.3f} s CPU); without"
            f" {idle_wall:.2f} s wall, {idle_cpu:.2f} s CPU"
        )
    for i, what in enumerate(("wall", "CPU (the training thread's)")):
        a = statistics.median(run[i] for run in with_watch)
        b = statistics.median(run[i] for run in without)
        share = statistics.median(run[i] for run in shares)
        print(
            f"median {what}: with {a:.2f} s, without {b:.2f} s (ratio {a / b:.3f});"
            f" inside the watcher {100 * share:.2f}% of the job"
        )


if __name__ == "__main__":
    main()
