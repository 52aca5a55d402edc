"""Stopping the README's server (gunicorn, `make run`'s command) while a job trains prints
nothing alarming: no "leaked semaphore objects" from multiprocessing's resource tracker, no
traceback from the training child, and the job is left `interrupted` (it can be run again).

Ctrl-C in a terminal signals every process of the foreground group (the master, its worker,
the worker's training child and the resource tracker), so the test starts the server in a
group of its own and signals the group the same way. The warning is printed by the tracker
when it exits, after the server, so the test waits for the whole group to be gone.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.readme_server import start_readme_server
from tests.waiting import free_port, wait_for, wait_for_server

pytestmark = [pytest.mark.slow, pytest.mark.embedded_only]


def words_text(n: int = 60_000) -> str:
    rng = random.Random(12)
    syllables = ["ka", "lo", "mi", "ten", "ra", "su", "vo", "ne", "pi", "dor"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(3000)]
    return " ".join(rng.choice(words) for _ in range(n)) + "\n"


class Server:
    """The Makefile's gunicorn command in a process group of its own, stderr to a file."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.database = tmp / "served.sqlite3"
        env = {
            "PORT": str(self.port),
            "DATABASE_URL": f"sqlite:///{self.database}",
            "BPE_UPLOAD_TMP_DIR": str(tmp / "uploads"),
            "BPE_JOBS_EXECUTION": "thread",
        }
        self.log_path = tmp / "server.err"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stderr()
        self.process = start_readme_server(
            env, stdout=subprocess.DEVNULL, stderr=self.log, own_session=True
        )
        self.group = self.process.pid
        wait_for_server(lambda: urllib.request.urlopen(self.base + "/", timeout=10).read())

    def fetch(self, path: str, body: bytes | None = None, headers=None) -> tuple[str, bytes]:
        request = urllib.request.Request(self.base + path, data=body, headers=headers or {})
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.url, response.read()

    def start_slow_job(self) -> str:
        """A naive job on the reference trainer (a full recount per merge): seconds of merging."""
        body = json.dumps({"name": "slow", "text": words_text()}).encode()
        _, reply = self.fetch("/api/corpora", body, {"Content-Type": "application/json"})
        corpus = json.loads(reply)
        self.owner = {"Authorization": f"Bearer {corpus['owner_token']}"}
        settings = {"mode": "naive", "vocab_size": 3000, "trainer": "reference"}
        _, reply = self.fetch(
            f"/api/corpora/{corpus['slug']}/jobs",
            json.dumps(settings).encode(),
            {**self.owner, "Content-Type": "application/json"},
        )
        return json.loads(reply)["api_url"].removeprefix(self.base)

    def job(self, api_path: str) -> dict:
        return json.loads(self.fetch(api_path, headers=self.owner)[1])

    def group_alive(self) -> bool:
        try:
            os.killpg(self.group, 0)
        except ProcessLookupError:
            return False
        return True

    def stderr(self) -> str:
        self.log.close()
        return self.log_path.read_text(errors="replace")

    def kill_everything(self) -> None:
        if self.group_alive():
            os.killpg(self.group, signal.SIGKILL)
        self.process.wait(30)


def merging(server: Server, job: str) -> bool:
    # Past the child's start-up (imports) and into the training itself.
    return server.job(job)["phase"] == "merging"


def job_status_in(database: Path, job_id: int) -> str:
    import sqlite3

    with sqlite3.connect(database) as db:
        return db.execute("SELECT status FROM training_jobs WHERE id = ?", (job_id,)).fetchone()[0]


def test_ctrl_c_while_a_job_trains_prints_no_leak_and_no_traceback(tmp_path):
    server = Server(tmp_path)
    try:
        job = server.start_slow_job()
        wait_for(lambda: merging(server, job), timeout=120)
        os.killpg(server.group, signal.SIGINT)  # what Ctrl-C in the terminal does
        server.process.wait(60)
        wait_for(lambda: not server.group_alive(), timeout=60)  # the tracker has exited too
    finally:
        server.kill_everything()
    stderr = server.stderr()
    assert server.process.returncode == 0, stderr[-2000:]
    assert "leaked semaphore" not in stderr, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert job_status_in(server.database, int(job.rsplit("/", 1)[1])) == "interrupted"


def test_a_worker_killed_mid_job_leaves_the_resource_tracker_nothing_to_clean(tmp_path):
    """However the worker ends (here kill -9, as gunicorn does to one past its graceful
    timeout), nothing it held is left registered with multiprocessing's resource tracker."""
    server = Server(tmp_path)
    try:
        job = server.start_slow_job()
        wait_for(lambda: merging(server, job), timeout=120)
        # make run starts a worker per core; the one running the jobs has the tracker
        worker, tracker = wait_for(lambda: _runner_worker(server.process.pid), timeout=30)
        os.kill(worker, signal.SIGKILL)
        # The tracker exits once the worker and its training child are gone (the child sees
        # its supervisor gone at its next stop check); that is when it would warn.
        wait_for(lambda: not Path(f"/proc/{tracker}").exists(), timeout=60)
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(60)
    finally:
        server.kill_everything()
    stderr = server.stderr()
    assert "leaked semaphore" not in stderr, stderr[-2000:]


def _runner_worker(master: int) -> tuple[int, int] | None:
    """(worker pid, its resource tracker's pid) for the gunicorn worker that runs the jobs."""
    workers = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    for worker in map(int, workers):
        tracker = _tracker_of(worker)
        if tracker is not None:
            return worker, tracker
    return None


def _tracker_of(pid: int) -> int | None:
    """The resource tracker a process started (from any of its threads: the job runner's)."""
    children = [
        child
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]
    for child in children:
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"resource_tracker" in cmdline:
            return int(child)
    return None
