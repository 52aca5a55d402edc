"""scripts/stack.sh, the whole stack on one machine (docs/operations.md, "Trying it on one
machine"): it starts, a job sent through one web process is trained by the workers and seen
from the other, and `stop` leaves no process behind."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import make_random_words, need_broker
from tests.postgres_cluster import debian_bin
from tests.waiting import wait_for

pytestmark = [pytest.mark.celery, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "scripts" / "stack.sh"


def four_free_ports() -> int:
    """A port P with P..P+3 all free on loopback (the stack's two web, Redis, PostgreSQL)."""
    for base in range(20000, 60000, 97):
        try:
            for port in range(base, base + 4):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no four free ports in a row")


def call(url: str, data: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, json.loads(answer.read())


def stack(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BIN": str(Path(sys.executable).parent)}
    # The stack makes its own services: none of the suite's settings may leak into it.
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "BPE_JOB_BACKEND", "SECRET_KEY"):
        env.pop(name, None)
    return subprocess.run(
        ["sh", str(STACK), *args], env=env, capture_output=True, text=True, timeout=300
    )


def pids(folder: Path) -> list[int]:
    return [int(path.read_text()) for path in folder.glob("*.pid")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def folder():
    """The stack's folder: not under pytest's tmp_path, which the postgres user (the server's,
    as root) may not enter."""
    made = Path(tempfile.mkdtemp(prefix="bpe-stack-"))
    made.chmod(0o755)
    yield made / "stack"
    shutil.rmtree(made, ignore_errors=True)


def test_the_stack_script_starts_trains_and_stops(folder):
    need_broker()  # it makes a Redis of its own; the mark's skip (and CI's failure) all the same
    if debian_bin() is None:
        pytest.skip("needs Debian's PostgreSQL (sh scripts/postgres-test-db.sh installs it)")
    port = four_free_ports()
    started = stack("start", str(folder), str(port))
    try:
        assert started.returncode == 0, started.stderr + started.stdout
        running = pids(folder)
        assert len(running) == 5  # two web, two workers, Redis (PostgreSQL keeps its own)
        first, second = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"
        settings = (folder / "env").read_text()
        assert "BPE_JOB_BACKEND=celery" in settings and "SECRET_KEY=" in settings
        assert (
            "yes"
            in subprocess.run(
                ["redis-cli", "-p", str(port + 2), "config", "get", "appendonly"],
                capture_output=True,
                text=True,
            ).stdout
        )
        # A corpus and a job through the first web process; the workers train it.
        text = make_random_words(3000, seed=61)
        status, corpus = call(first + "/api/corpora", {"name": "stack", "text": text})
        assert status == 201
        token, slug = corpus["owner_token"], corpus["slug"]
        status, queued = call(
            f"{first}/api/corpora/{slug}/jobs", {"mode": "words", "vocab_size": 300}, token
        )
        assert status == 202
        job_url = f"{second}/api/corpora/{slug}/jobs/{queued['id']}"  # seen from the other
        done = wait_for(
            lambda: (
                (job := call(job_url, token=token)[1])["status"] in ("succeeded", "failed") and job
            ),
            timeout=180,
        )
        assert done["status"] == "succeeded", done
        workers = {int(path.read_text()) for path in folder.glob("worker*.pid")}
        assert done["worker"]["pid"] in workers
        for base in (first, second):
            assert call(base + "/readyz")[1] == {"status": "ok"}
    finally:
        stopped = stack("stop", str(folder))
    assert stopped.returncode == 0, stopped.stderr
    assert not [pid for pid in running if alive(pid)]
    assert not (folder / "postgres" / "data" / "postmaster.pid").exists()
