"""The time from a fault to every job final on the Celery backend: Redis killed (`kill -9`, its
queue lost: Debian's default, no persistence) and a worker killed mid-job, against the same
jobs with no fault as the peer (measured from the same moment: the first job's first merge).

Each run: a Redis of its own, a fresh SQLite database, a web app in this process that runs the
sweep (as every web process does), two real Celery workers, N small trainings submitted at
once. The settings are the shipped defaults unless given (BPE_JOBS_RESEND_AFTER 60 s,
BPE_JOBS_STALE_AFTER 30 s, a sweep every 5 s), since they bound the recovery:

    .venv/bin/python benchmarks/celery_faults.py
    .venv/bin/python benchmarks/celery_faults.py --jobs 6 --resend-after 10
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import select  # after the path: this checkout's own webapp

from webapp import create_app, stop_runners
from webapp.jobs.settings import JobSettings
from webapp.storage.models import TrainingJob
from webapp.storage.uploads import store_text

FAULTS = ("none", "redis", "worker")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout} s")


def text(seed: int, words: int = 20000) -> str:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("etaoinshrdlucmfwyp") for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]  # fmt: skip
    return " ".join(rng.choice(vocab) for _ in range(words))


class Redis:
    def __init__(self, folder: Path) -> None:
        self.port, self.folder = free_port(), folder
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(lambda: socket.create_connection(("127.0.0.1", self.port)), timeout=30)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


def start_worker(env: dict[str, str], log: Path, name: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "celery", "-A", "webapp.celery_app", "worker", "-c", "1"]
    handle = open(log, "w")  # noqa: SIM115 - the worker's own output, kept till it ends
    process = subprocess.Popen(
        [*command, "-n", f"{name}@%h", "-l", "info", "--without-mingle", "--without-gossip"],
        env=env, stdout=handle, stderr=handle, cwd=ROOT,
    )  # fmt: skip
    wait_for(lambda: " ready." in log.read_text(errors="replace"), timeout=120)
    return process


def run(fault: str, args: argparse.Namespace) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="bpe-faults-bench-"))
    redis = Redis(folder)
    broker = f"redis://127.0.0.1:{redis.port}/0"
    config = {
        "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}",
        "JOB_BACKEND": "celery",
        "CELERY_BROKER_URL": broker,
        "JOB_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
        "SECRET_KEY": "benchmark",
        "JOBS_EXECUTION": "thread",
        "JOBS_MAX_QUEUED": args.jobs,
        "JOBS_RESEND_AFTER": args.resend_after,
        "JOBS_STALE_AFTER": args.stale_after,
    }
    app = create_app(config, run_jobs=True)
    env = {
        **os.environ,
        "DATABASE_URL": config["DATABASE_URL"],
        "CELERY_BROKER_URL": broker,
        "BPE_JOB_QUEUE": config["JOB_QUEUE"],
        "BPE_AUTO_MIGRATE": "0",
        "BPE_JOBS_STALE_AFTER": str(args.stale_after),
        "PYTHONPATH": str(ROOT),
    }
    workers = [start_worker(env, folder / f"worker{n}.log", f"w{n}") for n in range(2)]
    database = app.extensions["bpe_db"]

    def rows() -> list[TrainingJob]:
        with database.read_scope() as session:
            return list(session.scalars(select(TrainingJob).where(TrainingJob.id.in_(ids))))

    try:
        backend = app.extensions["bpe_jobs"]
        ids = []
        for n in range(args.jobs):
            corpus, _ = store_text(
                database, text(100 + n), name=f"c{n}", tmp_dir=app.config["UPLOAD_TMP_DIR"]
            )
            settings = JobSettings(trainer="reference", vocab_size=args.vocab_size)
            ids.append(backend.submit(corpus.id, settings))
        wait_for(lambda: any(job.merges_done > 0 for job in rows()), timeout=300)
        started = time.monotonic()
        if fault == "redis":
            redis.kill()  # the queued jobs' messages go with it
            redis.start()
        elif fault == "worker":
            running = next(job for job in rows() if job.merges_done > 0)
            victim = next(w for w in workers if w.pid == running.worker_pid)
            victim.send_signal(signal.SIGKILL)
        wait_for(lambda: all(job.finished for job in rows()), timeout=1800, interval=0.2)
        seconds = time.monotonic() - started
        statuses = Counter(getattr(job.status, "value", job.status) for job in rows())
    finally:
        stop_runners(app)
        database.dispose()
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
        for worker in workers:
            worker.wait(60)
        redis.kill()
    return {"fault": fault, "seconds": seconds, "statuses": dict(statuses)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--vocab-size", type=int, default=420)
    parser.add_argument("--resend-after", type=float, default=60.0)
    parser.add_argument("--stale-after", type=float, default=30.0)
    parser.add_argument("--faults", default=",".join(FAULTS))
    args = parser.parse_args()
    results = [run(fault, args) for fault in args.faults.split(",")]
    peer = next((r["seconds"] for r in results if r["fault"] == "none"), None)
    print(
        f"{args.jobs} reference trainings (vocab {args.vocab_size}, 20,000 words each), 2"
        f" workers; resend after {args.resend_after:g} s, stale after {args.stale_after:g} s"
    )
    print("| fault | seconds to every job final | vs no fault | how the jobs ended |")
    print("|---|---|---|---|")
    for r in results:
        ratio = f"{r['seconds'] / peer:.2f}x" if peer else "-"
        ended = ", ".join(f"{count} {status}" for status, count in sorted(r["statuses"].items()))
        print(f"| {r['fault']} | {r['seconds']:.1f} | {ratio} | {ended} |")


if __name__ == "__main__":
    main()
