"""A first visit, timed in headless Chromium against the README's production server (gunicorn,
`make run`'s command, jobs in its runner thread): the bar is that a first-time visitor
sees a trained tokeniser, its playground and a naive-vs-chunked comparison within 10 s of
opening the home page, without finding a file.

Measured per run, from `page.goto(home)` to the last of these being on screen:
- cold: a fresh site whose sample was never trained (no `flask sample`): the visitor clicks
  "Try the sample", the pair trains, and the comparison opens with its demo text cut by both
  (`.diff-summary` visible); then the chunked tokeniser's playground, text typed, tokens shown.
- make run: a fresh site started as `make run` starts it (`flask db-upgrade`, `flask sample`,
  then gunicorn), visited the moment it answers: the pair is trained in the server's first
  seconds, so the visitor follows either "Compare naive and chunked" or, if it is not ready
  yet, "Watch, then compare".
- warm: the same site afterwards, a new visitor (no cookie): the home page's "Compare naive
  and chunked" link, the comparison, then the playground as above.
Beside them, in the same run, the library training the same pair in-process (`bpe.train`):
what the web path adds to the training that cannot be skipped.

    .venv/bin/python benchmarks/first_visit.py            # 3 runs: cold + 3 warm, make run
    .venv/bin/python benchmarks/first_visit.py --runs 1
    .venv/bin/python benchmarks/first_visit.py --home     # the home page after a restart

`--home` times the home page of a site with every model imported (GPT-2, GPT-4, GPT-4o from
reference-tokenizers/, the five tokenizer.json files of model-tokenizers/, the sample pair),
by plain HTTP (no browser): the server started, its first answer to `/` (which counts the demo
text in every model), then an htmx encode of a new text, then the same text again every 0.5 s
until the table holds every count (the page's own polling); then the server stopped and started
again on the same database, and the same once more. Before the background loader, the first
answer waited for every model to load (~10 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT  # puts this checkout first on sys.path
from server_load import Served

import bpe
from webapp.content.sample import SAMPLE_VOCAB_SIZE, sample_text

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"]
TYPED = "The workshop counts every byte of the text, again and again."
BAR_SECONDS = 10.0


def playground(page) -> None:
    page.click(".compare-facts th a:has-text('chunked')")
    page.wait_for_selector("#play-text")
    page.fill("#play-text", TYPED)
    page.wait_for_selector("#encoded .tokens .tok", timeout=60_000)


def cold_visit(page, base: str) -> float:
    started = time.perf_counter()
    page.goto(base + "/")
    page.click("form.sample-start button[type=submit]")
    page.wait_for_url("**/compare/*/*", timeout=120_000)
    page.wait_for_selector(".diff-summary", timeout=60_000)
    playground(page)
    return time.perf_counter() - started


def make_run_visit(page, base: str) -> float:
    started = time.perf_counter()
    page.goto(base + "/")
    page.click(".sample-offer a.button")  # ready: the comparison; still training: /sample
    page.wait_for_url("**/compare/*/*", timeout=120_000)
    page.wait_for_selector(".diff-summary", timeout=60_000)
    playground(page)
    return time.perf_counter() - started


def prepare_like_make_run(folder: Path) -> None:
    """`make run`'s steps before gunicorn, on the database Served will use."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}"}
    for step in ("db-upgrade", "sample"):
        subprocess.run(
            [str(Path(sys.executable).parent / "flask"), "--app", "webapp", step],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )


def warm_visit(page, base: str) -> float:
    started = time.perf_counter()
    page.goto(base + "/")
    page.click(".sample-links a.button")
    page.wait_for_selector(".diff-summary", timeout=60_000)
    playground(page)
    return time.perf_counter() - started


def library_pair() -> float:
    started = time.perf_counter()
    for mode in ("naive", "chunked"):
        bpe.train(sample_text(), vocab_size=SAMPLE_VOCAB_SIZE, mode=mode)
    return time.perf_counter() - started


def prepare_models(folder: Path) -> None:
    """A site with the references, every importable model file and the sample pair."""
    from home_counts import load_models

    from webapp import create_app

    app = create_app({"DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}"})
    print("\n".join(load_models(app, ROOT / "model-tokenizers")), flush=True)
    app.extensions["bpe_db"].dispose()


def home_after_start(folder: Path) -> tuple[float, float, float]:
    """Seconds from starting the server to its first `/`, that answer to an encode, and from
    the start until a table with every count."""
    from server_load import owner_token

    started = time.perf_counter()
    server = Served(folder)  # returns once `/` has answered
    try:
        first_page = time.perf_counter() - started
        token = owner_token(server.base)
        text = f"A new text typed at {time.time():.0f}: the table counts it in every model."
        body = urlencode({"text": text}).encode()
        headers = {"HX-Request": "true", "Authorization": f"Bearer {token}"}
        sent = time.perf_counter()
        reply = post(server.base + "/encode", body, headers)
        first_encode = time.perf_counter() - sent
        while "still loading" in reply:
            time.sleep(0.5)
            reply = post(server.base + "/encode", body, headers)
        return first_page, first_encode, time.perf_counter() - started
    finally:
        server.stop()


def post(url: str, body: bytes, headers: dict[str, str]) -> str:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(request, timeout=600) as response:
        return response.read().decode()


def home_main(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bpe-first-visit-home-") as name:
        folder = Path(name)
        prepare_like_make_run(folder)
        prepare_models(folder)
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for run in range(runs + 1):
            page, encode, complete = home_after_start(folder)
            print(
                f"{'start' if run == 0 else f'restart {run}'}: first `/` {page:.2f} s after"
                f" the server was started; then an encode of a new text {encode:.2f} s; every"
                f" count in the table {complete:.2f} s after the start",
                flush=True,
            )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="runs (each: a cold site with 3 warm visits, a make-run site)",
    )
    parser.add_argument("--home", action="store_true", help="the home page after a restart")
    args = parser.parse_args()
    if args.home:
        home_main(args.runs)
        return
    from playwright.sync_api import sync_playwright

    cold: list[float] = []
    warm: list[float] = []
    after_make_run: list[float] = []
    library: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bpe-first-visit-") as folder:
                server = Served(Path(folder))
                try:
                    context = browser.new_context()
                    cold.append(cold_visit(context.new_page(), server.base))
                    context.close()
                    for _ in range(3):
                        context = browser.new_context()  # another first-time visitor
                        warm.append(warm_visit(context.new_page(), server.base))
                        context.close()
                finally:
                    server.stop()
            with tempfile.TemporaryDirectory(prefix="bpe-first-visit-") as folder:
                prepare_like_make_run(Path(folder))
                server = Served(Path(folder))
                try:
                    context = browser.new_context()
                    after_make_run.append(make_run_visit(context.new_page(), server.base))
                    context.close()
                finally:
                    server.stop()
            library.append(library_pair())
        browser.close()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
    for label, values in (
        ("cold (click, train, compare, playground)", cold),
        ("make run (sample queued at start, visited at once)", after_make_run),
        ("warm", warm),
    ):
        print(
            f"{label}: median {statistics.median(values):.2f} s, worst {max(values):.2f} s"
            f" over {len(values)} (bar {BAR_SECONDS:.0f} s)"
        )
    lib = statistics.median(library)
    print(f"library training the same pair in-process: median {lib:.2f} s")
    print(f"cold first visit / library training: {statistics.median(cold) / lib:.1f}x")
    print(f"root {ROOT}")


if __name__ == "__main__":
    main()
