"""Jobs per minute on the Celery backend with 1, 2 and 4 workers, and page latency meanwhile,
against the embedded backend (one runner in the web process) as the peer.

For each configuration: a fresh SQLite database, gunicorn on loopback (the README's server;
2 web processes for celery, 1 for embedded), the workers, one corpus, then N identical small
trainings submitted at once through the web. Jobs per minute = N / (last finished - first
submitted). While they run, one client fetches the corpus page and a job status fragment in
a loop; p50/p95 of those requests. Needs a Redis broker:

    .venv/bin/python benchmarks/celery_jobs.py --broker $(sh scripts/redis-test-server.sh 6390)
    .venv/bin/python benchmarks/celery_jobs.py --broker redis://127.0.0.1:6390/0 --jobs 6
    .venv/bin/python benchmarks/celery_jobs.py --broker redis://127.0.0.1:6390/0 --workers 1,2,4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TRAINING = {"mode": "chunked", "pattern": "gpt4", "trainer": "efficient", "vocab_size": 1000}


def corpus_text(words: int = 30000) -> str:
    rng = random.Random(7)
    vocab = ["".join(rng.choice("etaoinshrdlucmfwyp") for _ in range(rng.randint(2, 9)))
             for _ in range(4000)]  # fmt: skip
    return " ".join(rng.choice(vocab) for _ in range(words))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, data: bytes | None = None, headers: dict | None = None):
    request = urllib.request.Request(url, data=data, headers=headers or {})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.url, response.read()


def wait_for(predicate, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("timed out")


def run(backend: str, workers: int, jobs: int, broker: str) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="bpe-celery-bench-"))
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}",
        "PORT": str(port),
        "BPE_JOBS_QUEUED": str(jobs + 2),
        "BPE_JOB_BACKEND": backend,
        "CELERY_BROKER_URL": broker,
        "BPE_JOB_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
        "WEB_CONCURRENCY": "2" if backend == "celery" else "1",
        "SECRET_KEY": "the benchmark's web processes share this one",
        # One owner (a bearer token) sends every job; the limits are not what is measured.
        "BPE_JOBS_PER_OWNER": str(jobs + 2),
        "BPE_RATELIMIT": "0",
        # A loaded machine starves the niced training children for seconds: a throughput run
        # should not see them swept as lost (docs/operations.md, "What the database decides").
        "BPE_JOBS_STALE_AFTER": "600",
    }
    subprocess.run([str(BIN / "flask"), "--app", "webapp", "db-upgrade"], env=env, check=True,
                   capture_output=True)  # fmt: skip
    processes = []
    log = open(folder / "servers.log", "w")  # noqa: SIM115 - closed below
    try:
        web = [str(BIN / "gunicorn"), "--config", "python:webapp.gunicorn_conf", "webapp.wsgi:app"]
        processes.append(subprocess.Popen([*web, "--access-logfile", "/dev/null"], env=env,
                                          stdout=log, stderr=log))  # fmt: skip
        for n in range(workers if backend == "celery" else 0):
            command = [str(BIN / "celery"), "-A", "webapp.celery_app", "worker", "-c", "1"]
            processes.append(subprocess.Popen(
                [*command, "-n", f"bench{n}@%h", "--without-mingle", "--without-gossip"],
                env=env, stdout=log, stderr=log,
            ))  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: get(base + "/"), timeout=60)
        time.sleep(3 if backend == "celery" else 0)  # the workers connect to the broker
        body = json.dumps({"name": "bench", "text": corpus_text()}).encode()
        _, reply = get(base + "/api/corpora", body, {"Content-Type": "application/json"})
        slug, token = json.loads(reply)["slug"], json.loads(reply)["owner_token"]
        owner = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        latencies: list[float] = []
        done = threading.Event()
        first_job: list[str] = []

        def browse() -> None:
            while not done.is_set():
                for url in [f"{base}/c/{slug}"] + [u + "/status" for u in first_job[:1]]:
                    started = time.perf_counter()
                    get(url, headers=owner)
                    latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        # The JSON API, as a script would: the pages' forms need a browser's CSRF token.
        job_urls = [
            json.loads(get(f"{base}/api/corpora/{slug}/jobs", json.dumps(TRAINING).encode(),
                           owner)[1])["url"]
            for _ in range(jobs)
        ]  # fmt: skip
        first_job.append(job_urls[0])
        reader = threading.Thread(target=browse)
        reader.start()

        def all_finished() -> bool:
            states = [get(url + "/status", headers=owner)[1] for url in job_urls]
            finished = [b'data-status="succeeded"' in s for s in states]
            if any(b'data-status="failed"' in s or b'data-status="interrupted"' in s
                   for s in states):  # fmt: skip
                raise RuntimeError("a benchmark job did not succeed; see " + str(folder))
            return all(finished)

        wait_for(all_finished, timeout=1800)
        elapsed = time.perf_counter() - started
        done.set()
        reader.join()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)
        log.close()
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "backend": backend,
        "workers": workers,
        "jobs": jobs,
        "seconds": elapsed,
        "jobs_per_minute": jobs / elapsed * 60,
        "page_p50_ms": cuts[49] * 1000,
        "page_p95_ms": cuts[94] * 1000,
        "page_requests": len(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default=os.environ.get("TEST_BROKER_URL", ""), required=False)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--workers", default="1,2", help="worker counts to run, e.g. 1,2,4")
    args = parser.parse_args()
    if not args.broker:
        parser.error("--broker redis://... is needed (sh scripts/redis-test-server.sh 6390)")
    print(f"{args.jobs} jobs of {json.dumps(TRAINING)}, a 30,000-word corpus; peer: embedded")
    print("| backend | workers | jobs/min | vs embedded | page p50 ms | page p95 ms | requests |")
    print("|---|---|---|---|---|---|---|", flush=True)
    peer = None
    runs = [("embedded", 1)] + [("celery", int(n)) for n in args.workers.split(",")]
    for backend, workers in runs:  # each row as soon as it is measured
        r = run(backend, workers, args.jobs, args.broker)
        peer = peer or r["jobs_per_minute"]
        print(
            f"| {r['backend']} | {r['workers']} | {r['jobs_per_minute']:.1f} |"
            f" {r['jobs_per_minute'] / peer:.2f}x | {r['page_p50_ms']:.0f} |"
            f" {r['page_p95_ms']:.0f} | {r['page_requests']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
