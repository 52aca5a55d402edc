"""Real threads against a real server: concurrent uploads while a job trains and stores its result.

No request may fail with "database is locked", and every acknowledged upload must be stored
with the sha256 of the bytes that were sent.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import select
from werkzeug.serving import make_server

from tests.conftest import JOB_BACKEND
from webapp import create_app, stop_runners
from webapp.storage.models import Corpus, TrainingJob
from webapp.storage.uploads import store_text


@pytest.fixture
def live_app(app_config, celery_workers):
    app_config.update(JOBS_EXECUTION="thread", JOBS_PROGRESS_INTERVAL=0.05)
    app = create_app(app_config, run_jobs=True)
    if JOB_BACKEND == "celery":
        celery_workers()  # the job trains on a real worker instead
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield app, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


def post(url: str, data: bytes, content_type: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": content_type}
    if token is not None:  # a script proves its owner with a bearer token (no CSRF token then)
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_concurrent_uploads_while_a_job_trains(live_app, random_words):
    app, base = live_app
    database = app.extensions["bpe_db"]
    corpus, _ = store_text(
        database, random_words(150_000, seed=7), name="big", tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    status, reply = post(f"{base}/api/owners", b"{}", "application/json")
    assert status == 201, reply
    token = json.loads(reply)["owner_token"]
    status, _ = post(
        f"{base}/c/{corpus.slug}/train",
        b"mode=chunked&vocab_size=6000&trainer=efficient",
        "application/x-www-form-urlencoded",
        token,
    )
    assert status in (200, 303)
    with database.read_scope() as session:
        job_id = session.scalar(select(TrainingJob.id))

    bodies = [
        f"upload {i}\n".encode() + random_words(3000, seed=100 + i).encode() for i in range(24)
    ]
    bodies += bodies[:4]  # the same bytes again, concurrently: must reuse the rows

    def upload(body: bytes) -> tuple[int, bytes, bytes]:
        status, reply = post(f"{base}/api/corpora?name=c", body, "text/plain", token)
        return status, reply, body

    def job_status() -> str:
        with database.read_scope() as session:
            return session.get(TrainingJob, job_id).status

    deadline = time.monotonic() + 30
    while job_status() != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert job_status() == "running"
    with ThreadPoolExecutor(max_workers=8) as pool:
        # Pages are read the whole time too.
        pages = [pool.submit(urllib.request.urlopen, f"{base}/c/{corpus.slug}") for _ in range(8)]
        results = list(pool.map(upload, bodies))
        assert all(page.result().status == 200 for page in pages)
        # Keep uploading until the job has written its result, so writes overlap that too.
        extra = 0
        while job_status() == "running" and extra < 400:
            batch = [f"extra {extra + i}".encode() * 50 for i in range(8)]
            results += list(pool.map(upload, batch))
            extra += len(batch)

    print("job status when the uploads were done:", job_status())
    for status, reply, body in results:
        assert b"locked" not in reply
        assert status in (200, 201), reply
        answer = json.loads(reply)
        assert answer["sha256"] == hashlib.sha256(body).hexdigest()
    with database.read_scope() as session:
        stored = {row.sha256: row.text for row in session.scalars(select(Corpus))}
    for _, _, body in results:
        digest = hashlib.sha256(body).hexdigest()
        assert digest in stored
        assert hashlib.sha256(stored[digest].encode()).hexdigest() == digest
    assert len(stored) == 24 + 1 + extra

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with database.read_scope() as session:
            job = session.get(TrainingJob, job_id)
        if job.finished:
            break
        time.sleep(0.1)
    assert job.status == "succeeded", job.error
