"""How timely the efficient trainer's stop check and progress callback are (a cancel must be
honoured within 100 ms).

For each case (corpus, mode, vocab size) a fresh process trains with a should_stop that never
stops and a progress callback, both noting the time they are called; the gaps between calls
(from the start of `train()` to its end) give the worst and 99th-percentile latency. The same
training without callbacks gives the overhead: time with both / time without, best of
--repeat runs each, alternating (and the same ratio of the training thread's CPU time, which
a loaded machine disturbs less). A 2% bound is finer than the noise between two runs on a
shared machine, so the cost is also measured directly within each run with callbacks: the
training thread's CPU time from each should_stop's entry to the end of the progress report
that follows it (everything the trainer does only because callbacks were given: both calls
and building the Progress), as a share of the run's CPU time. Beside each wall-clock gap,
the CPU time this process's main thread spent in it: on a shared machine the wall time
stretches with the load, the CPU time far less (on an idle one the two agree, except while
waiting on the chunk counter).

    .venv/bin/python benchmarks/stop_latency.py
    .venv/bin/python benchmarks/stop_latency.py --cases chinese_modern:words:10000 --repeat 1
    .venv/bin/python benchmarks/stop_latency.py --cases english_large:naive:10000 --explain 100

--explain MS prints, for every gap longer than MS, where the two calls around it were made
(the library's frames of each call's stack), and every stretch of over MS in which the training
thread kept the interpreter to itself (one long C call: a sort, a join, freeing a big list),
with where that call returned: a watchdog thread asks for the interpreter every millisecond.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "corpora-data"
DEFAULT_CASES = [
    f"{corpus}:{mode}:10000"
    for corpus in ("chinese_modern", "english_large")
    for mode in ("naive", "chunked", "words")
] + ["english_large:chunked:32000"]


def where_called(frame=None) -> str:
    """The library's frames of a stack (the caller's by default), innermost first."""
    frames = (
        traceback.extract_stack(frame)[:-2] if frame is None else traceback.extract_stack(frame)
    )
    return " < ".join(
        f"{Path(f.filename).name}:{f.lineno} {f.name}"
        for f in reversed(frames)
        if "/bpe/" in f.filename
    )


class Watchdog(threading.Thread):
    """Notes each time the main thread held the interpreter for over `over` seconds of its
    own CPU time in one go: a long C call, which no stop check can split."""

    def __init__(self, over: float) -> None:
        super().__init__(daemon=True)
        self.over = over
        self.main = threading.main_thread().ident
        self.clock = time.pthread_getcpuclockid(self.main)
        self.held: list[tuple[float, float, float, str]] = []  # (at, wall, cpu, where)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            wall, cpu = time.perf_counter(), time.clock_gettime(self.clock)
            time.sleep(0.001)  # the interpreter comes back only when the main thread lets go
            wall_gap = time.perf_counter() - wall
            cpu_gap = time.clock_gettime(self.clock) - cpu
            if cpu_gap > self.over:
                where = where_called(sys._current_frames()[self.main])
                self.held.append((wall, wall_gap, cpu_gap, where))


def run_one(corpus: str, mode: str, vocab: int, callbacks: bool, explain: float = 0) -> dict:
    """Train once in this process; the call times of both callbacks, or none (and with
    explain, where each call was made)."""
    sys.path.insert(0, str(ROOT))
    import bpe

    text = (CORPORA / f"{corpus}.txt").read_text(encoding="utf-8")
    stops: list[float] = []
    reports: list[float] = []
    stop_cpu: list[float] = []  # this thread's CPU time at each call, as load cannot stretch it
    report_cpu: list[float] = []
    stop_sites: list[str] = []
    report_sites: list[str] = []

    in_callbacks = 0.0  # CPU seconds from each should_stop's entry to its report's end
    entered: float | None = None  # the last should_stop's entry, until a report follows it
    left = 0.0  # the last should_stop's exit

    def should_stop() -> bool:
        nonlocal entered, left, in_callbacks
        now = time.thread_time()
        if entered is not None:  # no report followed the last check: count the check alone
            in_callbacks += left - entered
        entered = now
        stops.append(time.perf_counter())
        stop_cpu.append(now)
        if explain:
            stop_sites.append(where_called())
        left = time.thread_time()
        return False

    def progress(_state: object) -> None:
        nonlocal entered, in_callbacks
        now = time.thread_time()
        reports.append(time.perf_counter())
        report_cpu.append(now)
        if explain:
            report_sites.append(where_called())
        in_callbacks += time.thread_time() - (now if entered is None else entered)
        entered = None

    extra = {"should_stop": should_stop, "progress": progress} if callbacks else {}
    watchdog = Watchdog(explain / 1000) if explain else None
    if watchdog:
        watchdog.start()
    started, started_cpu = time.perf_counter(), time.thread_time()
    bpe.train(text, vocab_size=vocab, mode=mode, **extra)
    ended, ended_cpu = time.perf_counter(), time.thread_time()
    if entered is not None:
        in_callbacks += left - entered
    if watchdog:
        watchdog.done.set()
        watchdog.join()
    return {
        "seconds": ended - started,
        "cpu_seconds": ended_cpu - started_cpu,
        "callbacks_cpu": in_callbacks,
        "stops": [started, *stops, ended],
        "reports": [started, *reports, ended],
        "stops_cpu": [started_cpu, *stop_cpu, ended_cpu],
        "reports_cpu": [started_cpu, *report_cpu, ended_cpu],
        "stop_sites": ["train() called", *stop_sites, "train() returned"],
        "report_sites": ["train() called", *report_sites, "train() returned"],
        "held": [(at - started, wall, cpu, where) for at, wall, cpu, where in watchdog.held]
        if watchdog
        else [],
    }


def print_slow_gaps(
    kind: str, times: list[float], cpu: list[float], sites: list[str], over_ms: float
) -> None:
    """Each gap whose wall or CPU time is over over_ms, with the two calls' call sites."""
    gaps = zip(pairwise(times), pairwise(cpu), pairwise(sites), strict=True)
    for (a, b), (cpu_a, cpu_b), (site_a, site_b) in gaps:
        if max(b - a, cpu_b - cpu_a) * 1000 > over_ms:
            print(
                f"  {kind} gap {(b - a) * 1000:.0f} ms ({(cpu_b - cpu_a) * 1000:.0f} ms CPU)"
                f" at {a - times[0]:.2f} s"
            )
            print(f"    from {site_a}")
            print(f"    to   {site_b}", flush=True)


def gaps_ms(times: list[float]) -> tuple[float, float, int]:
    """Worst and 99th-percentile gap in ms between consecutive times, and how many gaps."""
    gaps = sorted((b - a) * 1000 for a, b in pairwise(times))
    return gaps[-1], gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))], len(gaps)


def in_child(corpus: str, mode: str, vocab: int, callbacks: bool, explain: float = 0) -> dict:
    command = [sys.executable, __file__, "--child", f"{corpus}:{mode}:{vocab}"]
    if callbacks:
        command.append("--callbacks")
    if explain:
        command += ["--explain-child", str(explain)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        nargs="+",
        default=DEFAULT_CASES,
        help="corpus:mode:vocab, corpus a file stem in corpora-data",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs with and without callbacks each; fastest kept"
    )
    parser.add_argument(
        "--explain",
        type=float,
        metavar="MS",
        help="only train with callbacks, once per case, and show where each gap over MS lies",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--callbacks", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--explain-child", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        corpus, mode, vocab = args.child.split(":")
        print(json.dumps(run_one(corpus, mode, int(vocab), args.callbacks, args.explain_child)))
        return
    if args.explain is not None:
        for case in args.cases:
            corpus, mode, vocab = case.split(":")
            run = in_child(corpus, mode, int(vocab), callbacks=True, explain=args.explain)
            print(f"{case}: {run['seconds']:.2f} s", flush=True)
            print_slow_gaps("stop", run["stops"], run["stops_cpu"], run["stop_sites"], args.explain)
            print_slow_gaps(
                "progress", run["reports"], run["reports_cpu"], run["report_sites"], args.explain
            )
            for at, wall, cpu, where in run["held"]:
                print(f"  held {wall * 1000:.0f} ms ({cpu * 1000:.0f} ms CPU) at {at:.2f} s")
                print(f"    returned to {where}", flush=True)
        return

    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores shared: see the CPU columns)")
    print(
        f"{'case':30} {'stop worst':>10} {'cpu':>6} {'p99':>6} {'checks':>7} "
        f"{'prog worst':>10} {'cpu':>6} {'p99':>6} {'reports':>7} "
        f"{'with s':>7} {'w/o s':>7} {'ratio':>6} {'cpu ratio':>9} {'in cb':>6}"
    )
    for case in args.cases:
        corpus, mode, vocab = case.split(":")
        runs = {True: [], False: []}
        for _ in range(args.repeat):
            for callbacks in (True, False):
                runs[callbacks].append(in_child(corpus, mode, int(vocab), callbacks))
        # Latency: the worst over all runs with callbacks, not the best run's.
        worst = {
            key: max(gaps_ms(r[key])[0] for r in runs[True])
            for key in ("stops", "stops_cpu", "reports", "reports_cpu")
        }
        best = min(runs[True], key=lambda r: r["seconds"])
        _, stop_p99, checks = gaps_ms(best["stops"])
        _, prog_p99, reports = gaps_ms(best["reports"])
        without = min(r["seconds"] for r in runs[False])
        cpu_with = min(r["cpu_seconds"] for r in runs[True])
        cpu_without = min(r["cpu_seconds"] for r in runs[False])
        # The direct measure: the largest share of any run's CPU time spent on the callbacks.
        in_callbacks = max(r["callbacks_cpu"] / r["cpu_seconds"] for r in runs[True])
        print(
            f"{case:30} {worst['stops']:8.0f}ms {worst['stops_cpu']:4.0f}ms {stop_p99:4.0f}ms"
            f" {checks:7d} {worst['reports']:8.0f}ms {worst['reports_cpu']:4.0f}ms"
            f" {prog_p99:4.0f}ms {reports:7d}"
            f" {best['seconds']:7.2f} {without:7.2f} {best['seconds'] / without:6.3f}"
            f" {cpu_with / cpu_without:9.3f} {in_callbacks:6.3%}"
            f"  (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
