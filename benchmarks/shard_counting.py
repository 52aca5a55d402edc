"""Sharded counting of the 57 MB corpus (corpora-data/english_large.txt): time and peak memory.

Each run is a fresh process (so no run inherits another's memory), reporting its counting time
and peak resident memory, and its pool workers' largest peak (RUSAGE_CHILDREN: the largest of
the children it waited for):
- `today`: the file read whole, `bpe.chunk_counts.count_chunks` on it (what training does
  today: the first half counted here, the second by its one helper process);
- `jobs=N`: `bpe.shards`, the file streamed in blocks, cut into shards, counted by N processes.
Every run must give the same counts (checked by a digest of the ordered items).

    python benchmarks/shard_counting.py                 # GPT-4 pattern, jobs 1 and 2
    python benchmarks/shard_counting.py --mode words --jobs 1,2,4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpora-data" / "english_large.txt"


def _child(run: str, mode: str, path: str) -> None:
    import resource

    sys.path.insert(0, str(ROOT))
    from bpe.chunk_counts import count_chunks
    from bpe.patterns import GPT4_PATTERN
    from bpe.shards import count_shards, rule_for, stream_shards

    rule = rule_for(mode, GPT4_PATTERN if mode == "chunked" else None)
    started = time.perf_counter()
    if run == "today":
        text = Path(path).read_text(encoding="utf-8-sig")
        if mode == "words":
            from bpe.training import word_sequences

            word_sequences(text)  # counts and ids: timed only, never compared
            digest = "-"
        else:
            counts = count_chunks(text, GPT4_PATTERN)
            counts.pop("", None)
            digest = _digest(counts)
    else:
        jobs = int(run.split("=")[1])
        counts = count_shards(stream_shards([path], rule), rule, jobs=jobs)
        digest = _digest(counts)
    seconds = time.perf_counter() - started
    me, them = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rss_mb": me.ru_maxrss / 1024,
                "child_rss_mb": them.ru_maxrss / 1024,
                # CPU seconds of every process: over the wall time, how many cores it was given
                "cpu": me.ru_utime + me.ru_stime + them.ru_utime + them.ru_stime,
                "d": digest,
            }
        )
    )


def _digest(counts: dict[str, int]) -> str:
    h = hashlib.sha256()
    for key, n in counts.items():
        h.update(f"{key}\0{n}\0".encode())
    return h.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("chunked", "words"), default="chunked")
    parser.add_argument("--jobs", default="1,2", help="comma-separated process counts")
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    runs = ["today"] + [f"jobs={n}" for n in args.jobs.split(",")]
    size = Path(args.corpus).stat().st_size
    print(f"{args.corpus}: {size / 1e6:.1f} MB, {args.mode} mode")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    results = {}
    for run in runs:
        out = subprocess.run(
            [sys.executable, __file__, "--child", run, args.mode, args.corpus],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        results[run] = json.loads(out)
        r = results[run]
        print(
            f"{run:8} {r['seconds']:6.2f} s  CPU {r['cpu']:6.2f} s ({r['cpu'] / r['seconds']:.2f}"
            f" cores)  peak RSS {r['rss_mb']:4.0f} MB (this process),"
            f" {r['child_rss_mb']:4.0f} MB (largest child)  counts {r['d']}"
        )
    one = results.get("jobs=1")
    for run, r in results.items():
        if one and run != "jobs=1":
            print(f"{run}: {one['seconds'] / r['seconds']:.2f}x faster than jobs=1")
    digests = {r["d"] for r in results.values() if r["d"] != "-"}
    print("counts equal in every run:", len(digests) == 1)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
