"""How often the HF and tiktoken exports give our ids on real text, and how fast each encodes.

For each corpus, mode (naive, chunked with GPT-4's pattern) and vocabulary size, trains on
windows spread over the corpus, then encodes held-out lines (each line a document) with our
tokeniser, the HF export and the tiktoken export, and prints:
- dup ids: ids whose bytes repeat an earlier id's (the exports keep only the earliest);
- HF docs: documents HF encodes exactly as we do; `canon` counts a document as agreeing when
  HF's ids are ours with each duplicate id replaced by the earliest one (what the export promises);
- tiktoken chunks and docs: chunks (naive: documents) and documents tiktoken encodes as we do.
Then times encoding ~1 MB of english_small with each, same vocabulary, as ratios against ours.

    .venv/bin/python benchmarks/export_agreement.py            # the BENCHMARKS.md figures
    .venv/bin/python benchmarks/export_agreement.py --quick    # a one-minute smoke run

Needs `tokenizers` and `tiktoken`, and the corpora (`BPE_CORPORA_DIR`, default `corpora-data/`
next to this folder), built by ../shared/corpora/make_corpora.sh.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import bpe
from bpe.export_common import canonical_ids, duplicate_tokens
from bpe.export_hf import to_hf_json
from bpe.export_tiktoken import to_tiktoken_encoding

CORPORA = ["english_small", "english_large", "chinese_modern", "code"]
MODES = ["naive", "chunked"]


@dataclass
class Agreement:
    dup_ids: int
    docs: int
    hf_exact: int
    hf_canon: int
    tt_chunks: int
    tt_chunks_same: int
    tt_docs_same: int


def corpora_dir() -> Path:
    return Path(os.environ.get("BPE_CORPORA_DIR", REPO / "corpora-data"))


def windows(text: str, *, count: int, size: int, held_out: int) -> tuple[str, list[str]]:
    """Training text from `count` windows spread over the corpus, and the lines right after each
    window (held out: never trained on) as documents."""
    step = max(len(text) // count, size + held_out)
    train_parts: list[str] = []
    docs: list[str] = []
    for start in range(0, len(text) - size - held_out + 1, step)[:count]:
        train_parts.append(text[start : start + size])
        after = text[start + size : start + size + held_out]
        docs.extend(line for line in after.split("\n")[1:-1] if line.strip())
    return "\n".join(train_parts), docs


def measure(tok: bpe.Tokenizer, docs: list[str], hf, enc) -> Agreement:
    canon = canonical_ids(tok)
    ours = [tok.encode(d) for d in docs]
    theirs = [e.ids for e in hf.encode_batch(docs)]
    hf_exact = sum(a == b for a, b in zip(ours, theirs, strict=False))
    hf_canon = sum([canon.get(i, i) for i in a] == b for a, b in zip(ours, theirs, strict=False))
    tt_docs = sum(a == enc.encode_ordinary(d) for a, d in zip(ours, docs, strict=False))
    chunks = total = 0
    for d in docs:
        for piece, ids in _pieces(tok, d):
            total += 1
            chunks += enc._encode_single_piece(piece.encode("utf-8")) == ids
    return Agreement(
        sum(len(v) - 1 for v in duplicate_tokens(tok).values()),
        len(docs),
        hf_exact,
        hf_canon,
        total,
        chunks,
        tt_docs,
    )


def _pieces(tok: bpe.Tokenizer, doc: str) -> list[tuple[str, list[int]]]:
    """What tiktoken runs its merge rule on, each with our ids for it."""
    if tok.mode == "naive":
        return [(doc, tok.encode(doc))]
    chunks = bpe.split_chunks(doc, tok.pattern or "")
    return list(zip(chunks, tok.encode_chunks(doc), strict=False))


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:6.2f}%" if whole else "     -"


def agreement_table(args: argparse.Namespace) -> None:
    import tokenizers

    print(
        f"training: {args.windows} windows x {args.window:,} chars per corpus;"
        f" held out: the lines in {args.held_out:,} chars after each window"
    )
    header = (
        f"{'corpus':<15}{'mode':<8}{'vocab':>6}{'dup ids':>9}{'docs':>7}{'HF docs':>9}"
        f"{'HF canon':>10}{'tt chunks':>11}{'tt docs':>9}{'train s':>9}"
    )
    print(header)
    print("-" * len(header))
    for corpus in args.corpora:
        text = (corpora_dir() / f"{corpus}.txt").read_text(encoding="utf-8")
        train_text, docs = windows(
            text, count=args.windows, size=args.window, held_out=args.held_out
        )
        for mode in MODES:
            for vocab in args.vocab:
                started = time.perf_counter()
                tok = bpe.train(train_text, vocab_size=vocab, mode=mode, trainer=args.trainer)
                seconds = time.perf_counter() - started
                hf = tokenizers.Tokenizer.from_str(to_hf_json(tok))
                a = measure(tok, docs, hf, to_tiktoken_encoding(tok))
                print(
                    f"{corpus:<15}{mode:<8}{vocab:>6}{a.dup_ids:>9}{a.docs:>7}"
                    f"{pct(a.hf_exact, a.docs):>9}{pct(a.hf_canon, a.docs):>10}"
                    f"{pct(a.tt_chunks_same, a.tt_chunks):>11}{pct(a.tt_docs_same, a.docs):>9}"
                    f"{seconds:>9.1f}",
                    flush=True,
                )


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def encoders_to_time(tok: bpe.Tokenizer, sample: str, *, naive: bool) -> list[tuple[str, Any]]:
    """(name, no-argument encode call) for ours and the two exports, on the same vocabulary."""
    import tokenizers

    hf = tokenizers.Tokenizer.from_str(to_hf_json(tok))
    enc = to_tiktoken_encoding(tok)
    lines = sample.splitlines(keepends=True)

    def ours_cold() -> None:
        tok.clear_caches()
        tok.encode(sample)

    runs = [
        ("ours (cold cache)", ours_cold),
        ("ours (warm cache)", lambda: tok.encode(sample)),
        ("HF encode", lambda: hf.encode(sample)),
        ("HF encode_batch (lines)", lambda: hf.encode_batch(lines)),
        ("tiktoken encode_ordinary", lambda: enc.encode_ordinary(sample)),
        ("tiktoken batch (lines)", lambda: enc.encode_ordinary_batch(lines)),
    ]
    # Naive mode has no chunk cache, and its merges cross lines (other ids per line).
    return [r for r in runs if not naive or not ("lines" in r[0] or "warm" in r[0])]


def speed_table(args: argparse.Namespace) -> None:

    text = (corpora_dir() / "english_small.txt").read_text(encoding="utf-8")
    train_text, sample = text[: args.window * args.windows], text[-args.speed_chars :]
    size_mb = len(sample.encode("utf-8")) / 1e6
    print(
        f"\nencode speed: {size_mb:.2f} MB of english_small (its last {args.speed_chars:,} chars,"
        f" one string), vocab {args.speed_vocab}, best of {args.repeats}; ours cold = empty"
        " chunk cache"
    )
    header = f"{'mode':<8}{'encoder':<28}{'seconds':>9}{'MB/s':>8}{'vs ours':>9}"
    print(header)
    print("-" * len(header))
    for mode in MODES:
        tok = bpe.train(train_text, vocab_size=args.speed_vocab, mode=mode, trainer=args.trainer)
        runs = encoders_to_time(tok, sample, naive=mode == "naive")
        baseline = None
        for name, fn in runs:
            seconds = best_of(args.repeats, fn)
            baseline = baseline or seconds
            print(
                f"{mode:<8}{name:<28}{seconds:>9.3f}{size_mb / seconds:>8.2f}"
                f"{baseline / seconds:>8.1f}x",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="+", default=CORPORA, choices=CORPORA)
    parser.add_argument("--vocab", nargs="+", type=int, default=[1000, 5000, 10000])
    parser.add_argument("--windows", type=int, default=8, help="training windows per corpus")
    parser.add_argument("--window", type=int, default=125_000, help="chars per window")
    parser.add_argument("--held-out", type=int, default=25_000, help="chars held out per window")
    parser.add_argument("--trainer", default="efficient", choices=bpe.TRAINERS)
    parser.add_argument("--speed-chars", type=int, default=1_000_000)
    parser.add_argument("--speed-vocab", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small slices, for a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.corpora, args.vocab = ["english_small"], [1000]
        args.window, args.held_out, args.speed_chars, args.repeats = 20_000, 5_000, 100_000, 1
    missing = [c for c in args.corpora if not (corpora_dir() / f"{c}.txt").exists()]
    if missing:
        print(
            f"skipped: corpora {', '.join(missing)} not found in {corpora_dir()}; build them with"
            " ../shared/corpora/make_corpora.sh or set BPE_CORPORA_DIR",
            file=sys.stderr,
        )
        return 0
    try:
        import tiktoken  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        print(
            f"skipped: needs tokenizers and tiktoken ({exc}); pip install -e '.[peers]'",
            file=sys.stderr,
        )
        return 0
    agreement_table(args)
    speed_table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
