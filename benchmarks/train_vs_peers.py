"""Training speed and memory: our efficient trainer against HuggingFace `tokenizers` and others.

Every trainer runs in its own fresh process (whole process against whole process: interpreter
start, imports, reading the corpus, training, saving the result). The parent takes each child's
wall time and its peak resident memory from `os.wait4`. Token counts are taken afterwards, in
another process, so encoding never inflates the training figures.

Peers: `hf1` is HuggingFace's BpeTrainer with RAYON_NUM_THREADS=1, `hf` the same with its
default threads, `rustbpe` (RAYON_NUM_THREADS=1) and `sentencepiece` (BPE) where they are
installed. Ratios are ours over `hf1` and over `rustbpe`, in the summary and the closing table.

The machine's cores, side by side: `ours-mt` is `bpe.train(..., jobs=N)` (chunked mode counts
its chunks in shards by N processes, docs/algorithms.md "Sharded counting"; naive mode is one
sequence and ignores it) and `rustbpe-mt` is rustbpe with RAYON_NUM_THREADS=N (it splits and
counts the chunks, and counts the first pairs, on N threads; its merge loop is one thread).
N is `--jobs`, every core by default. Their ratio is its own column.

    python benchmarks/train_vs_peers.py                       # every case
    python benchmarks/train_vs_peers.py --cases chunked-en --peers ours,hf1   # a quick run
    python benchmarks/train_vs_peers.py --peers ours,rustbpe,ours-mt,rustbpe-mt --repeat 2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA_DIR = Path(os.environ.get("BPE_CORPORA_DIR", REPO / "corpora-data"))
MB = 1_000_000
LINES_PATTERN = r"[^\n]*\n|[^\n]+"  # rustbpe needs a pattern; this one only cuts lines


@dataclass(frozen=True)
class Case:
    name: str
    corpus: str
    limit: int | None  # bytes from the start of the corpus, cut at a character boundary
    mode: str  # "chunked" (GPT-4 pattern) or "naive"
    vocab_size: int


CASES = {
    c.name: c
    for c in [
        Case("chunked-en", "english_small.txt", None, "chunked", 10_000),
        Case("chunked-zh", "chinese_modern.txt", 4 * MB, "chunked", 10_000),
        Case("naive-en", "english_small.txt", None, "naive", 10_000),
        Case("naive-zh", "chinese_modern.txt", 4 * MB, "naive", 10_000),
        Case("scale-en", "english_large.txt", None, "chunked", 32_000),
    ]
}
PEERS = ["ours", "hf1", "hf", "rustbpe", "spm"]  # the default run
ALL_PEERS = [*PEERS, "ours-mt", "rustbpe-mt"]
JOBS_ENV = "TRAIN_VS_PEERS_JOBS"  # how the parent tells an -mt worker its N
# The GPT-4 pattern, from the parent: a peer's process imports its own library, not ours
# (`import bpe` took 0.1-0.3 s, which was charged to rustbpe and hf before).
PATTERN_ENV = "TRAIN_VS_PEERS_PATTERN"


# ----- the workers: each runs in its own process --------------------------------------------------
def read_corpus(case: Case) -> str:
    data = (CORPORA_DIR / case.corpus).read_bytes()
    if case.limit is not None and case.limit < len(data):
        end = case.limit
        while end > 0 and data[end] & 0xC0 == 0x80:  # back off to a character boundary
            end -= 1
        data = data[:end]
    return data.decode("utf-8")


def line_blocks(text: str, size: int = 1 << 16) -> list[str]:
    """The text in blocks of whole lines, so peers that take an iterator get few large items."""
    blocks, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        blocks.append(text[start:end])
        start = end
    return blocks


def work_ours(case: Case, out: Path) -> dict:
    """`ours`, and `ours-mt` with the parent's N processes (JOBS_ENV, set for -mt peers only)."""
    import bpe

    jobs = {"jobs": int(os.environ[JOBS_ENV])} if JOBS_ENV in os.environ else {}
    tok = bpe.train(read_corpus(case), vocab_size=case.vocab_size, mode=case.mode, **jobs)
    return {"tokens": tok.training.tokens_after[-1], "merges": len(tok.merges)}


def hf_tokenizer(case: Case):
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if case.mode == "chunked":
        split = pre_tokenizers.Split(Regex(os.environ[PATTERN_ENV]), behavior="isolated")
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    else:
        tok.pre_tokenizer = byte_level
    return tok


def hf_inputs(case: Case, text: str) -> list[str]:
    # naive: every line is one "word" (HF has no whole-text mode); chunked: blocks of lines.
    return text.splitlines(keepends=True) if case.mode == "naive" else line_blocks(text)


def work_hf(case: Case, out: Path) -> dict:
    from tokenizers import pre_tokenizers, trainers

    tok = hf_tokenizer(case)
    trainer = trainers.BpeTrainer(
        vocab_size=case.vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(hf_inputs(case, read_corpus(case)), trainer=trainer)
    tok.save(str(out))
    return {"merges": tok.get_vocab_size() - 256}


def count_hf(case: Case, out: Path) -> int:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out))
    encodings = tok.encode_batch(hf_inputs(case, read_corpus(case)))
    return sum(len(e.ids) for e in encodings)


def work_rustbpe(case: Case, out: Path) -> dict:
    import rustbpe

    text = read_corpus(case)
    pattern = os.environ[PATTERN_ENV] if case.mode == "chunked" else LINES_PATTERN
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(line_blocks(text)), case.vocab_size, pattern=pattern)
    ranks = {token.hex(): rank for token, rank in tok.get_mergeable_ranks()}
    out.write_text(json.dumps({"pattern": tok.get_pattern(), "ranks": ranks}))
    return {"merges": len(ranks) - 256}


def count_rustbpe(case: Case, out: Path) -> int:
    import tiktoken

    saved = json.loads(out.read_text())
    ranks = {bytes.fromhex(token): rank for token, rank in saved["ranks"].items()}
    enc = tiktoken.Encoding(
        "bench", pat_str=saved["pattern"], mergeable_ranks=ranks, special_tokens={}
    )
    return sum(len(ids) for ids in enc.encode_ordinary_batch(line_blocks(read_corpus(case))))


def work_spm(case: Case, out: Path) -> dict:
    import sentencepiece as spm

    corpus = out.with_suffix(".txt")
    corpus.write_text(read_corpus(case), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(out),
        model_type="bpe",
        vocab_size=case.vocab_size,
        byte_fallback=True,
        character_coverage=0.9995,
        normalization_rule_name="identity",
        max_sentence_length=1 << 20,
        num_threads=1,
        minloglevel=2,
    )
    return {}


def count_spm(case: Case, out: Path) -> int:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(out) + ".model")
    return sum(len(ids) for ids in sp.encode(read_corpus(case).splitlines()))


PEER_MODULES = {
    "hf1": "tokenizers",
    "hf": "tokenizers",
    "rustbpe": "rustbpe",
    "rustbpe-mt": "rustbpe",
    "spm": "sentencepiece",
}
WORKERS = {
    "ours": work_ours,
    "ours-mt": work_ours,
    "hf1": work_hf,
    "hf": work_hf,
    "rustbpe": work_rustbpe,
    "rustbpe-mt": work_rustbpe,
    "spm": work_spm,
}
COUNTERS = {
    "hf1": count_hf,
    "hf": count_hf,
    "rustbpe": count_rustbpe,
    "rustbpe-mt": count_rustbpe,
    "spm": count_spm,
}


def worker_main(role: str, peer: str, case_name: str, out: str) -> None:
    sys.path.insert(0, str(REPO))
    case, path = CASES[case_name], Path(out)
    if role == "train":
        result = WORKERS[peer](case, path)
    else:
        result = {"tokens": COUNTERS[peer](case, path)}
    print(json.dumps(result))


# ----- the parent: runs and measures each worker --------------------------------------------------
def run_child(role: str, peer: str, case: Case, out: Path, timeout: float, jobs: int = 1) -> dict:
    sys.path.insert(0, str(REPO))
    from bpe.patterns import GPT4_PATTERN

    env = dict(os.environ, **{PATTERN_ENV: GPT4_PATTERN})
    env.pop("RAYON_NUM_THREADS", None)
    env.pop(JOBS_ENV, None)
    if peer in ("hf1", "rustbpe"):
        env["RAYON_NUM_THREADS"] = "1"
    if peer.endswith("-mt"):
        env["RAYON_NUM_THREADS"] = env[JOBS_ENV] = str(jobs)
    cmd = [sys.executable, __file__, "--worker", role, peer, case.name, str(out)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    deadline = started + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            return {"error": f"timed out after {timeout:.0f} s"}
        time.sleep(0.005)
    wall = time.perf_counter() - started
    output = proc.stdout.read() if proc.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        return {"error": f"exit {os.waitstatus_to_exitcode(status)}"}
    result = json.loads(output.strip().splitlines()[-1])
    result.update(seconds=wall, peak_mb=usage.ru_maxrss / 1024)
    return result


def run_case(
    case: Case, peers: list[str], timeout: float, repeat: int, jobs: int = 1
) -> dict[str, dict]:
    """Each peer `repeat` times, keeping its fastest run (the one least disturbed by other
    work on the machine; every run's time is kept too, in "runs"); peers alternate so they
    share the same conditions."""
    results: dict[str, dict] = {}
    runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if case.mode == "naive" and "spm" in peers:
            peers = [p for p in peers if p != "spm"]
            print("  spm      skipped: sentencepiece has no byte-level whole-text (naive) mode")
        for _ in range(repeat):
            for peer in peers:
                out = Path(tmp) / f"{peer}-{case.name}.model"
                result = run_child("train", peer, case, out, timeout, jobs)
                runs.setdefault(peer, []).append(result.get("seconds", float("nan")))
                best = results.get(peer)
                if best is None or result.get("seconds", 1e9) < best.get("seconds", 1e9):
                    results[peer] = result
        for peer in peers:
            result, out = (
                results[peer] | {"runs": runs[peer]},
                Path(tmp) / f"{peer}-{case.name}.model",
            )
            if "error" not in result and peer in COUNTERS:
                result["tokens"] = run_child("count", peer, case, out, timeout).get("tokens")
            results[peer] = result
            print(f"  {peer:10} {describe(result)}", flush=True)
    return results


def describe(result: dict) -> str:
    if "error" in result:
        return result["error"]
    tokens = result.get("tokens")
    every = result.get("runs", [])
    return (
        f"{result['seconds']:7.2f} s  {result['peak_mb']:7.0f} MB peak  "
        f"{tokens if tokens is not None else '?':>10} tokens"
        + (f"  (runs: {', '.join(f'{s:.2f}' for s in every)} s)" if len(every) > 1 else "")
    )


def ratio_line(case: Case, results: dict[str, dict]) -> str:
    if not any("seconds" in results.get(mine, {}) for mine in ("ours", "ours-mt")):
        return f"{case.name}: no ratio (ours missing)"
    parts = []
    pairs = [("ours", "hf1", "0.8"), ("ours", "rustbpe", "1.3"), ("ours-mt", "rustbpe-mt", "1.3")]
    for mine, peer, target in pairs:
        ours, theirs = results.get(mine, {}), results.get(peer, {})
        if "seconds" in ours and "seconds" in theirs:
            parts.append(
                f"{mine}/{peer} time {ours['seconds'] / theirs['seconds']:.2f}x"
                f" (time <= {target}), memory {ours['peak_mb'] / theirs['peak_mb']:.2f}x"
            )
    return f"{case.name}: " + ("; ".join(parts) or "no peer to compare with")


def ratio_table(all_results: dict[str, dict[str, dict]]) -> str:
    """One row per case: our time and rustbpe's and hf1's, and ours over theirs."""
    lines = [
        "| case | ours s | rustbpe s | ours / rustbpe | hf1 s | ours / hf1 | ours MB"
        " | rustbpe MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, results in all_results.items():
        ours = results.get("ours", {})
        cells = [name, _seconds(ours)]
        for peer in ("rustbpe", "hf1"):
            theirs = results.get(peer, {})
            both = "seconds" in ours and "seconds" in theirs
            ratio = f"{ours['seconds'] / theirs['seconds']:.2f}x" if both else "-"
            cells += [_seconds(theirs), ratio]
        cells += [_megabytes(ours), _megabytes(results.get("rustbpe", {}))]
        lines.append("| " + " | ".join(cells) + " |")
    if any("ours-mt" in results or "rustbpe-mt" in results for results in all_results.values()):
        lines += ["", *_cores_table(all_results)]
    return "\n".join(lines)


def _cores_table(all_results: dict[str, dict[str, dict]]) -> list[str]:
    """Whole process against whole process with N cores each (`--jobs`)."""
    lines = [
        "| case | ours-mt s | rustbpe-mt s | ours-mt / rustbpe-mt | ours-mt MB | rustbpe-mt MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, results in all_results.items():
        ours, theirs = results.get("ours-mt", {}), results.get("rustbpe-mt", {})
        both = "seconds" in ours and "seconds" in theirs
        ratio = f"{ours['seconds'] / theirs['seconds']:.2f}x" if both else "-"
        cells = [name, _seconds(ours), _seconds(theirs), ratio, _megabytes(ours)]
        lines.append("| " + " | ".join([*cells, _megabytes(theirs)]) + " |")
    return lines


def _seconds(result: dict) -> str:
    return f"{result['seconds']:.2f}" if "seconds" in result else "-"


def _megabytes(result: dict) -> str:
    return f"{result['peak_mb']:.0f}" if "peak_mb" in result else "-"


def reference_speedup(limit: int, vocab_size: int) -> str:
    """Both trainers in this process on a small slice: the reference is too slow for more."""
    sys.path.insert(0, str(REPO))
    import bpe

    text = read_corpus(Case("ref", "english_small.txt", limit, "chunked", vocab_size))
    seconds = {}
    for trainer in ("reference", "efficient"):
        started = time.perf_counter()
        tok = bpe.train(text, vocab_size=vocab_size, mode="chunked", trainer=trainer)
        seconds[trainer] = time.perf_counter() - started
        merges = len(tok.merges)
    return (
        f"reference vs efficient, chunked, {limit // 1000} KB of english_small.txt, "
        f"{merges} merges: {seconds['reference']:.2f} s vs {seconds['efficient']:.3f} s = "
        f"{seconds['reference'] / seconds['efficient']:.0f}x faster"
    )


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for module in ("tokenizers", "rustbpe", "sentencepiece"):
        try:
            found.append(f"{module} {version(module)}")
        except PackageNotFoundError:
            found.append(f"{module} missing")
    return ", ".join(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        default=",".join(CASES) + ",reference",
        help="comma-separated: " + ", ".join(CASES) + ", reference",
    )
    parser.add_argument(
        "--peers", default=",".join(PEERS), help="comma-separated: " + ", ".join(ALL_PEERS)
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes (ours-mt) and threads (rustbpe-mt) for the -mt peers: every core",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per process")
    parser.add_argument("--repeat", type=int, default=1, help="runs per peer, fastest kept")
    parser.add_argument("--reference-bytes", type=int, default=200_000)
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(*args.worker)
        return

    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}")
    print(f"-mt peers: {args.jobs} processes / threads")
    print(versions())
    peers = [p for p in args.peers.split(",") if p]
    for peer in list(peers):
        module = PEER_MODULES.get(peer)
        if module and importlib.util.find_spec(module) is None:
            print(f"{peer}: {module} is not installed (pip install -e '.[peers]'), skipped")
            peers.remove(peer)
    wanted = [c for c in args.cases.split(",") if c]
    seconds: dict[str, float] = {}
    summary: list[str] = []
    all_results: dict[str, dict[str, dict]] = {}
    for name in wanted:
        if name == "reference":
            summary.append(reference_speedup(args.reference_bytes, 1_000))
            print(summary[-1], flush=True)
            continue
        case = CASES[name]
        if not (CORPORA_DIR / case.corpus).exists():
            print(f"{name}: {case.corpus} missing, build it with ../shared/corpora/make_corpora.sh")
            continue
        print(
            f"{name}: {case.mode}, vocab {case.vocab_size}, {case.corpus}"
            + (f" (first {case.limit // MB} MB)" if case.limit else ""),
            flush=True,
        )
        results = run_case(case, peers, args.timeout, args.repeat, args.jobs)
        all_results[name] = results
        summary.append(ratio_line(case, results))
        if "seconds" in results.get("ours", {}):
            seconds[name] = results["ours"]["seconds"]
    if "scale-en" in seconds and "chunked-en" in seconds:
        summary.append(
            f"scale: 57 MB / 6.5 MB time = "
            f"{seconds['scale-en'] / seconds['chunked-en']:.1f}x (target <= 12)"
        )
    print("\n".join(["", "summary:", *summary, "", ratio_table(all_results)]))


if __name__ == "__main__":
    main()
