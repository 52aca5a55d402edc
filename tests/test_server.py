"""Who runs the jobs, and the README's production server.

The embedded runner is owned explicitly: only a process that asks for it (`webapp.wsgi`, the
README's server) and holds the runner lock runs, recovers or interrupts jobs.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from flask import Flask

from tests.readme_server import BIN, makefile_server_line, start_readme_server
from tests.waiting import free_port, wait_for_server
from webapp import create_app, stop_runners
from webapp.storage.models import EvaluationRow, TrainingJob, utcnow


@contextmanager
def serving(app_config: dict) -> Iterator[Flask]:
    """An app built as a serving process builds it (run_jobs=True: a gunicorn worker), its
    runners stopped and its database closed when the block ends, as when that process exits."""
    app = create_app(app_config, run_jobs=True)
    try:
        yield app
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


def running_job(app, corpus_id: int) -> int:
    """A job row as a live runner leaves it mid-training."""
    with app.extensions["bpe_db"].session_scope() as session:
        job = TrainingJob(corpus_id=corpus_id, settings="{}", status="running", started_at=utcnow())
        session.add(job)
        session.flush()
        return job.id


def job_status(app, job_id: int) -> str:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.get(TrainingJob, job_id).status


@pytest.mark.embedded_only
def test_a_second_serving_process_leaves_the_runners_jobs_alone(app_config, make_corpus, app):
    app_config["JOBS_EXECUTION"] = "thread"
    with serving(app_config) as owner:
        job_id = running_job(owner, make_corpus().id)
        with serving(app_config) as second:  # e.g. a second gunicorn worker
            assert second.extensions["bpe_jobs"]._thread is None
            assert job_status(second, job_id) == "running"  # not marked interrupted
    # Once the owner is gone, the next serving process takes over and recovers the job.
    with serving(app_config) as successor:
        assert successor.extensions["bpe_jobs"]._thread is not None
        assert job_status(successor, job_id) == "interrupted"


def running_evaluation(app, tokenizer) -> int:
    with app.extensions["bpe_db"].session_scope() as session:
        row = EvaluationRow(
            tokenizer_id=tokenizer.id,
            corpus_id=tokenizer.corpus_id,
            status="running",
            started_at=utcnow(),
        )
        session.add(row)
        session.flush()
        return row.id


def evaluation_status(app, evaluation_id: int) -> str:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.get_one(EvaluationRow, evaluation_id).status


@pytest.mark.embedded_only  # with BPE_JOB_BACKEND=celery a worker runs them, no thread
def test_one_serving_process_of_several_runs_the_evaluations(app_config, make_tokenizer, app):
    """gunicorn workers each build the app with run_jobs=True: the job runner, which runs the
    evaluations too, is one of them (its file lock), so a second worker starting never marks
    the first's running evaluation interrupted; once the first is gone, the next one recovers
    it."""
    app_config["JOBS_EXECUTION"] = "thread"
    with serving(app_config) as first:
        evaluation_id = running_evaluation(first, make_tokenizer())
        with serving(app_config) as second:
            assert second.extensions["bpe_jobs"]._thread is None
            assert evaluation_status(second, evaluation_id) == "running"
    with serving(app_config) as successor:
        assert successor.extensions["bpe_jobs"]._thread is not None
        assert evaluation_status(successor, evaluation_id) == "interrupted"


def test_flask_commands_never_touch_jobs(app, make_corpus):
    job_id = running_job(app, make_corpus().id)
    env = {
        **os.environ,
        # Under the Celery backend every web process must share a key (docs/operations.md).
        "SECRET_KEY": "a-key-shared-by-every-process",
        "DATABASE_URL": app.config["DATABASE_URL"],
        "CELERY_BROKER_URL": app.config["CELERY_BROKER_URL"],
    }
    for command in (["db-upgrade"], ["routes"]):
        result = subprocess.run(
            [str(BIN / "flask"), "--app", "webapp", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert job_status(app, job_id) == "running", command


def fetch(
    url: str,
    data: bytes | None = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
):
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": content_type, **(headers or {})}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, dict(response.headers), response.read()


@pytest.mark.slow
@pytest.mark.embedded_only  # the README's run command is the embedded default
def test_the_readme_server_serves_with_gunicorn_and_runs_jobs(tmp_path):
    assert makefile_server_line().startswith("$(BIN)/gunicorn ")
    port = free_port()
    env = {
        "PORT": str(port),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'served.sqlite3'}",
        "BPE_JOBS_EXECUTION": "thread",
        # Several workers on a fresh database, whatever this machine's core count: the schema
        # is made once (in the master), one worker runs the job, any worker takes the requests.
        "WEB_CONCURRENCY": "3",
    }
    server = start_readme_server(env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        status, headers, _ = wait_for_server(lambda: fetch(base + "/"))
        assert status == 200 and headers["Server"].startswith("gunicorn")
        body = json.dumps({"name": "t", "text": "low lower lowest newer newest " * 20}).encode()
        _, _, reply = fetch(base + "/api/corpora", body)
        slug = json.loads(reply)["slug"]
        # The upload made an owner; a script proves it with the token (no CSRF token then).
        owner = {"Authorization": f"Bearer {json.loads(reply)['owner_token']}"}
        form = b"mode=chunked&vocab_size=270&trainer=reference"
        request = urllib.request.Request(f"{base}/c/{slug}/train", data=form, headers=owner)
        with urllib.request.urlopen(request, timeout=30) as response:
            job_url = response.url
        wait_for_server(
            lambda: b'data-status="succeeded"' in fetch(job_url + "/status", headers=owner)[2]
        )
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in stderr
    assert stderr.count(b"Booting worker with pid") == 3
