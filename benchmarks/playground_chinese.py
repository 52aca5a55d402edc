"""Server time of the playground for 50 KB of Chinese text, through Flask's test client.

A chunked (GPT-4 pattern) tokeniser with a vocabulary of 10,000 is trained on the first 2 MB
of chinese_modern.txt and stored through the app; the playground form then posts 50 KB of the
text after it (never trained on), `--repeat` times after one warm-up request, each time a
different 50 KB window so no chunk cache hides the encoding. Prints the median and p95 server
time and the share of it spent encoding (the same texts encoded alone).

    .venv/bin/python benchmarks/playground_chinese.py [--repeat 15]

Run it on two checkouts (before and after a change) to compare; the corpora must be built
(../shared/corpora/make_corpora.sh, or BPE_CORPORA_DIR).
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

from _common import bench_app, owner_headers, store_corpus, store_tokenizers

import bpe

CORPORA = Path(os.environ.get("BPE_CORPORA_DIR", ROOT / "corpora-data"))
WINDOW = 50_000


def windows(data: bytes, start: int, count: int) -> list[str]:
    out = []
    for k in range(count):
        piece = data[start + k * WINDOW : start + (k + 1) * WINDOW]
        out.append(piece.decode("utf-8", errors="ignore"))  # at most 50,000 bytes: the limit
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    path = CORPORA / "chinese_modern.txt"
    if not path.exists():
        sys.exit(f"{path} is missing: build the corpora with ../shared/corpora/make_corpora.sh")
    data = path.read_bytes()
    train_text = data[:2_000_000].decode("utf-8", errors="ignore")
    tok = bpe.train(train_text, vocab_size=10_000, mode="chunked", trainer="efficient")
    texts = windows(data, 2_000_000, args.repeat + 1)
    app = bench_app("bpe-playground-bench-")
    (slug,) = store_tokenizers(app, [tok], store_corpus(app, train_text, name="zh"))
    client = app.test_client()
    url, headers = f"/t/{slug}/encode", {"HX-Request": "true", **owner_headers(client)}
    samples, cpu, encode_only = [], [], []
    for index, text in enumerate(texts):
        started, started_cpu = time.perf_counter(), time.process_time()
        response = client.post(url, data={"text": text}, headers=headers)
        took, took_cpu = time.perf_counter() - started, time.process_time() - started_cpu
        assert response.status_code == 200, response.status_code
        if index == 0:
            continue  # warm-up: loads the tokeniser and builds its tables
        samples.append(took)
        cpu.append(took_cpu)
        fresh = bpe.Tokenizer(mode=tok.mode, merges=tok.merges, pattern=tok.pattern)
        fresh.encode(texts[0])  # tables built, cache then emptied
        fresh.clear_caches()
        started = time.perf_counter()
        fresh.encode(text)
        encode_only.append(time.perf_counter() - started)
    size = len(texts[1].encode()) / 1000
    p95 = sorted(samples)[int(0.95 * (len(samples) - 1))]
    print(
        f"playground, {size:.0f} KB of Chinese ({len(texts[1]):,} characters), vocab 10,000"
        f" chunked; {len(samples)} requests; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"server time median {statistics.median(samples) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms;"
        f" encoding alone median {statistics.median(encode_only) * 1000:.0f} ms;"
        f" CPU time of the request median {statistics.median(cpu) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
