"""A job kind plugs into the one job machinery without an edit to webapp/jobs: the line-count
kind of tests/toy_kind.py, registered through BPE_JOB_KINDS only, is queued, claimed, run in a
supervised child process, cancelled and recovered by the embedded runner, and run by a real
Celery worker through the one task, exactly as trainings and evaluations are."""

from __future__ import annotations

import multiprocessing
import os

import pytest
from sqlalchemy import select

from tests import toy_kind
from tests.conftest import need_broker
from tests.waiting import wait_for
from webapp import config, create_app, stop_runners
from webapp.jobs import JobKinds
from webapp.jobs.kind import load_kind
from webapp.jobs.task import TRAINING
from webapp.refusals import UserError
from webapp.storage.models import EvaluationRow, TrainingJob
from webapp.storage.uploads import store_text

TEXT = "".join(f"line {i} of the corpus\n" for i in range(120))


def corpus_id(app, text: str = TEXT) -> int:
    row, _ = store_text(
        app.extensions["bpe_db"], text, name="lines", tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    return row.id


def toy_row(app, job_id: int) -> toy_kind.LineCountJob:
    return toy_kind.row(app.extensions["bpe_db"], job_id)


@pytest.fixture(autouse=True)
def no_toy_table_left(app_config):
    yield
    toy_kind.drop_table(app_config["DATABASE_URL"])


@pytest.fixture
def toy_config(app_config):
    """The app's config with the toy kind named the way a deployment names one."""
    app_config["JOB_KINDS"] = config.from_env({"BPE_JOB_KINDS": toy_kind.SPEC})["JOB_KINDS"]
    return app_config


@pytest.fixture
def embedded(toy_config):
    """An app whose embedded runner runs its jobs for real: a thread driving child processes."""
    toy_config.update(JOB_BACKEND="embedded", JOBS_EXECUTION="thread", JOBS_PROGRESS_INTERVAL=0.05)
    app = create_app(toy_config)
    toy_kind.create_table(app.extensions["bpe_db"])
    app.extensions["bpe_jobs"].start()
    yield app
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


def test_the_embedded_runner_runs_a_new_kind_in_a_child_process(embedded):
    backend = embedded.extensions["bpe_jobs"]
    assert backend.kinds["line-count"] is toy_kind.LINE_COUNT
    job_id = toy_kind.queue(backend.database, corpus_id(embedded), pause=0.002)
    backend.queued("line-count", [job_id])
    names: set[str] = set()

    def finished() -> bool:
        names.update(child.name for child in multiprocessing.active_children())
        return toy_row(embedded, job_id).status not in ("queued", "running")

    wait_for(finished, timeout=60, interval=0.01)
    done = toy_row(embedded, job_id)
    assert done.status == "succeeded", done.error
    assert done.lines == TEXT.count("\n") == 120
    assert done.heartbeat_at is not None and done.started_at is not None
    assert f"bpe-count-lines-{job_id}" in names  # the runner's child, not the runner's thread


def test_a_cancel_reaches_a_new_kind_through_its_row(embedded):
    backend = embedded.extensions["bpe_jobs"]
    job_id = toy_kind.queue(backend.database, corpus_id(embedded), pause=0.5)  # a minute
    backend.queued("line-count", [job_id])
    wait_for(lambda: toy_row(embedded, job_id).lines_done > 0, timeout=30)
    assert backend.cancel("line-count", job_id)
    wait_for(lambda: toy_row(embedded, job_id).status == "cancelled", timeout=10)
    assert toy_row(embedded, job_id).lines is None
    assert not backend.cancel("line-count", job_id)  # finished: nothing to ask


def test_a_new_kinds_job_left_running_is_interrupted_when_a_runner_starts(toy_config):
    toy_config.update(JOB_BACKEND="embedded", JOBS_EXECUTION="thread")
    app = create_app(toy_config)
    try:
        database = app.extensions["bpe_db"]
        toy_kind.create_table(database)
        job_id = toy_kind.queue(database, corpus_id(app))
        assert app.extensions["bpe_jobs"].rows["line-count"].claim(job_id, stale_after=30)
        app.extensions["bpe_jobs"].start()  # as a restarted server: the old runner is gone
        wait_for(lambda: toy_row(app, job_id).status != "running", timeout=10)
        assert toy_row(app, job_id).status == "interrupted"
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


def test_the_manual_execution_steps_a_new_kind_in_the_test(toy_config):
    app = create_app(toy_config)  # manual, on whichever backend the run uses
    try:
        database = app.extensions["bpe_db"]
        toy_kind.create_table(database)
        job_id = toy_kind.queue(database, corpus_id(app, "one\ntwo\n"))
        app.extensions["bpe_jobs"].queued("line-count", [job_id])
        assert toy_row(app, job_id).status == "queued"  # waits for the test
        assert app.extensions["bpe_jobs"].run_next("line-count") == job_id
        assert toy_row(app, job_id).lines == 2
        assert app.extensions["bpe_jobs"].run_next("line-count") is None
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


@pytest.mark.celery
def test_a_celery_worker_runs_a_new_kind_through_the_one_task(
    toy_config, celery_workers, monkeypatch
):
    # The worker reads the same environment as the web app: that is how it learns the kind.
    monkeypatch.setenv("BPE_JOB_KINDS", toy_kind.SPEC)
    toy_config.update(
        JOB_BACKEND="celery",
        CELERY_BROKER_URL=need_broker(),
        JOB_QUEUE=f"bpe-test-{os.urandom(6).hex()}",
        JOBS_EXECUTION="thread",
        JOBS_PROGRESS_INTERVAL=0.05,
    )
    web = create_app(toy_config, run_jobs=True)
    try:
        database = web.extensions["bpe_db"]
        toy_kind.create_table(database)
        job_id = toy_kind.queue(database, corpus_id(web))
        web.extensions["bpe_jobs"].queued("line-count", [job_id])
        assert toy_row(web, job_id).status == "queued"  # the web process only sent the id
        worker = celery_workers()
        wait_for(lambda: toy_row(web, job_id).status not in ("queued", "running"), timeout=90)
        done = toy_row(web, job_id)
        assert done.status == "succeeded", done.error
        assert done.lines == 120
        assert "bpe.run" in worker.log_path.read_text()
        # A duplicate message finds the job finished and runs nothing.
        assert not web.extensions["bpe_jobs"].rows["line-count"].claim(job_id, stale_after=0)
    finally:
        stop_runners(web)
        web.extensions["bpe_db"].dispose()


# ----- the registry ----------------------------------------------------------------------------
def test_the_registry_names_what_it_does_not_know_and_refuses_two_of_a_name():
    kinds = JobKinds([TRAINING])
    with pytest.raises(KeyError, match="no job kind 'line-count'.*known: training"):
        kinds["line-count"]
    kinds.register(load_kind(toy_kind.SPEC))
    assert kinds["line-count"] is toy_kind.LINE_COUNT
    impostor = toy_kind.LineCountKind()
    with pytest.raises(ValueError, match="two job kinds are named 'line-count'"):
        kinds.register(impostor)
    with pytest.raises(ValueError, match="package.module:NAME"):
        load_kind("tests.toy_kind")
    with pytest.raises(ValueError, match="not a JobKind"):
        load_kind("tests.toy_kind:SPEC")


def test_the_old_name_of_the_execution_setting_still_works(app_config, monkeypatch):
    app_config.pop("JOBS_EXECUTION")
    app_config["JOBS_MODE"] = "inline"
    app = create_app(app_config)
    assert app.config["JOBS_EXECUTION"] == "inline" == app.extensions["bpe_jobs"].execution
    app.extensions["bpe_db"].dispose()
    monkeypatch.setenv("BPE_JOBS_MODE", "manual")
    assert config.from_env(os.environ)["JOBS_EXECUTION"] == "manual"
    monkeypatch.setenv("BPE_JOBS_EXECUTION", "inline")  # the new name wins
    assert config.from_env(os.environ)["JOBS_EXECUTION"] == "inline"


def test_a_broker_out_of_reach_leaves_no_job_of_any_kind_waiting(app_config, make_tokenizer):
    """The one task's sending fails for every kind alike: a 503, and a row that says what
    happened in its kind's words instead of waiting for a worker that will never hear of it."""
    tok = make_tokenizer()
    app_config.update(
        JOB_BACKEND="celery", CELERY_BROKER_URL="redis://127.0.0.1:1/0", JOBS_EXECUTION="thread"
    )
    app = create_app(app_config)
    try:
        backend = app.extensions["bpe_jobs"]
        with pytest.raises(UserError, match="cannot be reached") as refused:
            backend.submit(tok.corpus_id, {"mode": "naive", "vocab_size": 300})
        assert refused.value.status == 503
        with app.extensions["bpe_db"].read_scope() as session:
            assert session.scalars(select(TrainingJob)).one().status == "cancelled"  # rerun it
        with pytest.raises(UserError, match="cannot be reached"):
            app.extensions["bpe_evaluations"].submit(tokenizer_id=tok.id, corpus_id=tok.corpus_id)
        with app.extensions["bpe_db"].read_scope() as session:
            evaluation = session.scalars(select(EvaluationRow)).one()
            assert evaluation.status == "failed" and "evaluate again" in (evaluation.error or "")
    finally:
        app.extensions["bpe_db"].dispose()
