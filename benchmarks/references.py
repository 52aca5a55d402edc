"""Imported reference tokenisers against tiktoken, side by side in one run.

    .venv/bin/python benchmarks/references.py [--refs reference-tokenizers] [--runs 7]
        [--postgres postgresql://...]   # also import into this (emptied!) throw-away database

1. import o200k_base into a fresh SQLite database through the app (parse, derive the merges,
   store every vocabulary and merge row): seconds and rows stored; peer: tiktoken building its
   Encoding from the same file (its rank-file reader plus the constructor);
2. the playground with 50 KB of English and o200k_base: the full page request (test client),
   median over runs on different 50 KB slices, so no run is served from the chunk cache of the
   one before; peer: tiktoken's encode_ordinary of the same slices;
3. evaluating cl100k_base on the 6.5 MB English corpus (`bpe.evaluate`, what the corpus page's
   background job runs); peer: tiktoken's encode_ordinary of the same text plus a Counter.

Wall-clock seconds; CPU seconds (this process) beside them, since the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from pathlib import Path

import tiktoken
from _common import ROOT, bench_app, owner_headers
from tiktoken.load import load_tiktoken_bpe

from bpe.evaluate import evaluate
from bpe.importers import import_path
from webapp.content.imports import import_upload
from webapp.storage import db
from webapp.storage.models import Merge, VocabEntry


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def tiktoken_encoding(refs: Path, name: str) -> tiktoken.Encoding:
    import json

    meta = json.loads((refs / f"{name}.tiktoken.json").read_text())
    ranks = load_tiktoken_bpe(str(refs / f"{name}.tiktoken"))
    return tiktoken.Encoding(
        name, pat_str=meta["pat_str"], mergeable_ranks=ranks, special_tokens=meta["special_tokens"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=Path, default=ROOT / "reference-tokenizers")
    parser.add_argument("--corpus", type=Path, default=ROOT / "corpora-data" / "english_small.txt")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--postgres", help="a throw-away PostgreSQL database to import into too")
    args = parser.parse_args()
    text = args.corpus.read_text(encoding="utf-8")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    raw = (args.refs / "o200k_base.tiktoken").read_bytes()
    sidecar = (args.refs / "o200k_base.tiktoken.json").read_bytes()

    def import_o200k(app, where: str):
        database = app.extensions["bpe_db"]
        row, wall, cpu = timed(
            lambda: import_upload(database, raw, filename="o200k_base.tiktoken", sidecar=sidecar)
        )
        with database.read_scope() as session:
            vocab_rows = session.query(VocabEntry).filter_by(tokenizer_id=row.id).count()
            merge_rows = session.query(Merge).filter_by(tokenizer_id=row.id).count()
        _, peer_wall, peer_cpu = timed(lambda: tiktoken_encoding(args.refs, "o200k_base"))
        print(
            f"import o200k_base ({where}): {wall:.2f} s wall ({cpu:.2f} s CPU), {vocab_rows:,}"
            f" vocabulary rows + {merge_rows:,} merge rows; tiktoken builds its Encoding in"
            f" {peer_wall:.2f} s wall ({peer_cpu:.2f} s CPU): ratio {wall / peer_wall:.1f}x"
        )
        return row

    if args.postgres:
        emptied = db.Database(args.postgres)
        db.downgrade(emptied, "base")
        emptied.dispose()
        pg_app = bench_app("bench-refs-pg-", DATABASE_URL=args.postgres)
        import_o200k(pg_app, "PostgreSQL")
        pg_app.extensions["bpe_db"].dispose()

    # The SQLite app of the embedded default: the import and the playground.
    app = bench_app("bench-refs-")
    row = import_o200k(app, "SQLite")
    client = app.test_client()
    headers = owner_headers(client)
    o200k = tiktoken_encoding(args.refs, "o200k_base")
    warm = client.post(
        f"/t/{row.slug}/encode", data={"text": "warm up the cached tokeniser"}, headers=headers
    )
    assert warm.status_code == 200, warm.status_code
    with app.app_context():
        from webapp.storage.convert import load_tokenizer

        ours_tok = load_tokenizer(db.session(), row)
    pages, fragments, encodes, theirs = [], [], [], []
    step = len(text) // (args.runs + 1)
    for k in range(args.runs):
        sample = text[k * step : k * step + 60_000].encode()[:50_000].decode(errors="ignore")
        ids, wall, _ = timed(lambda s=sample: ours_tok.encode(s))
        encodes.append(wall)
        peer_ids, wall, _ = timed(lambda s=sample: o200k.encode_ordinary(s))
        theirs.append(wall)
        assert ids == peer_ids, "the two encodings disagree"
        shifted = sample[1:]  # a new text for the page, so its encode is not all cached
        reply, wall, _ = timed(
            lambda s=shifted: client.post(
                f"/t/{row.slug}/encode", data={"text": s}, headers=headers
            )
        )
        assert reply.status_code == 200, reply.status_code
        pages.append(wall)
        reply, wall, _ = timed(
            lambda s=sample[2:]: client.post(
                f"/t/{row.slug}/encode",
                data={"text": s},
                headers={**headers, "HX-Request": "true"},
            )
        )
        assert reply.status_code == 200, reply.status_code
        fragments.append(wall)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.0f} ms"

    peer = statistics.median(theirs)
    print(
        f"playground, 50 KB English, o200k_base ({args.runs} runs, medians): encode"
        f" {ms(encodes)}, tiktoken {peer * 1000:.1f} ms (ratio"
        f" {statistics.median(encodes) / peer:.1f}x); whole page {ms(pages)}, htmx fragment"
        f" {ms(fragments)} (ratio to tiktoken's encode {statistics.median(pages) / peer:.0f}x)"
    )

    cl100k = import_path(args.refs / "cl100k_base.tiktoken")
    result, wall, cpu = timed(lambda: evaluate(cl100k, [text]))
    peer = tiktoken_encoding(args.refs, "cl100k_base")
    counts, peer_wall, peer_cpu = timed(lambda: Counter(peer.encode_ordinary(text)))
    assert sum(counts.values()) == result.tokens, "the two encodings disagree"
    print(
        f"evaluate cl100k_base on {args.corpus.name} ({len(text.encode()):,} bytes):"
        f" {wall:.2f} s wall ({cpu:.2f} s CPU), {result.tokens:,} tokens,"
        f" {result.bytes_per_token:.3f} bytes/token, {len(result.never_used):,} never used;"
        f" tiktoken encode + count {peer_wall:.2f} s wall ({peer_cpu:.2f} s CPU):"
        f" ratio {wall / peer_wall:.1f}x"
    )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
