"""What the rate limiter costs the encode API per request: the same POST /api/t/<slug>/encode
answered by apps without the limiter, with it counting in memory, and (with --redis) counting
in Redis, taking turns in one run. See BENCHMARKS.md.

    .venv/bin/python benchmarks/ratelimit_cost.py [--redis redis://127.0.0.1:6379/0] [--rounds 15]

In-process (Flask's test client, no sockets), so the figure is the limiter's own work per
request, not the network's. Each round times --requests requests on every app in turn, in a
fresh order each round so a change in the machine's load falls on all of them; a round's
figure is its mean per request, and the table gives the median over rounds. The limit is set
far above what the run sends, so every request is counted and none refused.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_app, store_corpus, store_tokenizers

import bpe

SHORT = "Hello world"
PARAGRAPH = (
    "Byte-pair encoding merges the most frequent pair of symbols again and again; a tokeniser"
    " trained on a corpus cuts new text into the pieces it learned. "
) * 35  # about 5 KB


def make_apps(tok: bpe.Tokenizer, redis_url: str | None) -> dict[str, tuple[object, str]]:
    """name -> (test client, the tokeniser's slug) for each variant."""
    variants: dict[str, dict[str, object]] = {"off": {"RATELIMIT_ENABLED": False}}
    plenty = {"RATELIMIT_ENABLED": True, "RATELIMIT_APPLICATION": "100000000 per minute"}
    variants["memory"] = {**plenty, "RATELIMIT_STORAGE_URI": "memory://"}
    if redis_url:
        prefix = f"bench{os.urandom(4).hex()}"
        variants["redis"] = {
            **plenty,
            "RATELIMIT_STORAGE_URI": redis_url,
            "RATELIMIT_KEY_PREFIX": prefix,
        }
    apps = {}
    for name, config in variants.items():
        app = bench_app(f"ratelimit-{name}-", **config)
        corpus = store_corpus(app, "bench corpus")
        (slug,) = store_tokenizers(app, [tok], corpus)
        apps[name] = (app.test_client(), slug)
    return apps


def time_requests(client, slug: str, text: str, n: int) -> float:
    """Mean seconds per request of n encode requests."""
    url = f"/api/t/{slug}/encode"
    start = time.perf_counter()
    for _ in range(n):
        response = client.post(url, json={"text": text})
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.get_data()[:200]!r}")
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", help="a Redis URL: also time the limiter counting there")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--requests", type=int, default=200, help="requests per app per round")
    args = parser.parse_args()

    tok = bpe.train(PARAGRAPH * 4, vocab_size=600, mode="chunked")
    apps = make_apps(tok, args.redis)
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    for label, text in (("11-character text", SHORT), ("5 KB text", PARAGRAPH)):
        for client, slug in apps.values():
            time_requests(client, slug, text, 20)  # warm: the tokeniser cache, the templates
        rounds: dict[str, list[float]] = {name: [] for name in apps}
        order = list(apps)
        for _ in range(args.rounds):
            random.shuffle(order)
            for name in order:
                client, slug = apps[name]
                rounds[name].append(time_requests(client, slug, text, args.requests))
        base = statistics.median(rounds["off"])
        print(f"\n{label}, {args.rounds} rounds x {args.requests} requests per variant")
        print("| limiter | median per request | over `off` | min per request |")
        print("|---|---|---|---|")
        for name, values in rounds.items():
            median = statistics.median(values)
            extra = (
                "" if name == "off" else f"+{(median - base) * 1e6:.0f} µs ({median / base:.2f}x)"
            )
            print(f"| {name} | {median * 1e6:.0f} µs | {extra} | {min(values) * 1e6:.0f} µs |")


if __name__ == "__main__":
    main()
