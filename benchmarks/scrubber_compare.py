"""Time per request of the merge scrubber and of a 4-way compare, for 5 KB of text on
50,000-merge tokenisers (targets, so both feel immediate: scrubber <= 50 ms, 4-way compare
<= 150 ms); with `--bytes 50000`, at the playground's limit (a scrubber step <= 300 ms, every
page <= 40 bytes of HTML per byte of text: the B/byte column, the largest answer of the case).

    .venv/bin/python benchmarks/scrubber_compare.py [--merges 50000] [--repeat 30] [--train]
        [--bytes 5000]

Tokenisers are stored through the app's own path in a fresh SQLite database and requested
through Flask's test client as htmx does (server time only: encoding, the boundary diff,
rendering; no network). By default the merges are synthetic but valid (benchmarks/vocab_page.py's
generator, four seeds for the four tokenisers); `--train` trains the efficient trainer on
english_small.txt once and stores it four times (four rows, four caches: no sharing).

The peer is tiktoken encoding the same 5 KB with the same tokeniser (exported with
bpe.export_tiktoken): the raw cost of one encode in Rust, with nothing shown. Ratios are our
request time / tiktoken's encode time, measured side by side in this run.

Most cases repeat one request, as a visitor does who types with the slider still; the caches
it meets are the ones the site keeps (the tokeniser's chunks, its token chips). Three cases
change something every request: the text (the next 5 KB slice of english_small.txt: only its
chunks and tokens seen before are cached) or k (a dragged slider). CPU time of this process
is given beside wall time, since the machine may be shared.
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


def sample_texts(count: int, size: int = TEXT_BYTES) -> list[str]:
    """`count` different slices of `size` bytes of english_small.txt (filler if missing)."""
    path = CORPORA / "english_small.txt"
    chars = size * 6 // 5 * count
    text = path.read_text(encoding="utf-8")[:chars] if path.exists() else ""
    if len(text) < chars:
        text = "The quick fox. " * (chars // 15 + 1)
    data = text.encode("utf-8")
    slices = [data[i * size : (i + 1) * size] for i in range(count)]
    return [piece.decode("utf-8", errors="ignore") for piece in slices]


def timed_requests(send, repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of `repeat` calls send(i), after one warm-up call send(-1)."""
    send(-1)
    wall, cpu = [], []
    for i in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        send(i)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return wall, cpu


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
    parser.add_argument(
        "--bytes",
        type=int,
        default=TEXT_BYTES,
        help="text size (50000: the playground's limit, where the bar is <= 300 ms a scrubber"
        " step and <= 40 bytes of HTML per byte of text)",
    )
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
    texts = sample_texts(args.repeat + 2, args.bytes)
    text = texts[0]

    app = bench_app("bpe-scrub-bench-", PLAYGROUND_MAX_BYTES=max(50_000, args.bytes))
    slugs = store_tokenizers(app, toks, store_corpus(app, corpus_text))
    client = app.test_client()
    hx = {"HX-Request": "true", **owner_headers(client)}
    n = len(toks[0].merges)

    print(f"tokenisers: {n:,} merges each ({source}); built in {built:.1f} s")
    print(f"text: {len(text.encode()):,} bytes of english_small.txt (or filler if missing)")
    print(f"{args.repeat} requests each, Flask test client, SQLite, htmx fragments; times in ms")
    print(f"load average at the start: {os.getloadavg()[0]:.1f}\n")
    compare = "/compare/" + "/".join(slugs) + "/encode"
    play, why = f"/t/{slugs[0]}/encode", f"/t/{slugs[0]}/why"
    # (label, url, fields, what changes between requests: nothing, k, or the text)
    cases = [
        ("playground, all merges (no scrub)", play, {}, None),
        ("playground, a new text each time", play, {}, "text"),
        ("scrubber k = 1,000", play, {"k": "1000"}, None),
        (f"scrubber k = {n // 2:,}", play, {"k": str(n // 2)}, None),
        (f"scrubber k = {n - 1:,}", play, {"k": str(n - 1)}, None),
        ("scrubber dragged (k + 97 each time)", play, {"k": "1000"}, "k"),
        ("why this split? (token 100)", why, {"token": "100"}, None),
        ("4-way compare, all merges", compare, {}, None),
        ("4-way compare, scrubbed to 50%", compare, {"k": "500", "by": "fraction"}, None),
        ("4-way compare, k = 1,000 each", compare, {"k": "1000", "by": "count"}, None),
        ("4-way compare, a new text each time", compare, {}, "text"),
    ]
    peer = tiktoken_encode_time(toks[0], text, args.repeat)
    header = f"{'request':38} {'median':>8} {'p95':>8} {'max':>8} {'CPU med':>8} {'B/byte':>7}"
    print(header + "   x tiktoken encode")
    weight: list[int] = []
    for label, url, fields, varies in cases:

        def send(i, url=url, fields=fields, varies=varies):
            data = {"text": text, **fields}
            if varies == "text":
                data["text"] = texts[i + 1]
            elif varies == "k":
                data["k"] = str(int(fields["k"]) + 97 * (i + 1))
            response = client.post(url, data=data, headers=hx)
            assert response.status_code == 200, (url, response.status_code, response.text[:300])
            weight.append(len(response.data) // len(data["text"].encode()))

        samples, cpu = timed_requests(send, args.repeat)
        median = statistics.median(samples)
        p95 = sorted(samples)[int(0.95 * (len(samples) - 1))]
        line = f"{label:38} {median * 1000:8.1f} {p95 * 1000:8.1f} {max(samples) * 1000:8.1f}"
        line += f" {statistics.median(cpu) * 1000:8.1f} {max(weight):7d}"
        weight.clear()
        if peer:
            line += f"   {median / peer:10.0f}x"
        print(line)
    if peer:
        print(f"\npeer: tiktoken encode_ordinary of the same text, median {peer * 1000:.3f} ms")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    app.extensions["bpe_db"].dispose()


if __name__ == "__main__":
    main()
