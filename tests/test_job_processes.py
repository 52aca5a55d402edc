"""Training children and their supervisors: a child outlives nobody.

The embedded runner and the Celery task both supervise a training child (webapp/jobs/
process.py). If the supervisor is killed with -9, the child must notice at its next stop
check, mark the job interrupted and leave quietly (no traceback, no orphan still training).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select

from tests.waiting import wait_for
from webapp.jobs.process import Supervisor
from webapp.jobs.settings import JobSettings
from webapp.storage.models import JobStatus, Tokenizer, TrainingJob
from webapp.storage.uploads import store_text

SUPERVISOR = """
import sys, time
from webapp.storage.db import Database
from webapp.jobs.process import Supervisor
from webapp.jobs.store import JobStore

store = JobStore(Database(sys.argv[1]))
job_id = int(sys.argv[2])
assert store.claim(job_id, stale_after=0)
child = Supervisor(store, interval=0.05, kill_after=1.0).spawn(job_id)
print(child.process.pid, flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie nobody reaped counts: it runs no code any more)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def long_job(app, random_words) -> int:
    """A queued job with minutes of work in it: the reference trainer recounts every pair per
    merge."""
    corpus, _ = store_text(
        app.extensions["bpe_db"],
        random_words(60000),
        name="w",
        tmp_dir=app.config["UPLOAD_TMP_DIR"],
    )
    settings = JobSettings(mode="chunked", trainer="reference", vocab_size=20000)
    return app.extensions["bpe_jobs"].store.submit_many(corpus.id, [settings])[0]


def test_a_child_whose_supervisor_is_killed_exits_quietly(app, random_words):
    database = app.extensions["bpe_db"]
    job_id = long_job(app, random_words)
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, database.url, str(job_id)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child_pid = int(supervisor.stdout.readline())

    def merges_done() -> int:
        with database.read_scope() as session:
            return session.get_one(TrainingJob, job_id).merges_done

    wait_for(lambda: merges_done() > 0)
    os.kill(supervisor.pid, signal.SIGKILL)
    wait_for(lambda: gone(child_pid), timeout=30)
    # stderr closes only once the child, which shares it, has gone too.
    _, stderr = supervisor.communicate(timeout=30)
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    with database.read_scope() as session:
        job = session.get_one(TrainingJob, job_id)
        assert job.status == "interrupted" and "Run it again" in (job.error or "")
        assert session.scalar(select(func.count()).select_from(Tokenizer)) == 0


def test_a_training_child_runs_at_the_configured_lower_priority(app, random_words):
    """Requests come before training (BPE_JOBS_NICE): the child, and so the chunk-counting
    helpers it starts, run that much nicer than the process that supervises them."""
    assert app.config["JOBS_NICE"] == 10  # the default
    store = app.extensions["bpe_jobs"].store
    job_id = long_job(app, random_words)
    assert store.claim(job_id, stale_after=0)
    supervisor = Supervisor(store, interval=0.05, kill_after=1.0, niceness=app.config["JOBS_NICE"])
    child = supervisor.spawn(job_id)
    try:
        wait_for(lambda: store.status(job_id) == JobStatus.RUNNING and not gone(child.process.pid))
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        expected = min(mine + 10, 19)
        wait_for(lambda: os.getpriority(os.PRIO_PROCESS, child.process.pid) == expected)
    finally:
        wait_for(lambda: supervisor.look(child, cancel=True), timeout=30)
