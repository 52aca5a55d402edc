"""Is the job page's "time left" honest? Train on the English corpus, naive and chunked, feed
every progress report to the estimator the jobs use (webapp.jobs.progress.MergeEstimator), and
compare the estimate shown at 25% and 50% of the merges with the time that was actually left
(until the trainer returned). The bar: within 2x either way.

The peer is the estimate the job page used to show, elapsed / merges_done * merges_left,
measured from the same reports in the same run.

    .venv/bin/python benchmarks/eta_check.py [--corpus corpora-data/english_small.txt]
        [--chars 2000000] [--vocab 4000] [--chunked-chars 7000000] [--chunked-vocab 8000]
        [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bpe
from webapp.jobs.progress import MergeEstimator

CORPORA = Path(
    os.environ.get("BPE_CORPORA_DIR", Path(__file__).resolve().parent.parent / "corpora-data")
)


def run(text: str, mode: str, vocab: int) -> dict:
    estimator = MergeEstimator()
    started = time.monotonic()
    reports: list[tuple[float, int, int, float | None, float | None]] = []

    def progress(p: bpe.Progress) -> None:
        now = time.monotonic()
        estimator.observe(now, p.merges_done, p.merges_target, p.count, p.total_tokens)
        naive = None
        if p.merges_done and p.merges_target:
            naive = (now - started) / p.merges_done * (p.merges_target - p.merges_done)
        reports.append((now, p.merges_done, p.merges_target, estimator.seconds_left(), naive))

    tok = bpe.train(text, vocab_size=vocab, mode=mode, progress=progress)
    ended = time.monotonic()
    target = reports[-1][2]
    out = {"mode": mode, "merges": len(tok.merges), "seconds": ended - started}
    for share in (0.25, 0.5):
        when, done, _, estimate, naive = next(r for r in reports if r[1] >= share * target)
        actual = ended - when
        out[share] = (done, actual, estimate, naive)
    first = next((r for r in reports if r[3] is not None), None)
    out["first_estimate_at"] = (first[0] - started, first[1]) if first else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(CORPORA / "english_small.txt"))
    parser.add_argument("--chars", type=int, default=2_000_000)
    parser.add_argument("--vocab", type=int, default=4000, help="naive mode's vocab size")
    parser.add_argument(
        "--chunked-vocab", type=int, default=8000, help="chunked merges are cheap: more of them"
    )
    parser.add_argument("--chunked-chars", type=int, default=7_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    whole = Path(args.corpus).read_text(encoding="utf-8")
    texts = {"naive": whole[: args.chars], "chunked": whole[: args.chunked_chars]}
    vocabs = {"naive": args.vocab, "chunked": args.chunked_vocab}
    sizes = {mode: f"{len(text):,} characters" for mode, text in texts.items()}
    print(f"corpus {args.corpus}: {sizes}, vocab sizes {vocabs}")
    print("mode     run  at    done   actual left  estimate (ratio)   old estimate (ratio)")
    worst = 1.0
    for mode in ("naive", "chunked"):
        for n in range(args.repeat):
            result = run(texts[mode], mode, vocabs[mode])
            for share in (0.25, 0.5):
                done, actual, estimate, naive = result[share]
                ratio = estimate / actual if estimate is not None else float("nan")
                old = naive / actual if naive is not None else float("nan")
                worst = float("inf") if estimate is None else max(worst, ratio, 1 / ratio)
                shown = f"{estimate:8.1f} s ({ratio:4.2f}x)" if estimate is not None else "   none"
                print(
                    f"{mode:8} {n + 1:>3}  {share:4.0%} {done:>6,}  {actual:9.1f} s  {shown}"
                    f"   {naive:8.1f} s ({old:5.2f}x)"
                )
            first = result["first_estimate_at"]
            if first:
                print(
                    f"{'':13} first estimate after {first[0]:.1f} s, at merge {first[1]:,};"
                    f" training {result['seconds']:.1f} s"
                )
    verdict = "met" if worst <= 2 else "NOT met"
    print(f"worst ratio {worst:.2f}x (bar: within 2x): {verdict}")


if __name__ == "__main__":
    main()
