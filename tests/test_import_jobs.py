"""Imports as jobs: the form answers at once with the job's page, the file is read and stored in
a child process of the embedded runner (or by a Celery worker), a refused file ends the job
with the library's reason, a cancel stops it, queued or running, with no tokeniser left, and
the API queues what is too large to import within its request."""

from __future__ import annotations

import io
import multiprocessing
import os

import pytest
from sqlalchemy import func, select

from tests.conftest import TEST_OWNER_TOKEN, ensure_owner, need_broker
from tests.reference_files import reference_dir
from tests.test_owners_imports import RANK_FILE  # a small rank file the form takes
from tests.waiting import wait_for
from webapp import create_app, stop_runners
from webapp.storage.models import ImportJob, JobStatus, Tokenizer


def post_import(client, raw: bytes = RANK_FILE, name: str = "small.tiktoken", **form):
    return client.post(
        "/import",
        data={"file": (io.BytesIO(raw), name), "pattern": "gpt2", **form},
        content_type="multipart/form-data",
    )


def job_row(app, job_id: int) -> ImportJob:
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.get_one(ImportJob, job_id)
        session.refresh(row, ["data"])
        session.expunge(row)
        return row


def tokenizers(app) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.scalar(select(func.count()).select_from(Tokenizer)) or 0


def job_id_of(response) -> int:
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return int(response.headers["Location"].rsplit("/", 1)[1])


@pytest.fixture
def running_app(app_config):
    """An app whose embedded runner runs its jobs for real: a thread driving child processes."""
    app_config.update(JOB_BACKEND="embedded", JOBS_EXECUTION="thread", JOBS_PROGRESS_INTERVAL=0.05)
    app = create_app(app_config)
    app.extensions["bpe_jobs"].start()
    yield app
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


@pytest.mark.embedded_only
def test_the_form_answers_at_once_and_a_child_process_imports(running_app):
    client = running_app.test_client()
    ensure_owner(running_app, TEST_OWNER_TOKEN)
    gpt2 = reference_dir() / "gpt2.tiktoken"
    response = post_import(
        client, gpt2.read_bytes(), "gpt2.tiktoken", sidecar=(io.BytesIO(b""), "")
    )
    job_id = job_id_of(response)
    page = client.get(f"/imports/{job_id}").get_data(as_text=True)
    assert "Importing gpt2.tiktoken" in page
    names: set[str] = set()

    def finished() -> bool:
        names.update(child.name for child in multiprocessing.active_children())
        return job_row(running_app, job_id).finished

    wait_for(finished, timeout=120, interval=0.01)
    done = job_row(running_app, job_id)
    assert done.status == "succeeded", done.error
    assert done.data is None  # the file is not kept once it is read
    assert f"bpe-import-{job_id}" in names  # a child of the runner, not the request
    page = client.get(f"/imports/{job_id}").get_data(as_text=True)
    with running_app.extensions["bpe_db"].read_scope() as session:
        tok = session.get_one(Tokenizer, done.tokenizer_id)
        assert tok.source_filename == "gpt2.tiktoken" and tok.merge_count == 50000
        assert f'href="/t/{tok.slug}"' in page and "hx-trigger" not in page  # polling stopped


@pytest.mark.embedded_only
def test_a_refused_file_ends_the_job_with_the_reason(running_app):
    client = running_app.test_client()
    job_id = job_id_of(post_import(client, b"IQ== 0\n"))
    wait_for(lambda: job_row(running_app, job_id).finished, timeout=60)
    done = job_row(running_app, job_id)
    assert done.status == "failed" and "lacks 255 of the 256 single bytes" in (done.error or "")
    assert done.data is None and tokenizers(running_app) == 0
    assert "lacks 255 of the 256" in client.get(f"/imports/{job_id}").get_data(as_text=True)


@pytest.mark.embedded_only
def test_a_cancel_stops_a_running_import_and_leaves_no_tokenizer(running_app):
    client = running_app.test_client()
    o200k = reference_dir() / "o200k_base.tiktoken"
    job_id = job_id_of(post_import(client, o200k.read_bytes(), "o200k_base.tiktoken"))
    wait_for(lambda: job_row(running_app, job_id).status == "running", timeout=60, interval=0.01)
    page = client.get(f"/imports/{job_id}", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert 'data-status="running"' in page and "hx-trigger" in page
    cancelled = client.post(f"/imports/{job_id}/cancel")
    assert cancelled.status_code == 303
    wait_for(lambda: job_row(running_app, job_id).finished, timeout=60)
    assert job_row(running_app, job_id).status == "cancelled"
    assert tokenizers(running_app) == 0


def test_a_queued_import_cancelled_never_runs(app, client, job_runner):
    rows = job_runner.rows["import"]
    owner_id = ensure_owner(app, TEST_OWNER_TOKEN)
    job_id = rows.submit(RANK_FILE, filename="q.tiktoken", pattern="gpt2", owner_id=owner_id)
    assert client.post(f"/imports/{job_id}/cancel").status_code == 303
    assert job_row(app, job_id).status == "cancelled"
    assert job_runner.run_next("import") is None and tokenizers(app) == 0
    assert client.post(f"/imports/{job_id}/cancel").status_code == 303  # finished: no change


def test_a_cancel_between_the_phases_stores_nothing(app, job_runner):
    """The task itself sees a stop after reading the file, before anything is stored."""
    rows = job_runner.rows["import"]
    job_id = rows.submit(RANK_FILE, filename="s.tiktoken", pattern="gpt2")
    assert rows.claim_next() == job_id
    seen = []

    def stop() -> bool:
        seen.append(job_row(app, job_id).phase)
        return len(seen) > 1  # not before reading; at the next look, after it

    status = job_runner.kinds["import"].run(rows, job_id, interval=0.0, stop=stop)
    assert status == JobStatus.CANCELLED and seen == ["reading", "storing"]
    assert job_row(app, job_id).status == "cancelled" and tokenizers(app) == 0


def test_the_api_queues_a_file_too_large_for_its_request(app, client):
    app.config["API_SYNC_IMPORT_BYTES"] = len(RANK_FILE) - 1
    response = client.post(
        "/api/tokenizers/import",
        data={"file": (io.BytesIO(RANK_FILE), "big.tiktoken"), "pattern": "gpt2"},
        content_type="multipart/form-data",
        headers={"Authorization": f"Bearer {TEST_OWNER_TOKEN}"},
    )
    assert response.status_code == 202, response.get_json()
    assert response.headers["Location"] == response.get_json()["api_url"]
    job = client.get(response.headers["Location"]).get_json()  # ran at once in the tests
    assert job["status"] == "succeeded" and job["tokenizer"]["filename"] == "big.tiktoken"
    app.config["API_SYNC_IMPORT_BYTES"] = len(RANK_FILE)
    small = client.post(
        "/api/tokenizers/import",
        data={"file": (io.BytesIO(RANK_FILE), "fits.tiktoken"), "pattern": "gpt2"},
        content_type="multipart/form-data",
        headers={"Authorization": f"Bearer {TEST_OWNER_TOKEN}"},
    )
    assert small.status_code == 201 and small.get_json()["filename"] == "fits.tiktoken"


@pytest.mark.celery
def test_a_celery_worker_runs_an_import(app_config, celery_workers):
    app_config.update(
        JOB_BACKEND="celery",
        CELERY_BROKER_URL=need_broker(),
        JOB_QUEUE=f"bpe-test-{os.urandom(6).hex()}",
        JOBS_EXECUTION="thread",
    )
    web = create_app(app_config, run_jobs=True)
    try:
        client = web.test_client()
        job_id = job_id_of(post_import(client))
        assert job_row(web, job_id).status == "queued"  # the web process only sent the id
        worker = celery_workers()
        wait_for(lambda: job_row(web, job_id).finished, timeout=90)
        done = job_row(web, job_id)
        assert done.status == "succeeded", done.error
        assert tokenizers(web) == 1 and "bpe.run" in worker.log_path.read_text()
        refused = job_id_of(post_import(client, b"not a rank file"))
        wait_for(lambda: job_row(web, refused).finished, timeout=90)
        assert "base64-token rank" in (job_row(web, refused).error or "")
    finally:
        stop_runners(web)
        web.extensions["bpe_db"].dispose()
