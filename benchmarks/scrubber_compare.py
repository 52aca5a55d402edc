"""Time per request of the merge scrubber and of a 4-way compare, for 5 KB of text on
50,000-merge tokenisers (issue 10; targets: scrubber <= 50 ms, 4-way compare <= 150 ms).

    .venv/bin/python benchmarks/scrubber_compare.py [--merges 50000] [--repeat 30] [--train]

Tokenisers are stored through the app's own path in a fresh SQLite database and requested
through Flask's test client as htmx does (server time only: encoding, the boundary diff,
rendering; no network). By default the merges are synthetic but valid (benchmarks/vocab_page.py's
generator, four seeds for the four tokenisers); `--train` trains the efficient trainer on
english_small.txt once and stores it four times (four rows, four caches: no sharing).

The peer is tiktoken encoding the same 5 KB with the same tokeniser (exported with
bpe.export_tiktoken): the raw cost of one encode in Rust, with nothing shown. Ratios are our
request time / tiktoken's encode time, measured side by side in this run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import bench_app, owner_headers, store_corpus, store_tokenizers
from vocab_page import synthetic_tokenizer, timed, trained_tokenizer

import bpe

CORPORA = Path(os.environ.get("BPE_CORPORA_DIR", ROOT / "corpora-data"))
TEXT_BYTES = 5000


def sample_text() -> str:
    path = CORPORA / "english_small.txt"
    text = path.read_text(encoding="utf-8")[:20_000] if path.exists() else "The quick fox. " * 2000
    data = text.encode("utf-8")[:TEXT_BYTES]
    return data.decode("utf-8", errors="ignore")


def tiktoken_encode_time(tok: bpe.Tokenizer, text: str, repeat: int) -> float | None:
    try:
        from bpe.export_tiktoken import to_tiktoken_encoding
    except ImportError:
        return None
    encoding = to_tiktoken_encoding(tok)
    return statistics.median(timed(lambda: encoding.encode_ordinary(text), repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--train", action="store_true", help="train on english_small.txt")
    args = parser.parse_args()

    started = time.perf_counter()
    if args.train:
        tok, corpus_text = trained_tokenizer(args.merges)
        toks = [tok] * 4
        source = "efficient trainer on english_small.txt, stored 4 times"
    else:
        toks = [synthetic_tokenizer(args.merges, seed=seed) for seed in (5, 6, 7, 8)]
        corpus_text = "synthetic corpus\n" * 10
        source = "synthetic valid merges, 4 seeds"
    built = time.perf_counter() - started
    text = sample_text()

    app = bench_app("bpe-scrub-bench-")
    slugs = store_tokenizers(app, toks, store_corpus(app, corpus_text))
    client = app.test_client()
    hx = {"HX-Request": "true", **owner_headers(client)}
    n = len(toks[0].merges)

    print(f"tokenisers: {n:,} merges each ({source}); built in {built:.1f} s")
    print(f"text: {len(text.encode()):,} bytes of english_small.txt (or filler if missing)")
    print(f"{args.repeat} requests each, Flask test client, SQLite, htmx fragments; times in ms\n")
    compare = "/compare/" + "/".join(slugs) + "/encode"
    cases = [
        ("playground, all merges (no scrub)", f"/t/{slugs[0]}/encode", {}),
        ("scrubber k = 1,000", f"/t/{slugs[0]}/encode", {"k": "1000"}),
        (f"scrubber k = {n // 2:,}", f"/t/{slugs[0]}/encode", {"k": str(n // 2)}),
        (f"scrubber k = {n - 1:,}", f"/t/{slugs[0]}/encode", {"k": str(n - 1)}),
        ("why this split? (token 100)", f"/t/{slugs[0]}/why", {"token": "100"}),
        ("4-way compare, all merges", compare, {}),
        ("4-way compare, scrubbed to 50%", compare, {"k": "500", "by": "fraction"}),
        ("4-way compare, k = 1,000 each", compare, {"k": "1000", "by": "count"}),
    ]
    peer = tiktoken_encode_time(toks[0], text, args.repeat)
    print(f"{'request':36} {'median':>8} {'p95':>8} {'max':>8}   x tiktoken encode")
    for label, url, extra in cases:
        data = {"text": text, **extra}
        response = client.post(url, data=data, headers=hx)
        assert response.status_code == 200, (url, response.status_code, response.text[:300])
        samples = timed(
            lambda url=url, data=data: client.post(url, data=data, headers=hx), args.repeat
        )
        median = statistics.median(samples)
        p95 = sorted(samples)[int(0.95 * (len(samples) - 1))]
        line = f"{label:36} {median * 1000:8.1f} {p95 * 1000:8.1f} {max(samples) * 1000:8.1f}"
        if peer:
            line += f"   {median / peer:10.0f}x"
        print(line)
    if peer:
        print(f"\npeer: tiktoken encode_ordinary of the same text, median {peer * 1000:.3f} ms")
    app.extensions["bpe_db"].dispose()


if __name__ == "__main__":
    main()
