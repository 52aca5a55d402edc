"""Sharded counting and whole sharded jobs in 1, 2 and 4 processes, against HF `tokenizers` and
rustbpe on the same file: time, the cores each run was given, and every process's peak memory.

Every run is a fresh process started by this script, which takes its wall time and its CPU time
(user + system, its own and that of every child it waited for) from `os.wait4`; CPU / wall is
how many cores the run was actually given. Each run reports, at its end, its own peak resident
memory (RUSAGE_SELF, "main") and the largest of its children's (RUSAGE_CHILDREN: the pool's
workers, waited for by the pool). The runs, per corpus:
- `count N`: `bpe.shards` alone: the file streamed in 1 MB blocks, cut into 4 MB shards,
  counted by N processes and added up in shard order. Timed from the first read to the sum,
  with the CPU of that span only (the interpreter's start and imports left out), and apart
  the CPU of the main process, which reads, cuts, sends and adds up in order (the serial
  part). Every count run must give the same counts (a digest of the ordered items).
- `job N`: the whole job as one types it, `bpe train FILE --mode chunked --jobs N
  --vocab-size V -o out.json`: read, count, merge, save, start to exit (`--jobs 1` reads the
  file whole, as the command line does, docs/library.md; 2 and 4 stream it). It runs `bpe.cli`'s
  `main` as `.venv/bin/bpe` does, in a process that reports its memory at the end. Every job
  must give the same merges.
- `hf`: HF `tokenizers`' BpeTrainer, the GPT-4 split then ByteLevel (as
  benchmarks/train_vs_peers.py builds it), with all its threads; `rustbpe` with the GPT-4
  pattern and all its threads. Both train the same vocab size on the same file, fed from an
  iterator of 64 kB pieces cut where the GPT-4 pattern allows (`bpe.shards.stream_shards`),
  so they see exactly our chunks and hold no more of the text than they buffer.
  Printed: our jobs' time and largest peak over each peer's.
- `today` (only if asked): the file read whole and counted by `count_chunks`, as `train` does
  without jobs (in words mode `word_sequences`, which also builds the sequences).

The 1 GB corpus is the corpora of corpora-data/ (MANIFEST.tsv's four files in its order:
english_small, english_large, chinese_modern, code) written one after another, 9 times over:
1,072,467,450 bytes for the corpora its SHA256SUMS names. `--make-corpus PATH` writes it (put it
under /tmp, never in the repository) and prints its SHA-256:

    python benchmarks/shard_counting.py --make-corpus /tmp/corpora-1g.txt
    python benchmarks/shard_counting.py --corpus corpora-data/english_large.txt \\
        --corpus /tmp/corpora-1g.txt --jobs 1,2,4 --vocab-size 10000
    python benchmarks/shard_counting.py --mode words --runs count,today     # the counting alone
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "corpora-data"
CORPUS = CORPORA / "english_large.txt"
COPIES = 9  # of the four corpora (119,163,050 bytes): 1.07 GB
RUNS = ("count", "job", "hf", "rustbpe", "today")
PEER_PIECE_CHARS = 1 << 16  # what the peers' iterator yields at a time
PEER_BUFFER = 256  # items the peers buffer before counting (HF's own buffer is 256 items)
GB = 10**9  # the memory bar's gigabyte, in bytes: 953.7 MiB


# ----- the runs: each in its own process, printing one JSON line last ---------------------------
def _rusage() -> dict[str, float]:
    import resource

    me, them = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return {
        "main_mib": me.ru_maxrss / 1024,
        "child_mib": them.ru_maxrss / 1024,
        "cpu": me.ru_utime + me.ru_stime + them.ru_utime + them.ru_stime,
        "main_cpu": me.ru_utime + me.ru_stime,
    }


def run_count(jobs: str, mode: str, path: str) -> dict:
    from bpe.patterns import GPT4_PATTERN
    from bpe.shards import count_shards, rule_for, stream_shards

    rule = rule_for(mode, GPT4_PATTERN if mode == "chunked" else None)
    before, started = _rusage(), time.perf_counter()
    counts = count_shards(stream_shards([path], rule), rule, jobs=int(jobs))
    seconds = time.perf_counter() - started
    usage = _rusage()
    usage["phase_cpu"] = usage["cpu"] - before["cpu"]
    # The process that reads, cuts, sends and adds up in order: the serial part.
    usage["phase_main_cpu"] = usage["main_cpu"] - before["main_cpu"]
    return {"phase": seconds, "distinct": len(counts), "check": _digest(counts), **usage}


def run_today(mode: str, path: str) -> dict:
    from bpe.chunk_counts import count_chunks
    from bpe.patterns import GPT4_PATTERN
    from bpe.training import word_sequences

    cpu, started = _rusage()["cpu"], time.perf_counter()
    text = Path(path).read_text(encoding="utf-8-sig")
    if mode == "words":
        word_sequences(text)  # counts and ids: timed only, never compared
        check = "-"
    else:
        counts = count_chunks(text, GPT4_PATTERN)
        counts.pop("", None)
        check = _digest(counts)
    seconds = time.perf_counter() - started
    usage = _rusage()
    usage["phase_cpu"] = usage["cpu"] - cpu
    return {"phase": seconds, "check": check, **usage}


def run_cli(*argv: str) -> dict:
    from bpe.cli import main

    code = main(list(argv))
    if code:
        raise SystemExit(code)
    saved = json.loads(Path(argv[argv.index("-o") + 1]).read_text())
    merges = json.dumps(saved["merges"]).encode()
    return {"check": hashlib.sha256(merges).hexdigest()[:16], "merges": len(saved["merges"])}


def peer_pieces(path: str):
    """The file as 64 kB pieces cut where the GPT-4 pattern may be cut: the peers see our chunks."""
    from bpe.patterns import GPT4_PATTERN
    from bpe.shards import rule_for, stream_shards

    rule = rule_for("chunked", GPT4_PATTERN)
    return stream_shards([path], rule, shard_chars=PEER_PIECE_CHARS, read_bytes=PEER_PIECE_CHARS)


def run_hf(path: str, vocab_size: str, out: str) -> dict:
    from tokenizers import pre_tokenizers, trainers
    from train_vs_peers import Case, hf_tokenizer

    tok = hf_tokenizer(Case("shards", path, None, "chunked", int(vocab_size)))
    trainer = trainers.BpeTrainer(
        vocab_size=int(vocab_size),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(peer_pieces(path), trainer=trainer)
    tok.save(out)
    return {"merges": tok.get_vocab_size() - 256}


def run_rustbpe(path: str, vocab_size: str, out: str) -> dict:
    import rustbpe

    from bpe.patterns import GPT4_PATTERN

    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(
        peer_pieces(path), int(vocab_size), buffer_size=PEER_BUFFER, pattern=GPT4_PATTERN
    )
    ranks = tok.get_mergeable_ranks()
    Path(out).write_text(json.dumps({bytes(t).hex(): r for t, r in ranks}))
    return {"merges": len(ranks) - 256}


def child_main(role: str, *args: str) -> None:
    sys.path.insert(0, str(ROOT))
    run = {"count": run_count, "today": run_today, "cli": run_cli}
    run |= {"hf": run_hf, "rustbpe": run_rustbpe}
    result = run[role](*args)
    result.update({k: v for k, v in _rusage().items() if k not in result})
    print(json.dumps(result), flush=True)


def _digest(counts: dict[str, int]) -> str:
    h = hashlib.sha256()
    for key, n in counts.items():
        h.update(f"{key}\0{n}\0".encode())
    return h.hexdigest()[:16]


# ----- the parent: starts and measures each run -------------------------------------------------
def measure(args: list[str]) -> dict:
    """One run in a fresh process: its report, with wall and CPU time from os.wait4."""
    env = dict(os.environ)
    env.pop("RAYON_NUM_THREADS", None)  # the peers use every core
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    load = os.getloadavg()[0]
    cmd = [sys.executable, __file__, "--child", *args]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""  # the run writes only its report here
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}", "load": load}
    result = json.loads(out.strip().splitlines()[-1])
    cpu = usage.ru_utime + usage.ru_stime
    result.update(wall=wall, wall_cpu=cpu, load=load, peak_mib=usage.ru_maxrss / 1024)
    return result


def plan(runs: list[str], jobs: list[int], mode: str) -> list[tuple[str, str]]:
    """(name, kind) of every run, in the order they go."""
    order: list[tuple[str, str]] = []
    if "today" in runs:
        order.append(("today (whole text)", "today"))
    for kind in ("count", "job"):
        if kind in runs:
            order += [(f"{kind} jobs={n}", kind) for n in jobs]
    if mode == "chunked":
        order += [(peer, peer) for peer in ("hf", "rustbpe") if peer in runs]
    return order


def run_corpus(path: str, runs: list[str], jobs: list[int], mode: str, vocab: int) -> dict:
    size = Path(path).stat().st_size
    print(f"\n{path}: {size:,} bytes, {mode} mode, vocab {vocab:,}", flush=True)
    print(_uptime(), flush=True)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="shard-bench-") as tmp:
        for name, kind in plan(runs, jobs, mode):
            n = name.split("=")[-1]
            out = str(Path(tmp) / f"{kind}-{n}.json")
            if kind == "count":
                args = ["count", n, mode, path]
            elif kind == "today":
                args = ["today", mode, path]
            elif kind == "job":
                args = ["cli", "train", path, "--mode", mode, "--jobs", n]
                args += ["--vocab-size", str(vocab), "-q", "-o", out]
            else:
                args = [kind, path, str(vocab), out]
            results[name] = measure(args)
            print(f"  {name:18} {describe(results[name])}", flush=True)
    print(_uptime(), flush=True)
    return results


def describe(r: dict) -> str:
    if "error" in r:
        return r["error"]
    seconds, cpu = r.get("phase", r["wall"]), r.get("phase_cpu", r["wall_cpu"])
    return (
        f"{seconds:7.2f} s  CPU {cpu:7.2f} s ({cpu / seconds:.2f} cores, load {r['load']:.2f})"
        f"  peak {r['main_mib']:5.0f} MiB main, {r['child_mib']:5.0f} MiB largest child"
        f"  {r.get('check', '')}"
    )


def table(results: dict[str, dict]) -> str:
    """Markdown: one row a run, with its speed against the same kind's jobs=1."""
    lines = [
        "| run | time (s) | CPU (s) | main's CPU (s) | cores given | load | x jobs=1"
        " | peak RSS main (MiB) | largest child (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | {r['error']} | | | | | | | |")
            continue
        seconds, cpu = r.get("phase", r["wall"]), r.get("phase_cpu", r["wall_cpu"])
        main_cpu = f"{r['phase_main_cpu']:.2f}" if "phase_main_cpu" in r else "-"
        base = results.get(name.split("=")[0] + "=1", {})
        base_s = base.get("phase", base.get("wall"))
        speed = f"{base_s / seconds:.2f}x" if base_s else "-"
        child = f"{r['child_mib']:,.0f}" if r["child_mib"] > 0 else "-"
        lines.append(
            f"| {name} | {seconds:.2f} | {cpu:.2f} | {main_cpu} | {cpu / seconds:.2f}"
            f" | {r['load']:.2f} | {speed} | {r['main_mib']:,.0f} | {child} |"
        )
    return "\n".join(lines)


def verdicts(path: str, results: dict[str, dict]) -> list[str]:
    lines = []
    checks = {
        kind: {r["check"] for n, r in results.items() if n.startswith(kind) and "check" in r}
        for kind in ("count", "job")
    }
    for kind, found in checks.items():
        if found:
            what = "counts" if kind == "count" else "merges"
            lines.append(f"{what} equal in every {kind} run: {len(found) == 1}")
    one, two = results.get("count jobs=1", {}), results.get("count jobs=2", {})
    if "phase" in one and "phase" in two:
        speedup = one["phase"] / two["phase"]
        cores = two["phase_cpu"] / two["phase"]
        verdict = "met" if speedup >= 1.7 else "not met"
        if speedup < 1.7 and cores < 1.8:
            verdict = f"not measurable (given {cores:.2f} cores, not 2)"
        lines.append(f"counting, 2 processes: {speedup:.2f}x jobs=1, {cores:.2f} cores: {verdict}")
    for name, r in results.items():
        if name.startswith("job jobs=") and name != "job jobs=1" and "main_mib" in r:
            peak = max(r["main_mib"], r["child_mib"]) * 1024 * 1024
            ok = "under" if peak < GB else "NOT under"
            lines.append(f"{name}: largest peak {peak / 1e6:,.0f} MB, {ok} 1 GB")
    for peer in ("hf", "rustbpe"):
        theirs = results.get(peer, {})
        for name, r in results.items():
            if name.startswith("job jobs=") and "wall" in r and "wall" in theirs:
                ours_mib = max(r["main_mib"], r["child_mib"])
                lines.append(
                    f"{name} / {peer}: time {r['wall'] / theirs['wall']:.2f}x,"
                    f" largest peak RSS {ours_mib / theirs['main_mib']:.2f}x"
                )
    return [f"{Path(path).name}: {line}" for line in lines]


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def make_corpus(path: Path, copies: int) -> None:
    """The corpora of corpora-data/, in MANIFEST.tsv's order, written `copies` times over."""
    names: list[str] = []
    for line in (CORPORA / "MANIFEST.tsv").read_text().splitlines()[1:]:
        name = line.split("\t")[0]
        if name not in names:
            names.append(name)
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for _ in range(copies):
            for name in names:
                data = (CORPORA / name).read_bytes()
                out.write(data)
                digest.update(data)
    print(f"{path}: {copies} x {' + '.join(names)} = {path.stat().st_size:,} bytes,")
    print(f"sha256 {digest.hexdigest()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", help="a file (repeat for more)")
    parser.add_argument("--mode", choices=("chunked", "words"), default="chunked")
    parser.add_argument("--jobs", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--runs", default="count,job,hf,rustbpe", help=",".join(RUNS))
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--make-corpus", type=Path, metavar="PATH", help="write the 1 GB corpus")
    parser.add_argument("--copies", type=int, default=COPIES, help="with --make-corpus")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(*args.child)
        return
    if args.make_corpus:
        make_corpus(args.make_corpus, args.copies)
        return
    runs = [r for r in args.runs.split(",") if r]
    if unknown := set(runs) - set(RUNS):
        parser.error(f"unknown runs {', '.join(sorted(unknown))}; choose from {', '.join(RUNS)}")
    jobs = [int(n) for n in args.jobs.split(",")]
    print(f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    summary, tables = [], []
    for path in args.corpus or [str(CORPUS)]:
        results = run_corpus(path, runs, jobs, args.mode, args.vocab_size)
        tables.append(f"{Path(path).name}, {args.mode}:\n\n{table(results)}")
        summary += verdicts(path, results)
    print("\n" + "\n\n".join(tables) + "\n\n" + "\n".join(summary))
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))


if __name__ == "__main__":
    main()
