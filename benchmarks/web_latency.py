"""Page latency while a training job runs, against the naive peer (training inside the web
process). Prints p50/p95 per phase and the ratios; see BENCHMARKS.md.

    .venv/bin/python benchmarks/web_latency.py [--requests 300]

Phases, each on a fresh server process and database with the same corpus:
1. idle: no training anywhere;
2. job: a training job through the app's runner (a child process does the CPU work);
3. peer: the same training in a thread of the web process (what the runner avoids).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webserver import Server, get, owner_headers, random_words

TRAIN = {"mode": "chunked", "vocab_size": 50000, "trainer": "reference", "pattern": "gpt4"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def upload(base: str, text: str, owner: dict[str, str]) -> str:
    request = urllib.request.Request(
        f"{base}/api/corpora?name=bench",
        data=text.encode(),
        headers={"Content-Type": "text/plain", **owner},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)["slug"]


def measure(base: str, slug: str, n: int) -> list[float]:
    pages = [f"{base}/", f"{base}/c/{slug}"]
    for page in pages:
        get(page)  # warm up templates and connections
    return [get(pages[i % len(pages)]) for i in range(n)]


def start_job(base: str, slug: str, owner: dict[str, str]) -> str:
    body = "&".join(f"{k}={v}" for k, v in TRAIN.items()).encode()
    request = urllib.request.Request(f"{base}/c/{slug}/train", data=body, headers=owner)
    with urllib.request.urlopen(request) as response:
        return response.url  # the job page, after the redirect


def job_status(job_url: str, owner: dict[str, str]) -> str:
    request = urllib.request.Request(job_url + "/status", headers=owner)  # the owner's page only
    with urllib.request.urlopen(request) as response:
        page = response.read().decode()
    return page.split('data-status="', 1)[1].split('"', 1)[0]


def merges_done(job_url: str, owner: dict[str, str]) -> int:
    request = urllib.request.Request(job_url + "/status", headers=owner)
    with urllib.request.urlopen(request) as response:
        page = response.read().decode()
    if 'class="merges">' not in page:
        return 0
    return int(page.split('class="merges">', 1)[1].split("/", 1)[0].strip().replace(",", ""))


def run_phase(name: str, text: str, n: int, *, job: bool = False, peer: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        burn = (
            {"text": text, "vocab_size": TRAIN["vocab_size"], "trainer": "reference"}
            if peer
            else None
        )
        server = Server(workdir, burn=burn)
        try:
            owner = owner_headers(server.base)
            slug = upload(server.base, text, owner)
            job_url = None
            if job:
                job_url = start_job(server.base, slug, owner)
                deadline = time.monotonic() + 30
                while job_status(job_url, owner) != "running" and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(1.0)  # past the child's start-up, into the merges
            times = measure(server.base, slug, n)
            still = job_status(job_url, owner) if job_url else None
            progress = merges_done(job_url, owner) if job_url else None
        finally:
            server.stop()
    if job and (still != "running" or not progress):
        raise SystemExit(
            f"the job was {still} with {progress} merges when the measurement"
            " ended; it must be training the whole time"
        )
    return {
        "phase": name,
        "p50_ms": statistics.median(times) * 1000,
        "p95_ms": percentile(times, 0.95) * 1000,
        "max_ms": max(times) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--words", type=int, default=400_000, help="corpus size in words")
    args = parser.parse_args()
    text = random_words(args.words)
    print(
        f"corpus: {len(text.encode()) / 1e6:.1f} MB, {args.requests} requests per phase"
        f" (home and corpus page alternately), training {TRAIN}"
    )
    rows = [
        run_phase("idle", text, args.requests),
        run_phase("job (child process)", text, args.requests, job=True),
        run_phase("peer: training thread in the web process", text, args.requests, peer=True),
    ]
    print(f"{'phase':45} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for row in rows:
        print(f"{row['phase']:45} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f} {row['max_ms']:8.1f}")
    idle, job, peer = (r["p95_ms"] for r in rows)
    print(
        f"p95 during a job / idle: {job / idle:.2f}x;  peer / idle: {peer / idle:.2f}x;"
        f"  peer / job: {peer / job:.1f}x"
    )


if __name__ == "__main__":
    main()
