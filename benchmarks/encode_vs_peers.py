"""Encode speed against HF `tokenizers` (one thread) and `tiktoken`, same process, same ids.

For each corpus and byte-level mode: train (efficient trainer, GPT-4 pattern for chunked) a
vocabulary of 10,000 on the first 2 MB, then encode the next 2 MB as one string, cold (our
chunk cache emptied before every run, outside the timing), best of 3, with:
- ours, pure: `tok.encode(text, engine="pure")`, the Python encoder;
- ours, fast: `tok.encode(text)`, which hands the text to tiktoken where that is proven to give
  the same ids (`bpe.tiktoken_path`); the fast path itself is built before timing;
- HF: `Tokenizer.from_file` of our HF export, `encode(text).ids`, RAYON_NUM_THREADS=1;
- tiktoken: `Encoding` from our tiktoken export, `encode_ordinary(text)`.
All four must give identical ids (checked; a mismatch stops the run). Timings are CPU time of
this process (`time.process_time`), which the other work on a shared machine disturbs less
than the wall clock; `--wall` uses the wall clock instead.

    RAYON_NUM_THREADS=1 .venv/bin/python benchmarks/encode_vs_peers.py
    .venv/bin/python benchmarks/encode_vs_peers.py --corpora chinese_modern --modes chunked

Needs `tokenizers` and `tiktoken` (pip install -e '.[peers]') and the corpora (`BPE_CORPORA_DIR`,
default `corpora-data/` next to this folder), built by ../shared/corpora/make_corpora.sh.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers is imported

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import bpe

CORPORA = ["english_small", "english_large", "chinese_modern", "code"]
MODES = ["naive", "chunked"]
MB = 1_000_000


def corpora_dir() -> Path:
    return Path(os.environ.get("BPE_CORPORA_DIR", REPO / "corpora-data"))


def two_windows(path: Path, size: int) -> tuple[str, str]:
    """The first `size` bytes and the `size` bytes after them, cut at character boundaries."""
    with path.open("rb") as f:
        data = f.read(2 * size + 8)
    first = data[:size].decode("utf-8", errors="ignore")
    start = len(first.encode())
    second = data[start : start + size].decode("utf-8", errors="ignore")
    return first, second


def best_of(repeats: int, fn: Callable[[], list[int]], clock: Callable[[], float]):
    times, result = [], None
    for _ in range(repeats):
        started = clock()
        result = fn()
        times.append(clock() - started)
    return min(times), result


def run_case(corpus: str, mode: str, args: argparse.Namespace, clock) -> dict[str, float] | None:
    import tiktoken  # noqa: F401  (the fast path needs it)
    import tokenizers

    from bpe.export_hf import write_hf
    from bpe.export_tiktoken import load_tiktoken, write_tiktoken

    train_text, text = two_windows(corpora_dir() / f"{corpus}.txt", args.mb * MB)
    tok = bpe.train(train_text, vocab_size=args.vocab, mode=mode, pattern="gpt4")
    with tempfile.TemporaryDirectory() as tmp:
        hf_path = Path(tmp) / "tokenizer.json"
        write_hf(tok, hf_path)
        hf = tokenizers.Tokenizer.from_file(str(hf_path))
        write_tiktoken(tok, Path(tmp) / "tok.tiktoken")
        enc = load_tiktoken(Path(tmp) / "tok.tiktoken")
    fast_ready = tok.fast_path is not None
    tok._cuts, tok._characters, tok._whole_tokens  # noqa: B018  once per tokeniser, like the fast path

    runs = {
        "pure": lambda: tok.encode(text, engine="pure"),
        "fast": lambda: tok.encode(text),
        "hf": lambda: hf.encode(text).ids,
        "tiktoken": lambda: enc.encode_ordinary(text),
    }
    seconds: dict[str, float] = {}
    ids: dict[str, list[int]] = {}
    cold = all_cold(tok, hf)
    for _ in range(args.repeat):  # interleaved, so load changes hit every encoder alike
        for name, fn in runs.items():
            # Cold: the caches are emptied before every run, outside the timing. Freeing
            # the pure run's cache is no part of encoding (~10 ms on Chinese, which the fast
            # run after it was charged until now; the fast path never touches the cache).
            cold()
            took, result = best_of(1, fn, clock)
            seconds[name] = min(seconds.get(name, took), took)
            ids[name] = result
    reference = ids["pure"]
    for name, result in ids.items():
        if result != reference:
            raise SystemExit(f"{corpus} {mode}: {name} gives other ids than the pure path")
    size = len(text.encode()) / MB
    seconds["mb"] = size
    seconds["fast_applies"] = float(fast_ready)
    return seconds


def all_cold(tok: bpe.Tokenizer, hf) -> Callable[[], None]:
    """What empties both caches before each run: ours, and HF's BPE model's word cache, which
    otherwise keeps the round before's words, so that HF ran warm beside our cold runs
    (BENCHMARKS.md says which tables did; `_clear_cache` is in tokenizers since 0.21)."""
    clear_hf = getattr(hf.model, "_clear_cache", None)

    def clear() -> None:
        tok.clear_caches()
        if clear_hf is not None:
            clear_hf()

    return clear


def peers_installed() -> bool:
    """Whether `tokenizers` and `tiktoken` import; if not, says so on stderr."""
    try:
        import tiktoken  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        print(f"skipped: needs tokenizers and tiktoken ({exc})", file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="+", default=CORPORA, choices=CORPORA)
    parser.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--mb", type=int, default=2, help="MB to train on, and to encode")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wall", action="store_true", help="time with the wall clock")
    args = parser.parse_args(argv)
    missing = [c for c in args.corpora if not (corpora_dir() / f"{c}.txt").exists()]
    if missing:
        print(f"skipped: corpora {', '.join(missing)} not in {corpora_dir()}", file=sys.stderr)
        return 0
    if not peers_installed():
        return 0
    clock = time.perf_counter if args.wall else time.process_time
    print(
        f"vocab {args.vocab:,} trained on the first {args.mb} MB, the next {args.mb} MB encoded"
        f" cold, best of {args.repeat}, {'wall' if args.wall else 'CPU'} time;"
        f" load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    header = (
        f"{'corpus':<15}{'mode':<8}{'pure MB/s':>10}{'fast MB/s':>10}{'HF MB/s':>9}"
        f"{'tt MB/s':>9}{'pure/HF':>9}{'pure/tt':>9}{'fast/tt':>9}  ids"
    )
    print(header)
    print("-" * len(header))
    for corpus in args.corpora:
        for mode in args.modes:
            s = run_case(corpus, mode, args, clock)
            assert s is not None
            mb = s["mb"]
            print(
                f"{corpus:<15}{mode:<8}{mb / s['pure']:>10.2f}{mb / s['fast']:>10.2f}"
                f"{mb / s['hf']:>9.2f}{mb / s['tiktoken']:>9.2f}"
                f"{s['pure'] / s['hf']:>8.2f}x{s['pure'] / s['tiktoken']:>8.2f}x"
                f"{s['fast'] / s['tiktoken']:>8.2f}x  same"
                + ("" if s["fast_applies"] else " (fast path n/a)"),
                flush=True,
            )
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
