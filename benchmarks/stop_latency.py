"""How timely the efficient trainer's stop check and progress callback are (issue 3).

For each case (corpus, mode, vocab size) a fresh process trains with a should_stop that never
stops and a progress callback, both noting the time they are called; the gaps between calls
(from the start of `train()` to its end) give the worst and 99th-percentile latency. The same
training without callbacks gives the overhead: time with both / time without, best of
--repeat runs each, alternating.

    .venv/bin/python benchmarks/stop_latency.py
    .venv/bin/python benchmarks/stop_latency.py --cases chinese_modern:words:10000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "corpora-data"
DEFAULT_CASES = [
    f"{corpus}:{mode}:10000"
    for corpus in ("chinese_modern", "english_large")
    for mode in ("naive", "chunked", "words")
] + ["english_large:chunked:32000"]


def run_one(corpus: str, mode: str, vocab: int, callbacks: bool) -> dict:
    """Train once in this process; the call times of both callbacks, or none."""
    sys.path.insert(0, str(ROOT))
    import bpe

    text = (CORPORA / f"{corpus}.txt").read_text(encoding="utf-8")
    stops: list[float] = []
    reports: list[float] = []

    def should_stop() -> bool:
        stops.append(time.perf_counter())
        return False

    def progress(_state: object) -> None:
        reports.append(time.perf_counter())

    extra = {"should_stop": should_stop, "progress": progress} if callbacks else {}
    started = time.perf_counter()
    bpe.train(text, vocab_size=vocab, mode=mode, **extra)
    ended = time.perf_counter()
    return {
        "seconds": ended - started,
        "stops": [started, *stops, ended],
        "reports": [started, *reports, ended],
    }


def gaps_ms(times: list[float]) -> tuple[float, float, int]:
    """Worst and 99th-percentile gap in ms between consecutive times, and how many gaps."""
    gaps = sorted((b - a) * 1000 for a, b in pairwise(times))
    return gaps[-1], gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))], len(gaps)


def in_child(corpus: str, mode: str, vocab: int, callbacks: bool) -> dict:
    command = [sys.executable, __file__, "--child", f"{corpus}:{mode}:{vocab}"]
    if callbacks:
        command.append("--callbacks")
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
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--callbacks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        corpus, mode, vocab = args.child.split(":")
        print(json.dumps(run_one(corpus, mode, int(vocab), args.callbacks)))
        return

    print(
        f"{'case':30} {'stop worst':>10} {'p99':>6} {'checks':>7} "
        f"{'prog worst':>10} {'p99':>6} {'reports':>7} {'with s':>7} {'w/o s':>7} {'ratio':>6}"
    )
    for case in args.cases:
        corpus, mode, vocab = case.split(":")
        runs = {True: [], False: []}
        for _ in range(args.repeat):
            for callbacks in (True, False):
                runs[callbacks].append(in_child(corpus, mode, int(vocab), callbacks))
        # Latency: the worst over all runs with callbacks, not the best run's.
        stop_worst = max(gaps_ms(r["stops"])[0] for r in runs[True])
        prog_worst = max(gaps_ms(r["reports"])[0] for r in runs[True])
        best = min(runs[True], key=lambda r: r["seconds"])
        _, stop_p99, checks = gaps_ms(best["stops"])
        _, prog_p99, reports = gaps_ms(best["reports"])
        without = min(r["seconds"] for r in runs[False])
        print(
            f"{case:30} {stop_worst:8.0f}ms {stop_p99:4.0f}ms {checks:7d} "
            f"{prog_worst:8.0f}ms {prog_p99:4.0f}ms {reports:7d} "
            f"{best['seconds']:7.2f} {without:7.2f} {best['seconds'] / without:6.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
