"""Time per request for the vocabulary and merges pages of a 50,000-merge tokeniser.

    .venv/bin/python benchmarks/vocab_page.py [--merges 50000] [--repeat 30] [--train]

The tokeniser is stored through the app's own path (webapp.storage.convert.store_tokenizer) in a
fresh SQLite database, then each page is requested through Flask's test client (server time only:
SQL, rendering, no network). By default the merges are synthetic but valid (each joins two earlier
tokens, lengths capped like real ones, counts falling like real ones), so the benchmark needs no
corpus; `--train` trains the efficient trainer on english_small.txt instead (needs the corpora:
../shared/corpora/make_corpora.sh).

The peer is the obvious way without SQL paging: rebuild the vocabulary in Python from the
tokeniser (as `tok.vocab` does), filter and sort it there, and slice one page. Ratios are
peer time / our time per request.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import bench_app, owner_headers, store_corpus, store_tokenizers

import bpe
from bpe.token_info import token_category

CORPORA = Path(os.environ.get("BPE_CORPORA_DIR", ROOT / "corpora-data"))
MAX_TOKEN_BYTES = 16
SHORT_TOKEN_BYTES = 4


def synthetic_tokenizer(merge_count: int, *, seed: int = 5) -> bpe.Tokenizer:
    """Valid merges: each joins two existing tokens, no pair twice (a stored tokeniser is read
    through the file format's checks); recent tokens are likelier parts. Short tokens are a
    pool of their own: once the ASCII pairs are used up and recent tokens are long, they are
    what still pairs under the length cap."""
    rng = random.Random(seed)
    lengths = [1] * 256
    merges: list[tuple[int, int, int]] = []
    merged: set[tuple[int, int]] = set()
    ascii_ids = list(range(32, 127))
    short = list(ascii_ids)  # ids of at most SHORT_TOKEN_BYTES bytes
    while len(merges) < merge_count:
        new_id = 256 + len(merges)
        draw = rng.random()
        pool = (
            ascii_ids
            if draw < 0.3
            else short
            if draw < 0.4
            else range(max(32, new_id - 2000), new_id)
        )
        left, right = rng.choice(pool), rng.choice(pool)
        if lengths[left] + lengths[right] > MAX_TOKEN_BYTES or (left, right) in merged:
            continue
        merged.add((left, right))
        merges.append((left, right, new_id))
        lengths.append(lengths[left] + lengths[right])
        if lengths[-1] <= SHORT_TOKEN_BYTES:
            short.append(new_id)
    counts = [max(2, int(2_000_000 / (rank + 10) ** 0.9)) for rank in range(merge_count)]
    tokens_after, total = [], 10_000_000
    for count in counts:
        total -= count
        tokens_after.append(total)
    stats = bpe.TrainingStats(
        trainer="synthetic",
        vocab_size=256 + merge_count,
        min_frequency=1,
        initial_tokens=10_000_000,
        merge_counts=counts,
        tokens_after=tokens_after,
        seconds=0.0,
    )
    return bpe.Tokenizer(mode="chunked", merges=merges, pattern=bpe.GPT4_PATTERN, training=stats)


def trained_tokenizer(merge_count: int) -> tuple[bpe.Tokenizer, str]:
    path = CORPORA / "english_small.txt"
    if not path.exists():
        sys.exit(f"{path} is missing: build the corpora with ../shared/corpora/make_corpora.sh")
    text = path.read_text(encoding="utf-8")
    tok = bpe.train(text, vocab_size=256 + merge_count, mode="chunked", trainer="efficient")
    return tok, text


def timed(fn, repeat: int) -> list[float]:
    fn()  # warm: the first request of a kind fills caches (templates, tokeniser, pages)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def peer_page(tok: bpe.Tokenizer, *, sort: str, page: int, category: str | None = None):
    """Page the vocabulary in Python: every entry built, filtered and sorted per request."""
    specials = set(tok.special_tokens.values())
    counts = tok.training.merge_counts
    rows = []
    for token_id, data in tok.vocab.items():
        if category and token_category(data, special=token_id in specials) != category:
            continue
        rank = token_id - tok.base_size
        rows.append((token_id, len(data), counts[rank] if 0 <= rank < len(counts) else -1))
    key = {"id": lambda r: r[0], "-count": lambda r: (-r[2], r[0])}[sort]
    rows.sort(key=key)
    return rows[(page - 1) * 50 : page * 50]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--train", action="store_true", help="train on english_small.txt")
    args = parser.parse_args()

    started = time.perf_counter()
    if args.train:
        tok, text = trained_tokenizer(args.merges)
        source = "efficient trainer on english_small.txt"
    else:
        tok, text = synthetic_tokenizer(args.merges), "synthetic corpus\n" * 10
        source = "synthetic valid merges"
    built = time.perf_counter() - started

    app = bench_app("bpe-vocab-bench-")
    corpus_id = store_corpus(app, text)
    started = time.perf_counter()
    (slug,) = store_tokenizers(app, [tok], corpus_id)
    stored = time.perf_counter() - started
    client = app.test_client()
    bearer = owner_headers(client)
    last_page = (tok.vocab_size + 49) // 50
    hx = {"HX-Request": "true"}

    print(f"tokeniser: {len(tok.merges):,} merges, {tok.vocab_size:,} ids ({source});")
    print(f"built in {built:.1f} s, stored (merges + vocabulary rows) in {stored:.1f} s")
    print(f"{args.repeat} requests each, Flask test client, SQLite; times in ms\n")
    cases = [
        ("vocab page 1 (full page)", f"/t/{slug}/vocab", {}, ("id", 1, None)),
        ("vocab page 1 (htmx fragment)", f"/t/{slug}/vocab", hx, ("id", 1, None)),
        ("vocab page 500 (offset 24,950)", f"/t/{slug}/vocab?page=500", hx, ("id", 500, None)),
        (f"vocab last page ({last_page})", f"/t/{slug}/vocab?page={last_page}", hx, None),
        (
            "vocab sorted by count, page 300",
            f"/t/{slug}/vocab?sort=-count&page=300",
            hx,
            ("-count", 300, None),
        ),
        ("vocab sorted by length, page 1", f"/t/{slug}/vocab?sort=-length", hx, None),
        ("vocab search 'the'", f"/t/{slug}/vocab?q=the", hx, None),
        ("vocab search hex '74 68'", f"/t/{slug}/vocab?q=74+68&match=hex", hx, None),
        (
            "vocab category letters, page 20",
            f"/t/{slug}/vocab?category=letters&page=20",
            hx,
            ("id", 20, "letters"),
        ),
        ("vocab 200 per page", f"/t/{slug}/vocab?per_page=200&page=100", hx, None),
        ("merges page 1", f"/t/{slug}/merges", hx, None),
        ("merges page 900", f"/t/{slug}/merges?page=900", hx, None),
        ("merges search 'the'", f"/t/{slug}/merges?q=the", hx, None),
        ("token detail (last merge)", f"/t/{slug}/token/{tok.vocab_size - 1}", {}, None),
        ("api vocab page 500", f"/api/t/{slug}/vocab?page=500", {}, None),
        ("playground: encode 5 KB of English", f"/t/{slug}/encode", hx, None),
    ]
    sample = CORPORA / "english_small.txt"
    play_text = (
        sample.read_text(encoding="utf-8")[:5000] if sample.exists() else "The quick fox. " * 333
    )

    def request(url: str, headers: dict):
        if url.endswith("/encode"):  # the playground posts its form
            return client.post(url, data={"text": play_text}, headers={**headers, **bearer})
        return client.get(url, headers=headers)

    print(f"{'request':40} {'median':>8} {'p95':>8} {'max':>8}   peer median  ratio")
    worst = 0.0
    for label, url, headers, peer in cases:
        response = request(url, headers)
        assert response.status_code == 200, (url, response.status_code)
        samples = timed(lambda url=url, headers=headers: request(url, headers), args.repeat)
        median = statistics.median(samples)
        p95 = sorted(samples)[int(0.95 * (len(samples) - 1))]
        worst = max(worst, max(samples))
        line = f"{label:40} {median * 1000:8.1f} {p95 * 1000:8.1f} {max(samples) * 1000:8.1f}"
        if peer is not None:
            sort, page, category = peer
            peer_samples = timed(
                lambda sort=sort, page=page, category=category: peer_page(
                    tok, sort=sort, page=page, category=category
                ),
                max(3, args.repeat // 6),
            )
            peer_median = statistics.median(peer_samples)
            line += f"   {peer_median * 1000:9.1f}  {peer_median / median:5.1f}x"
        print(line)
    print(f"\nslowest single request: {worst * 1000:.1f} ms")
    app.extensions["bpe_db"].dispose()


if __name__ == "__main__":
    main()
