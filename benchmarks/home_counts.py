"""The home page's encode (the picked model's tokens and the counts table over every model
offered) for 5 kB of text: server time in-process, through the app's test client, as htmx asks
for it (POST /encode, HX-Request). Bar: 150 ms. See BENCHMARKS.md.

    .venv/bin/python benchmarks/home_counts.py [--requests 30] [--bytes 5000] [--without-freeze]

The models are what a site has when its references and model files are imported: GPT-2, GPT-4
and GPT-4o as `flask import-references` stores them (from reference-tokenizers/), every
tokenizer.json under --models (default /work/data/model-tokenizers) that the HF import takes
(stored as the site's, as an import by the site would; refused ones are named; all five of
/work/data/model-tokenizers import now: eight models with the references), and the sample pair
trained as `flask sample` trains it. Printed: what each costs on its own (one encode of
the text with the tokeniser loaded and warm), the first request (the picked model loaded, the
others handed to the background loader and shown as loading), how long until the table has
every count, and the warm requests' median and p95, with the share spent counting the table.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, bench_app  # also puts this checkout first on sys.path
from werkzeug.datastructures import MultiDict

import bpe
from bpe.importers import import_path
from webapp.blueprints.pages import home_playground
from webapp.content.imports import import_reference_dir, store_upload
from webapp.content.sample import SAMPLE_SETTINGS, find_sample, sample_text
from webapp.rendering.model_counts import count_table, model_label
from webapp.storage import convert, db
from webapp.storage.convert import load_tokenizer, store_tokenizer
from webapp.storage.model_choices import ready_models
from webapp.storage.uploads import store_text

BAR_MS = 150.0
CORPUS = ROOT / "corpora-data" / "english_large.txt"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load_models(app, models_dir: Path) -> list[str]:
    """Store every model the site would offer; what was refused, as lines to print."""
    database = app.extensions["bpe_db"]
    notes = []
    for label, _slug, _new in import_reference_dir(database, ROOT / "reference-tokenizers"):
        notes.append(f"  {label}: imported (flask import-references)")
    for path in sorted(models_dir.glob("*/tokenizer.json")):
        try:
            store_upload(database, import_path(path), owner_id=None)
            notes.append(f"  {path.parent.name}: imported (HF tokenizer.json)")
        except bpe.TokenizerFileError as exc:
            notes.append(f"  {path.parent.name}: refused by the import: {str(exc)[:90]}")
    corpus, _ = store_text(
        database,
        sample_text(),
        name="Sample",
        tmp_dir=app.config["UPLOAD_TMP_DIR"],
        owner_id=None,
    )
    for mode, settings in SAMPLE_SETTINGS.items():
        tok = bpe.train(
            sample_text(), vocab_size=settings.vocab_size, mode=mode, pattern=settings.pattern
        )
        with database.session_scope() as session:
            store_tokenizer(session, tok, corpus_id=corpus.id, owner_id=None)
        notes.append(f"  sample {mode}: trained ({settings.vocab_size} tokens)")
    return notes


class GC:
    """Time spent in the collector's full (oldest-generation) passes, which walk every object
    of every loaded tokeniser."""

    seconds = 0.0
    _started = 0.0

    @classmethod
    def callback(cls, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            cls._started = time.perf_counter()
        elif info["generation"] == 2:
            cls.seconds += time.perf_counter() - cls._started


gc.callbacks.append(GC.callback)


def five_kb_slices(size: int, count: int) -> list[str]:
    """`count` different texts of at most `size` bytes from the corpus: a paste each, so no
    request finds its chunks in a tokeniser's cache from the one before."""
    full = CORPUS.read_text(encoding="utf-8")
    step = max(size, (len(full) - size) // max(count, 1))
    out = []
    for n in range(count):
        text = full[n * step : n * step + size]
        while len(text.encode()) > size:
            text = text[:-1]
        out.append(text)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--bytes", type=int, default=5000)
    parser.add_argument("--models", type=Path, default=ROOT / "model-tokenizers")
    parser.add_argument(
        "--without-freeze",
        action="store_true",
        help="leave loaded tokenisers to the garbage collector (the code before the freeze)",
    )
    args = parser.parse_args()
    if args.without_freeze:
        convert._out_of_the_collectors_way = lambda *, evicted: None
    texts = five_kb_slices(args.bytes, args.requests + 1)
    app = bench_app("bench-home-")
    print("models:")
    print("\n".join(load_models(app, args.models)))
    client = app.test_client()
    token = client.post("/api/owners", json={}).get_json()["owner_token"]
    headers = {"HX-Request": "true", "Authorization": f"Bearer {token}"}

    cpu: list[float] = []

    def encode(text: str) -> tuple[float, str]:
        start, start_cpu = time.perf_counter(), time.process_time()
        reply = client.post("/encode", data={"text": text}, headers=headers)
        elapsed = time.perf_counter() - start
        cpu.append(time.process_time() - start_cpu)
        assert reply.status_code == 200, reply.get_data(as_text=True)[:300]
        return elapsed, reply.get_data(as_text=True)

    first, body = encode(texts[0])
    counted = body.count('name="t"')
    loading_at_first = body.count("loading…")
    # As the page does: ask again (here every 0.25 s) until the background loader has every
    # model of the table (webapp/storage/warming.py).
    started = time.perf_counter()
    polls = 0
    while "still loading" in body:
        time.sleep(0.25)
        body = encode(texts[0])[1]
        polls += 1
    complete = time.perf_counter() - started + first
    cpu.clear()
    collected = GC.seconds
    pasted = [encode(text)[0] for text in texts[1:]]  # a new text each time
    pasted_cpu, pasted_gc = list(cpu), GC.seconds - collected
    cpu.clear()
    typed = [encode(texts[0])[0] for _ in texts[1:]]  # the same text again (typing on)
    typed_cpu = list(cpu)

    with app.test_request_context("/encode", method="POST", headers=headers):
        session = db.session()
        sample_ids = [row.id for row in find_sample(session).tokenizers.values()]
        choices = ready_models(session, owner_id=None, site_ids=sample_ids)
        # Each model on its own: loaded from its rows (convert's cache emptied first), its
        # first encode (which builds the tokeniser's lazy tables), then a new text.
        convert._cache.clear()  # the per-process cache, emptied to time a cold load
        singles = []
        for row in choices:
            start = time.perf_counter()
            tok = load_tokenizer(session, row)
            loaded = time.perf_counter()
            tok.encode(texts[1], allowed_special="all")
            warmed = time.perf_counter()
            ids = tok.encode(texts[2], allowed_special="all")
            done = time.perf_counter()
            singles.append(
                (model_label(row), len(ids), loaded - start, warmed - loaded, done - warmed)
            )
        table_times, whole = [], []
        for text in texts[3:]:
            start = time.perf_counter()
            count_table(session, choices, text, specials=True)
            table_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            home_playground(MultiDict({"text": text}), sample_ids=sample_ids)
            whole.append(time.perf_counter() - start)

    print(f"\ntext: {args.bytes:,}-byte slices of {CORPUS.name}")
    print(f"{'model':40} {'tokens':>7} {'load ms':>8} {'1st enc ms':>10} {'encode ms':>9}")
    for label, n, load, first_encode, again in singles:
        print(
            f"{label[:40]:40} {n:7,} {load * 1000:8.0f} {first_encode * 1000:10.1f}"
            f" {again * 1000:9.2f}"
        )
    print(f"\nPOST /encode (htmx), {counted} models in the table:")
    print(
        f"  first request after the start (the picked model loaded; {loading_at_first} of"
        f" {counted} still loading, shown as such): {first * 1000:,.0f} ms"
    )
    print(
        f"  every count in the table (the page asking again, {polls} polls here):"
        f" {complete * 1000:,.0f} ms after the first request was sent"
    )
    for name, times, cpus in (
        ("a new 5 kB text each time", pasted, pasted_cpu),
        ("the same text again", typed, typed_cpu),
    ):
        median = statistics.median(times) * 1000
        p95 = percentile(times, 0.95) * 1000
        verdict = "met" if p95 <= BAR_MS else "NOT met"
        print(
            f"  {name}, {len(times)} requests: median {median:.1f} ms, p95 {p95:.1f} ms"
            f" (bar {BAR_MS:.0f} ms at p95: {verdict}); CPU time median"
            f" {statistics.median(cpus) * 1000:.1f} ms, p95 {percentile(cpus, 0.95) * 1000:.1f} ms"
        )
    print(f"  full garbage collections during the new texts' requests: {pasted_gc * 1000:.0f} ms")
    print(
        f"  in-request parts, new texts (medians): the counts table"
        f" {statistics.median(table_times) * 1000:.1f} ms, the whole context (table, picked"
        f" model's chips, queries) {statistics.median(whole) * 1000:.1f} ms"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak memory of this process, every model loaded: {rss:,.0f} MB")


if __name__ == "__main__":
    main()
