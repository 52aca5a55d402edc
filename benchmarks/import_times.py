"""Import time of every model file, against its own library's load, side by side in one run:
each tokenizer.json against HF `tokenizers` (`Tokenizer.from_file`, one thread), each tiktoken
rank file against tiktoken (`load_tiktoken_bpe` plus building its `Encoding`).

    TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 \\
    .venv/bin/python benchmarks/import_times.py [--rounds 3] [--models DIR] [--refs DIR]

Per file, best of the rounds: ours (`bpe.importers.import_path`: parse, check, derive or map
the merges) and the peer, wall-clock and CPU seconds of this process (the machine is shared:
read the CPU column). Then o200k_base's whole import job (read + store 200,000 vocabulary and
199,742 merge rows in a fresh SQLite database, as the web form's job does). Bars: gpt-oss
(27 MB) <= 5 s, o200k_base <= 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import tiktoken
import tokenizers
from _common import ROOT, bench_app
from tiktoken.load import load_tiktoken_bpe

from bpe.importers import import_path

BARS = {"gptoss": 5.0, "o200k_base": 3.0}


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def best(fn, rounds: int) -> tuple[float, float]:
    runs = [timed(fn) for _ in range(rounds)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def tiktoken_load(path: Path) -> tiktoken.Encoding:
    meta = json.loads(path.with_name(path.name + ".json").read_text())
    return tiktoken.Encoding(
        meta["name"],
        pat_str=meta["pat_str"],
        mergeable_ranks=load_tiktoken_bpe(str(path)),
        special_tokens=meta["special_tokens"],
    )


def import_job(path: Path) -> None:
    from webapp.jobs.imports import IMPORT

    app = bench_app("bench-import-times-")
    rows = IMPORT.make_rows(app.extensions["bpe_db"])
    sidecar = path.with_name(path.name + ".json").read_bytes()
    job_id = rows.submit(path.read_bytes(), filename=path.name, sidecar=sidecar)
    assert rows.claim_next() == job_id
    status = IMPORT.run(rows, job_id, interval=0.25)
    assert status is not None and status.value == "succeeded", status
    app.extensions["bpe_db"].dispose()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", type=Path, default=ROOT / "model-tokenizers")
    parser.add_argument("--refs", type=Path, default=ROOT / "reference-tokenizers")
    args = parser.parse_args()
    print(f"load average at start: {load()}")
    print(
        "| file | MB | ours wall s | ours CPU s | peer | peer wall s | peer CPU s"
        " | ours/peer (CPU) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    files = [(p.parent.name, p) for p in sorted(args.models.glob("*/tokenizer.json"))]
    files += [(p.name.removesuffix(".tiktoken"), p) for p in sorted(args.refs.glob("*.tiktoken"))]
    for name, path in files:
        wall, cpu = best(lambda p=path: import_path(p), args.rounds)
        if path.suffix == ".json":
            peer = "tokenizers"
            peer_wall, peer_cpu = best(
                lambda p=path: tokenizers.Tokenizer.from_file(str(p)), args.rounds
            )
        else:
            peer = "tiktoken"
            peer_wall, peer_cpu = best(lambda p=path: tiktoken_load(p), args.rounds)
        bar = BARS.get(name)
        verdict = "" if bar is None else f" (bar {bar:g} s: {'met' if wall <= bar else 'NOT met'})"
        print(
            f"| {name} | {path.stat().st_size / 1e6:.1f} | {wall:.2f}{verdict} | {cpu:.2f} | {peer}"
            f" | {peer_wall:.2f} | {peer_cpu:.2f} | {cpu / peer_cpu:.1f}x |",
            flush=True,
        )
    o200k = args.refs / "o200k_base.tiktoken"
    wall, cpu = best(lambda: import_job(o200k), args.rounds)
    verdict = "met" if wall <= BARS["o200k_base"] else "NOT met"
    print(
        f"\no200k_base, the whole import job (read + store in SQLite): best {wall:.2f} s wall,"
        f" {cpu:.2f} s CPU (bar {BARS['o200k_base']:g} s: {verdict} on wall time,"
        f" {'met' if cpu <= BARS['o200k_base'] else 'NOT met'} on CPU time)"
    )
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
