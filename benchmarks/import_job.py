"""Importing o200k_base as the web form now does (an import job), against tiktoken's own load of
the same file, side by side in one run.

    .venv/bin/python benchmarks/import_job.py [--refs reference-tokenizers] [--runs 3]

Each round, in turn:
1. ours, reading only: `bpe.importers.import_bytes` of the rank file and its sidecar (parse,
   check, derive the 199,742 merges): the job's "reading" phase;
2. ours, the whole job: queued into a fresh SQLite database and run by the import kind's task
   in this process (read, derive, store 200,000 vocabulary and 199,742 merge rows);
3. tiktoken: `tiktoken.load.load_tiktoken_bpe` of the same file and building its `Encoding`.

Wall-clock seconds, CPU seconds of this process beside them (the machine may be shared), the
load average before and after. Best and median of the rounds.

First, once: a rank file whose one long token (16 kB, then 32 kB of `a`, with `aa` ranked) is
imported; the time grew with the square of the token's length before derive_merges split long
tokens with the heap (tests/test_import_linear.py counts the work).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import time
from pathlib import Path

import tiktoken
from _common import ROOT, bench_app
from tiktoken.load import load_tiktoken_bpe

from bpe.importers import import_bytes


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=Path, default=ROOT / "reference-tokenizers")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--long-only", action="store_true", help="only the long-token files (runs on old code)"
    )
    args = parser.parse_args()
    path = args.refs / "o200k_base.tiktoken"
    raw = path.read_bytes()
    sidecar = (args.refs / "o200k_base.tiktoken.json").read_bytes()
    meta = json.loads(sidecar)
    print(f"load average at start: {load()}")
    for length in (16384, 32768):
        table = {bytes([b]): b for b in range(256)} | {b"aa": 256, b"a" * length: 257}
        lines = "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in table.items())
        _, wall, cpu = timed(
            lambda text=lines: import_bytes(text.encode(), filename="long.tiktoken", pattern="gpt2")
        )
        print(f"a rank file with one {length // 1024} kB token: {wall:.3f} s ({cpu:.3f} s CPU)")
    if args.long_only:
        return
    # Here, not at the top: --long-only also runs on checkouts from before import jobs.
    from webapp.jobs.imports import IMPORT
    from webapp.storage.models import ImportJob

    results: dict[str, list[tuple[float, float]]] = {"read": [], "job": [], "tiktoken": []}
    for k in range(args.runs):
        _, wall, cpu = timed(
            lambda: import_bytes(raw, filename="o200k_base.tiktoken", sidecar=sidecar)
        )
        results["read"].append((wall, cpu))

        app = bench_app(f"bench-import-{k}-")
        rows = IMPORT.make_rows(app.extensions["bpe_db"])
        job_id = rows.submit(raw, filename="o200k_base.tiktoken", sidecar=sidecar)
        assert rows.claim_next() == job_id
        status, wall, cpu = timed(lambda r=rows, j=job_id: IMPORT.run(r, j, interval=0.25))
        assert status is not None and status.value == "succeeded", status
        with app.extensions["bpe_db"].read_scope() as session:
            assert session.get_one(ImportJob, job_id).tokenizer_id is not None
        app.extensions["bpe_db"].dispose()
        results["job"].append((wall, cpu))

        def peer() -> tiktoken.Encoding:
            ranks = load_tiktoken_bpe(str(path))
            return tiktoken.Encoding(
                "o200k_base",
                pat_str=meta["pat_str"],
                mergeable_ranks=ranks,
                special_tokens=meta["special_tokens"],
            )

        _, wall, cpu = timed(peer)
        results["tiktoken"].append((wall, cpu))
        print(
            f"round {k + 1}: read {results['read'][-1][0]:.2f} s, job "
            f"{results['job'][-1][0]:.2f} s, tiktoken {wall:.2f} s (load {load()})"
        )
    peer_best = min(w for w, _ in results["tiktoken"])
    for name, label in (
        ("read", "ours, reading (parse + derive merges)"),
        ("job", "ours, the import job (read + store in SQLite)"),
        ("tiktoken", "tiktoken, load_tiktoken_bpe + Encoding"),
    ):
        walls = [w for w, _ in results[name]]
        cpus = [c for _, c in results[name]]
        print(
            f"{label}: best {min(walls):.2f} s wall ({min(cpus):.2f} s CPU), median "
            f"{statistics.median(walls):.2f} s; best / tiktoken's best "
            f"{min(walls) / peer_best:.1f}x"
        )
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
