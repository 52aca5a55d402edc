"""The languages job for four tokenisers (GPT-4, GPT-4o, Llama 3, Qwen 3) over every complete
UDHR text: wall time of the job as the runner runs it (`webapp.jobs.languages.run_languages`:
loading the tokenisers from the database, counting, storing), and, side by side in the same
run, each tokeniser's counting time against its peer's on the same texts (tiktoken's
`encode_ordinary`, HF `tokenizers`' `encode`), the counts checked equal.

    .venv/bin/python benchmarks/languages.py [--udhr udhr] [--refs reference-tokenizers]
                                             [--models model-tokenizers]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import time
from pathlib import Path

from _common import ROOT, bench_app

from bpe.importers import import_path
from bpe.languages import count_tokens, read_parallel_text
from webapp.content.imports import store_reference, store_upload
from webapp.content.parallel_text import store_folder
from webapp.jobs.languages import LanguageRows, run_languages


def peers(refs: Path, models: Path) -> dict[str, object]:
    import tiktoken
    import tokenizers

    out: dict[str, object] = {}
    for name, label in (("cl100k_base", "GPT-4"), ("o200k_base", "GPT-4o")):
        meta = json.loads((refs / f"{name}.tiktoken.json").read_text(encoding="utf-8"))
        ranks = {}
        for line in (refs / f"{name}.tiktoken").read_text().splitlines():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        out[label] = tiktoken.Encoding(
            name,
            pat_str=meta["pat_str"],
            mergeable_ranks=ranks,
            special_tokens=meta["special_tokens"],
        )
    for name, label in (("llama3", "Llama 3"), ("qwen3", "Qwen 3")):
        out[label] = tokenizers.Tokenizer.from_file(str(models / name / "tokenizer.json"))
    return out


def peer_count(peer: object, text: str) -> int:
    if hasattr(peer, "encode_ordinary"):
        return len(peer.encode_ordinary(text))
    return len(peer.encode(text, add_special_tokens=False).ids)


def tokenizer_id(database, slug: str) -> int:
    from sqlalchemy import select

    from webapp.storage.models import Tokenizer

    with database.read_scope() as session:
        return int(session.scalar(select(Tokenizer.id).where(Tokenizer.slug == slug)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--udhr", type=Path, default=ROOT / "udhr")
    parser.add_argument("--refs", type=Path, default=ROOT / "reference-tokenizers")
    parser.add_argument("--models", type=Path, default=ROOT / "model-tokenizers")
    args = parser.parse_args()
    print("load:", os.getloadavg())
    app = bench_app("bpe-languages-")
    database = app.extensions["bpe_db"]
    store_folder(database, args.udhr)
    texts = [lang.text for lang in read_parallel_text(args.udhr)]
    files = {
        "GPT-4": args.refs / "cl100k_base.tiktoken",
        "GPT-4o": args.refs / "o200k_base.tiktoken",
        "Llama 3": args.models / "llama3" / "tokenizer.json",
        "Qwen 3": args.models / "qwen3" / "tokenizer.json",
    }
    toks = {label: import_path(path) for label, path in files.items()}
    tokenizer_ids = []
    for label, tok in toks.items():
        # The references as `flask fetch-models` stores them, the others as an import does.
        if label.startswith("GPT"):
            slug = store_reference(database, tok, label)
            tokenizer_ids.append(tokenizer_id(database, slug))
        else:
            tokenizer_ids.append(store_upload(database, tok, owner_id=None).id)
    rows = LanguageRows(database)
    job = rows.submit(tokenizer_ids)
    assert rows.claim_next() == job
    started = time.perf_counter()
    status = run_languages(rows, job, interval=0.5)
    wall = time.perf_counter() - started
    print(f"job: {status} over {len(texts)} texts x {len(toks)} tokenisers in {wall:.1f} s")
    print("load:", os.getloadavg())
    print("| tokeniser | ours (s) | peer (s) | ratio | tokens (all texts) | equal |")
    print("|---|---|---|---|---|---|")
    for label, peer in peers(args.refs, args.models).items():
        t0 = time.perf_counter()
        ours = [count_tokens(toks[label], text) for text in texts]
        t1 = time.perf_counter()
        theirs = [peer_count(peer, text) for text in texts]
        t2 = time.perf_counter()
        print(
            f"| {label} | {t1 - t0:.2f} | {t2 - t1:.2f} | {(t1 - t0) / (t2 - t1):.1f}x "
            f"| {sum(ours):,} | {ours == theirs} |"
        )
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
