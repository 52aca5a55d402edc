"""Faults on several machines, with real processes: a worker whose clock is wrong, a broker
that lost its messages. The database decides what happened to each job (docs/internals.md,
"Jobs"), so none of them stays queued or is lost.

Like tests/test_celery.py these need TEST_BROKER_URL; a clock test also needs PostgreSQL (on
SQLite every process is its own database clock) and Debian's `faketime`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

import bpe
from tests.conftest import (
    TEST_DATABASE_URL,
    TEST_OWNER_TOKEN,
    CeleryWorker,
    ensure_owner,
    need_broker,
)
from tests.postgres_cluster import PostgresCluster, debian_bin
from tests.relay import Forwarder, through
from tests.waiting import free_port, wait_for
from webapp import create_app, stop_runners
from webapp.jobs.settings import JobSettings
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Tokenizer, TrainingJob, db_now
from webapp.storage.uploads import store_text

pytestmark = pytest.mark.celery

STALE_AFTER = 3.0  # seconds: a 40 s skew is far past it


class Redis:
    """A Redis server of this test's own (Debian's defaults for persistence: none kept here),
    so killing it loses nobody else's messages."""

    def __init__(self, tmp_path: Path) -> None:
        need_broker()  # the same skip (and CI failure) as every Celery test when Redis is missing
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tmp_path
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port)]
        options = ["--save", "", "--appendonly", "no", "--dir", str(self.dir)]
        self.process = subprocess.Popen([*command, *options], stdout=subprocess.DEVNULL)
        wait_for(lambda: socket.create_connection(("127.0.0.1", self.port)), ignore=(OSError,))

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


@pytest.fixture
def redis(tmp_path):
    server = Redis(tmp_path)
    yield server
    server.kill()


# A web process on the celery backend that sweeps for lost jobs twice a second.
WEB_SETTINGS = {
    "JOB_BACKEND": "celery",
    "JOBS_EXECUTION": "thread",
    "JOBS_PROGRESS_INTERVAL": 0.1,
    "JOBS_STALE_AFTER": STALE_AFTER,
    "JOBS_SWEEP_INTERVAL": 0.5,
    "JOBS_RESEND_AFTER": 2.0,
    "JOBS_KILL_AFTER": 600.0,
}


@pytest.fixture
def web(app_config):
    app_config.update(WEB_SETTINGS, CELERY_BROKER_URL=need_broker())
    app_config.setdefault("JOB_QUEUE", f"bpe-test-{os.urandom(6).hex()}")
    app = create_app(app_config, run_jobs=True)
    yield app
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


def job(app, job_id: int) -> TrainingJob:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.get_one(TrainingJob, job_id)


def submit(app, text: str, **settings) -> int:
    corpus, _ = store_text(
        app.extensions["bpe_db"],
        text,
        name="c",
        tmp_dir=app.config["UPLOAD_TMP_DIR"],
        owner_id=ensure_owner(app, TEST_OWNER_TOKEN),
    )
    return app.extensions["bpe_jobs"].submit(corpus.id, JobSettings(**settings))


@pytest.mark.database("postgresql")
def test_a_worker_whose_clock_is_40_s_behind_keeps_its_job(web, celery_workers, random_words):
    if shutil.which("faketime") is None:
        pytest.skip("needs Debian's faketime (apt-get install faketime)")
    job_id = submit(web, random_words(60000), trainer="reference", vocab_size=20000)
    worker = celery_workers(wrapper=["faketime", "-f", "-40s"])
    wait_for(lambda: job(web, job_id).merges_done > 0 or job(web, job_id).finished, timeout=60)
    # The worker's own clock really is behind: its "ready" line is stamped 40 s ago.
    [ready] = [one for one in log_lines(worker) if one["message"].endswith(" ready.")]
    stamp = datetime.fromisoformat(ready["timestamp"])
    assert 35 < (datetime.now(UTC) - stamp).total_seconds() < 90, ready
    time.sleep(4 * STALE_AFTER)  # many sweeps, each past the stale limit by the worker's clock
    now = job(web, job_id)
    assert now.status == "running", now.error
    with web.extensions["bpe_db"].read_scope() as session:
        clock = session.execute(select(db_now())).scalar_one()
    assert abs((clock - now.heartbeat_at).total_seconds()) < STALE_AFTER
    assert web.extensions["bpe_jobs"].request_cancel(job_id)
    wait_for(lambda: job(web, job_id).status == "cancelled", timeout=30)
    assert wait_for(lambda: outcomes(worker).get(job_id)) == "cancelled"


def log_lines(worker) -> list[dict]:
    """The worker's JSON log lines (webapp/logs.py); anything else it printed is left out."""
    lines = worker.log_path.read_text().splitlines()
    return [json.loads(one) for one in lines if one.startswith("{")]


def outcomes(worker) -> dict[int, str]:
    """job id -> the outcome the worker logged for it: how its run ended, or `skipped` when
    the worker only dropped copies (a copy resent after the run must not hide how it ended)."""
    found: dict[int, str] = {}
    for one in log_lines(worker):
        if "outcome" in one and (one["outcome"] != "skipped" or one["job_id"] not in found):
            found[one["job_id"]] = one["outcome"]
    return found


def merges_of(app, job_id: int) -> list:
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.get_one(Tokenizer, job(app, job_id).tokenizer_id)
        return load_tokenizer(session, row).merges


def test_jobs_queued_when_redis_is_killed_all_finish(
    redis, app_config, celery_workers, random_words
):
    # What is lost here is the queue, not a worker: the running job's heartbeats go on, so the
    # 3 s window the clock test needs only measures how starved its niced child is on a busy
    # machine (it marked the running job interrupted once at load 5).
    app_config.update(WEB_SETTINGS, CELERY_BROKER_URL=redis.url, JOBS_STALE_AFTER=30.0)
    app_config.setdefault("JOB_QUEUE", f"bpe-test-{os.urandom(6).hex()}")
    app = create_app(app_config, run_jobs=True)
    try:
        texts = [random_words(20000, seed=seed) for seed in (11, 12, 13)]
        worker = celery_workers()
        first = submit(app, texts[0], trainer="reference", vocab_size=420)
        wait_for(lambda: job(app, first).status == "running", timeout=60)
        queued = [submit(app, text, trainer="reference", vocab_size=420) for text in texts[1:]]
        # Their messages wait in Redis behind the running job; kill -9 loses them all.
        redis.kill()
        killed = time.monotonic()
        redis.start()
        ids = [first, *queued]
        wait_for(lambda: all(job(app, one).finished for one in ids), timeout=120)
        print(f"every job final {time.monotonic() - killed:.1f} s after Redis was killed")
        for job_id, text in zip(ids, texts, strict=True):
            assert job(app, job_id).status == "succeeded", job(app, job_id).error
            assert (
                merges_of(app, job_id)
                == bpe.train(text, vocab_size=420, trainer="reference").merges
            )
        # The worker's own line says how each job ended, with its id.
        wait_for(lambda: all(outcomes(worker).get(one) == "succeeded" for one in ids))
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


@pytest.mark.database("postgresql")
def test_a_worker_that_cannot_reach_the_database_keeps_the_job(
    app_config, celery_workers, random_words
):
    """Resending is pushed out of reach: only the worker's own retry can save this job."""
    app_config.update(WEB_SETTINGS, CELERY_BROKER_URL=need_broker(), JOBS_RESEND_AFTER=3600.0)
    app_config.setdefault("JOB_QUEUE", f"bpe-test-{os.urandom(6).hex()}")
    app = create_app(app_config, run_jobs=True)
    relay = Forwarder.to_url(TEST_DATABASE_URL)
    try:
        # The worker reaches PostgreSQL only through the relay; the web process directly.
        worker_config = {**app_config, "DATABASE_URL": through(relay, TEST_DATABASE_URL)}
        log_path = Path(app_config["UPLOAD_TMP_DIR"]).parent / "worker-through-relay.log"
        worker = CeleryWorker(worker_config, concurrency=1, log_path=log_path)
        try:
            relay.stop()  # the database "down" for the worker, as a restart would be
            text = random_words(6000, seed=21)
            job_id = submit(app, text, trainer="reference", vocab_size=300)
            # It took the message and met the database down.
            wait_for(lambda: "OperationalError" in worker.log_path.read_text(), timeout=30)
            assert job(app, job_id).status == "queued"
            relay.open = True
            wait_for(lambda: job(app, job_id).finished, timeout=120)
            assert job(app, job_id).status == "succeeded", job(app, job_id).error
            assert (
                merges_of(app, job_id)
                == bpe.train(text, vocab_size=300, trainer="reference").merges
            )
        finally:
            worker.stop()
    finally:
        relay.close()
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


def test_a_job_longer_than_the_redelivery_timeout_runs_once(web, celery_workers, random_words):
    """Redis hands an unacknowledged message to another worker after the visibility timeout
    (BPE_JOBS_REDELIVER_AFTER, 2 s here): a job still running then, its heartbeat fresh, is
    left to the worker running it, and the second worker drops its copy."""
    redeliver = {"BPE_JOBS_REDELIVER_AFTER": "2"}
    job_id = submit(web, random_words(20000, seed=31), trainer="reference", vocab_size=1500)
    first = celery_workers(env=redeliver)
    wait_for(lambda: job(web, job_id).merges_done > 0, timeout=60)
    time.sleep(3)  # past the timeout: the message is "lost" to the broker
    # A worker restores timed-out messages as it starts (kombu's Redis transport), and takes
    # this one: the first is busy (prefetch 1).
    second = celery_workers(env=redeliver)
    wait_for(lambda: job_id in outcomes(second), timeout=60)
    assert outcomes(second)[job_id] == "skipped"
    assert job(web, job_id).status == "running"  # the copy came while the job ran
    wait_for(lambda: job(web, job_id).finished, timeout=300)
    done = job(web, job_id)
    assert done.status == "succeeded", done.error
    assert done.worker_pid == first.process.pid  # never taken over
    assert wait_for(lambda: outcomes(first).get(job_id)) == "succeeded"
    with web.extensions["bpe_db"].read_scope() as session:
        assert session.execute(select(func.count()).select_from(Tokenizer)).scalar_one() == 1


@pytest.fixture
def own_postgres():
    """A PostgreSQL server this test may restart (tests/postgres_cluster.py)."""
    bin_dir = debian_bin()
    if bin_dir is None:
        pytest.skip("needs Debian's PostgreSQL (sh scripts/postgres-test-db.sh installs it)")
    cluster = PostgresCluster(bin_dir)
    yield cluster
    cluster.remove()


@pytest.mark.slow
@pytest.mark.database("postgresql")  # a PostgreSQL fault: the runs on PostgreSQL include it
def test_jobs_running_and_queued_when_postgresql_restarts_all_end(
    own_postgres, app_config, celery_workers, random_words
):
    app_config.update(
        WEB_SETTINGS,
        DATABASE_URL=own_postgres.url,
        CELERY_BROKER_URL=need_broker(),
        JOBS_PER_OWNER=8,
        JOBS_STALE_AFTER=15.0,  # a loaded machine's child may take seconds to start beating
    )
    app_config.setdefault("JOB_QUEUE", f"bpe-test-{os.urandom(6).hex()}")
    app = create_app(app_config, run_jobs=True)
    try:
        texts = [random_words(20000, seed=seed) for seed in range(41, 47)]
        workers = [celery_workers(), celery_workers()]
        ids = [submit(app, text, trainer="reference", vocab_size=420) for text in texts]
        # Some running, the rest waiting for a worker: the restart meets both.
        wait_for(lambda: job(app, ids[0]).merges_done > 0, timeout=60)
        client = app.test_client()
        own_postgres.stop()  # a restart: every connection dropped, new ones refused
        down = client.get("/readyz")
        assert down.status_code == 503 and "database" in " ".join(down.get_json()["problems"])
        time.sleep(5)
        own_postgres.start()
        back = time.monotonic()
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=30)
        # Every job final: running ones interrupted (or finished), queued ones resent and run.
        wait_for(lambda: all(job(app, one).finished for one in ids), timeout=180)
        print(f"every job final {time.monotonic() - back:.1f} s after PostgreSQL came back")
        ended = {one: job(app, one).status for one in ids}
        print("how they ended:", ended)
        assert set(ended.values()) <= {"succeeded", "interrupted", "failed"}, ended
        succeeded = [n for n, one in enumerate(ids) if ended[one] == "succeeded"]
        assert len(succeeded) >= 4, ended  # at most the two running ones lost
        for n in succeeded:
            expected = bpe.train(texts[n], vocab_size=420, trainer="reference").merges
            assert merges_of(app, ids[n]) == expected
        for worker in workers:  # the workers outlived the restart
            assert worker.process.poll() is None
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()
