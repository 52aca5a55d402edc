"""The wall-time limit on a job (BPE_JOB_MAX_SECONDS): a job still running past it is killed by
its supervisor, whatever it is doing, ends `failed` with the limit named, and its worker takes
the next job. The limit is the machinery's, so a kind the app does not have (tests/toy_kind.py)
gets it on both backends, and so does a training."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from tests import toy_kind
from tests.conftest import need_broker
from tests.waiting import wait_for
from webapp import config, create_app, stop_runners
from webapp.jobs.settings import JobSettings
from webapp.storage.models import TrainingJob
from webapp.storage.uploads import store_text

LIMIT = 1.5  # seconds
# One line per minute, and the toy kind sleeps a whole line before its next stop check: the
# job is as deaf to a polite stop as a split pattern backtracking inside one match.
STUCK = 60.0
TEXT = "".join(f"line {i}\n" for i in range(5))


@pytest.fixture(autouse=True)
def no_toy_table_left(app_config):
    yield
    toy_kind.drop_table(app_config["DATABASE_URL"])


@pytest.fixture
def limited_config(app_config):
    app_config["JOB_KINDS"] = config.from_env({"BPE_JOB_KINDS": toy_kind.SPEC})["JOB_KINDS"]
    app_config["JOBS_MAX_SECONDS"] = LIMIT
    return app_config


def corpus_id(app, text: str = TEXT) -> int:
    row, _ = store_text(
        app.extensions["bpe_db"], text, name="lines", tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    return row.id


def toy_row(app, job_id: int) -> toy_kind.LineCountJob:
    return toy_kind.row(app.extensions["bpe_db"], job_id)


def ended(app, job_id: int) -> bool:
    return toy_row(app, job_id).status not in ("queued", "running")


def assert_stopped_by_the_limit(error: str | None) -> None:
    assert error is not None and error.startswith(f"Stopped: ran past the {LIMIT:g} s limit"), error


def assert_took_the_next(app, stuck: int, after: int) -> None:
    """The slot the stuck job held is free: the job queued behind it starts now (not a minute
    from now, when the stuck one would have ended) and runs to its end."""
    wait_for(lambda: toy_row(app, after).started_at is not None, timeout=30)
    finished_at = toy_row(app, stuck).finished_at
    assert finished_at is not None and toy_row(app, after).started_at >= finished_at
    wait_for(lambda: ended(app, after), timeout=30)
    row = toy_row(app, after)
    if row.status == "failed":
        # Its own child may take longer than the limit to start on a loaded machine (a spawned
        # interpreter imports the app); then it ends the same way, which is the limit working.
        assert_stopped_by_the_limit(row.error)
    else:
        assert row.status == "succeeded", row.error
        assert row.lines == 2


def children_named(name: str) -> list[str]:
    return [c.name for c in multiprocessing.active_children() if c.name == name]


@pytest.mark.embedded_only
def test_the_embedded_runner_kills_a_stuck_job_at_the_limit_and_runs_the_next(limited_config):
    limited_config.update(JOB_BACKEND="embedded", JOBS_EXECUTION="thread")
    app = create_app(limited_config)
    try:
        database = app.extensions["bpe_db"]
        toy_kind.create_table(database)
        stuck = toy_kind.queue(database, corpus_id(app), pause=STUCK)
        after = toy_kind.queue(database, corpus_id(app, "one\ntwo\n"))  # waits for the slot
        app.extensions["bpe_jobs"].start()
        started = time.monotonic()
        wait_for(lambda: ended(app, stuck), timeout=30)
        took = time.monotonic() - started
        row = toy_row(app, stuck)
        assert row.status == "failed"
        assert_stopped_by_the_limit(row.error)
        assert row.lines is None  # nothing recorded as if it had finished
        assert LIMIT <= took < LIMIT + 10, took
        assert not children_named(f"bpe-count-lines-{stuck}")  # the process itself is gone
        assert_took_the_next(app, stuck, after)
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


@pytest.mark.embedded_only
def test_a_training_past_the_limit_is_stopped_with_the_reason_on_its_row(
    limited_config, random_words
):
    limited_config.update(JOB_BACKEND="embedded", JOBS_EXECUTION="thread")
    app = create_app(limited_config)
    try:
        backend = app.extensions["bpe_jobs"]
        toy_kind.create_table(app.extensions["bpe_db"])  # the runner recovers every kind's rows
        # The literal trainer on 60,000 words to 5,000 ids: minutes, far past the limit.
        text = random_words(60000, seed=5)
        job_id = backend.submit(
            corpus_id(app, text), JobSettings(trainer="reference", vocab_size=5000)
        )
        backend.start()

        def finished() -> TrainingJob | None:
            with app.extensions["bpe_db"].read_scope() as session:
                job = session.get_one(TrainingJob, job_id)
                return job if job.finished else None

        started = time.monotonic()
        job = wait_for(finished, timeout=60)
        assert job.status == "failed"
        assert_stopped_by_the_limit(job.error)
        assert job.tokenizer_id is None
        assert time.monotonic() - started < LIMIT + 15
        assert not children_named(f"bpe-train-{job_id}")
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


@pytest.mark.celery
def test_a_celery_worker_kills_a_stuck_job_at_the_limit_and_takes_the_next(
    limited_config, celery_workers, monkeypatch
):
    # The worker is its own process: it reads the limit from the environment, as in production.
    monkeypatch.setenv("BPE_JOB_KINDS", toy_kind.SPEC)
    monkeypatch.setenv("BPE_JOB_MAX_SECONDS", str(LIMIT))
    limited_config.update(
        JOB_BACKEND="celery",
        CELERY_BROKER_URL=need_broker(),
        JOB_QUEUE=f"bpe-test-{os.urandom(6).hex()}",
        JOBS_EXECUTION="thread",
        JOBS_PROGRESS_INTERVAL=0.1,
    )
    web = create_app(limited_config, run_jobs=True)
    try:
        database = web.extensions["bpe_db"]
        toy_kind.create_table(database)
        stuck = toy_kind.queue(database, corpus_id(web), pause=STUCK)
        after = toy_kind.queue(database, corpus_id(web, "one\ntwo\n"))
        web.extensions["bpe_jobs"].queued("line-count", [stuck, after])
        celery_workers()  # one worker, one job at a time
        wait_for(lambda: toy_row(web, stuck).status == "running", timeout=60)
        started = time.monotonic()
        wait_for(lambda: ended(web, stuck), timeout=30)
        assert time.monotonic() - started < LIMIT + 10
        row = toy_row(web, stuck)
        assert row.status == "failed"
        assert_stopped_by_the_limit(row.error)
        assert_took_the_next(web, stuck, after)
    finally:
        stop_runners(web)
        web.extensions["bpe_db"].dispose()
