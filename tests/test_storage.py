"""Storage faults and crash leftovers: temp files of a killed server, a full disk, an unwritable
or corrupt database. Every one answers a clear status (507, 503, a one-line start-up error),
stores nothing half-way, and the app works again once the fault is gone."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from sqlalchemy import func, select

import bpe
from tests.conftest import SAMPLE_TEXT, TEST_OWNER_TOKEN
from webapp import create_app, stop_runners
from webapp.storage.convert import store_tokenizer
from webapp.storage.models import Corpus, Merge, PlaygroundShare, Tokenizer, TrainingJob
from webapp.storage.uploads import normalize_stream

# Raw uploads come from scripts, which have no owner cookie or CSRF token: they prove their
# owner with a bearer token.
BEARER = {"Authorization": f"Bearer {TEST_OWNER_TOKEN}"}


def _files(folder) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_start_up_removes_temp_files_of_a_killed_upload_but_not_of_a_live_one(app_config, tmp_path):
    tmp_dir = str(tmp_path / "uploads-tmp")
    app_config["UPLOAD_TMP_DIR"] = tmp_dir
    # A real upload in another process, killed with SIGKILL half-way through its body.
    script = textwrap.dedent(
        f"""
        import sys, time
        from webapp.storage.uploads import normalize_stream

        class Slow:
            def read(self, size=-1):
                sys.stdout.write("reading\\n"); sys.stdout.flush()
                time.sleep(0.2)
                return b"some text " * 100

        normalize_stream(Slow(), limit=10**9, tmp_dir={tmp_dir!r})
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "reading\n"
        child.stdout.readline()  # a second chunk: the file exists and has bytes
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        child.kill()
    assert len(_files(tmp_dir)) == 1  # what a kill -9 leaves behind
    # An upload still running in this process holds its file; start-up must not take it.
    live = normalize_stream(io.BytesIO(b"still uploading"), limit=100, tmp_dir=tmp_dir)
    try:
        app = create_app(app_config, run_jobs=True)  # the serving process (webapp.wsgi)
        try:
            assert _files(tmp_dir) == [os.path.basename(live.path)]
        finally:
            stop_runners(app)
            app.extensions["bpe_db"].dispose()
    finally:
        live.discard()
    assert _files(tmp_dir) == []


# ----- a full disk -------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 6 MB tmpfs to fill up (needs root to mount; skipped with a message elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("the disk-full tests mount a small tmpfs, which needs root (CI runs as root)")
    where = tmp_path / "small-disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"could not mount a tmpfs for the disk-full tests: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(folder) -> str:
    """Write a filler file until the disk is full; returns its path (delete it to free space)."""
    path = os.path.join(folder, "filler")
    with open(path, "wb", buffering=0) as out:
        block = b"\0" * 65536
        for _ in range(10_000):  # bounded: far more than the disk holds
            try:
                out.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        for _ in range(64):  # then the last few pages
            try:
                out.write(b"\0" * 4096)
            except OSError:
                break
    return path


def _count(app, model) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.scalar(select(func.count()).select_from(model))


@pytest.mark.database("sqlite")  # faults of SQLite files
def test_a_full_disk_answers_507_stores_nothing_and_recovers(app_config, small_disk, tmp_path):
    app_config["DATABASE_URL"] = f"sqlite:///{small_disk / 'db.sqlite3'}"
    app_config["UPLOAD_TMP_DIR"] = str(small_disk / "uploads-tmp")
    app = create_app(app_config)
    try:
        client = app.test_client()
        made = client.post("/api/corpora", json={"text": SAMPLE_TEXT, "name": "before"})
        assert made.status_code == 201
        tok = bpe.train(SAMPLE_TEXT, vocab_size=280, trainer="reference")
        with app.extensions["bpe_db"].session_scope() as session:
            slug = store_tokenizer(session, tok, corpus_id=1).slug
        database = app.extensions["bpe_db"]
        with database.engine.connect() as conn:  # an empty WAL: every write needs new space
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = _fill(small_disk)
        body = os.urandom(600_000).hex().encode()  # 1.2 MB of text

        # the upload's temporary file cannot be written
        refused = client.post(
            "/api/corpora?name=big", data=body, content_type="text/plain", headers=BEARER
        )
        assert refused.status_code == 507, refused.data
        assert refused.is_json and "storage is full" in refused.get_json()["error"]
        page = client.post("/corpora", data={"text": "pasted " * 20_000, "name": "p"})
        assert page.status_code == 507 and b"storage is full" in page.data
        assert "text/html" in page.content_type
        # the temporary file fits elsewhere, but the row does not fit in the database
        app.config["UPLOAD_TMP_DIR"] = str(tmp_path / "roomy-tmp")
        refused = client.post(
            "/api/corpora?name=big", data=body, content_type="text/plain", headers=BEARER
        )
        assert refused.status_code == 507, refused.data
        shared = client.post(f"/t/{slug}/share", data={"text": "share me " * 5000})
        assert shared.status_code == 507 and b"storage is full" in shared.data
        # nothing half-stored, and reading goes on
        assert _count(app, Corpus) == 1 and _count(app, PlaygroundShare) == 0
        assert _files(tmp_path / "roomy-tmp") == [] and _files(small_disk / "uploads-tmp") == []
        assert client.get(f"/t/{slug}").status_code == 200
        assert client.get("/").status_code == 200

        os.unlink(filler)  # space again: the same requests now succeed
        app.config["UPLOAD_TMP_DIR"] = str(small_disk / "uploads-tmp")
        stored = client.post(
            "/api/corpora?name=big", data=body, content_type="text/plain", headers=BEARER
        )
        assert stored.status_code == 201, stored.data
        assert stored.get_json()["sha256"] == hashlib.sha256(body).hexdigest()
        assert client.post(f"/t/{slug}/share", data={"text": "share me"}).status_code == 303
        assert _count(app, Corpus) == 2 and _count(app, PlaygroundShare) == 1
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


# ----- a corrupt database ----------------------------------------------------------------------
@pytest.mark.database("sqlite")  # faults of SQLite files
def test_a_corrupt_database_stops_start_up_with_one_line_naming_the_file(app_config, tmp_path):
    path = tmp_path / "db.sqlite3"
    app_config["DATABASE_URL"] = f"sqlite:///{path}"
    app = create_app(app_config)
    client = app.test_client()
    for n in range(30):  # enough rows for the tables to span several pages
        client.post("/api/corpora", json={"text": f"corpus number {n} " * 200})
    stop_runners(app)
    app.extensions["bpe_db"].dispose()
    data = bytearray(path.read_bytes())
    assert len(data) > 8 * 4096
    data[3 * 4096 : 5 * 4096] = os.urandom(2 * 4096)  # two pages of garbage in the middle
    path.write_bytes(bytes(data))

    script = "from webapp import create_app; create_app()"
    env = {**os.environ, "DATABASE_URL": app_config["DATABASE_URL"], "BPE_JOBS_EXECUTION": "manual"}
    started = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert started.returncode == 1
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1, started.stderr
    assert str(path) in lines[0] and "corrupt" in lines[0]

    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(SystemExit, match="is corrupt"):
        create_app(app_config)


@pytest.mark.database("sqlite")  # faults of SQLite files
def test_a_job_whose_result_does_not_fit_fails_with_the_reason(
    app_config, small_disk, random_words
):
    app_config["DATABASE_URL"] = f"sqlite:///{small_disk / 'db.sqlite3'}"
    app_config["JOBS_PROGRESS_INTERVAL"] = 1000.0  # a few small progress writes, no more
    app = create_app(app_config)
    try:
        client = app.test_client()
        made = client.post("/api/corpora", json={"text": random_words(6000)}).get_json()
        queued = client.post(f"/c/{made['slug']}/train", data={"vocab_size": "4000"})
        assert queued.status_code == 303
        job_id = int(queued.headers["Location"].rsplit("/", 1)[1])
        with app.extensions["bpe_db"].engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = _fill(small_disk)
        # room for the job's small status writes, not for 4,000 merges and their vocabulary
        os.truncate(filler, os.path.getsize(filler) - 96 * 1024)
        app.extensions["bpe_jobs"].run_next()
        with app.extensions["bpe_db"].read_scope() as session:
            job = session.get(TrainingJob, job_id)
            assert job.status == "failed" and job.tokenizer_id is None
            assert "could not be stored" in job.error and "storage is full" in job.error
            assert session.scalar(select(func.count()).select_from(Tokenizer)) == 0
            assert session.scalar(select(func.count()).select_from(Merge)) == 0
        page = client.get(queued.headers["Location"]).data.decode()
        assert "storage is full" in page and "Run again" in page

        os.unlink(filler)  # space again: the same job, run again, succeeds
        rerun = client.post(f"{queued.headers['Location']}/rerun")
        assert rerun.status_code == 303
        app.extensions["bpe_jobs"].run_next()
        with app.extensions["bpe_db"].read_scope() as session:
            statuses = [j.status for j in session.scalars(select(TrainingJob))]
            assert statuses == ["failed", "succeeded"]
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


# ----- a database that cannot be written ---------------------------------------------------------
@pytest.mark.database("sqlite")  # faults of SQLite files
def test_an_unwritable_database_answers_503_for_writes_while_reads_go_on(app_config, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the read-only test bind-mounts a folder read-only, which needs root")
    folder, read_only = tmp_path / "db", tmp_path / "db-ro"
    folder.mkdir()
    read_only.mkdir()
    app_config["DATABASE_URL"] = f"sqlite:///{folder / 'db.sqlite3'}"
    writable = create_app(app_config)
    client = writable.test_client()
    slug = client.post("/api/corpora", json={"text": SAMPLE_TEXT}).get_json()["slug"]
    tok = bpe.train(SAMPLE_TEXT, vocab_size=280, trainer="reference")
    with writable.extensions["bpe_db"].session_scope() as session:
        tok_slug = store_tokenizer(session, tok, corpus_id=1).slug
    # The same files, seen through a read-only mount (root ignores file permissions). The
    # writable app stays open: SQLite reads a WAL database on read-only media only while its
    # -wal and -shm files exist, as they do while the server that wrote it runs.
    for command in (
        ["mount", "--bind", str(folder), str(read_only)],
        ["mount", "-o", "remount,ro,bind", str(read_only)],
    ):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(read_only)], check=False)
            pytest.skip(f"could not make a read-only bind mount: {done.stderr.strip()}")
    try:
        app_config["DATABASE_URL"] = f"sqlite:///{read_only / 'db.sqlite3'}"
        app = create_app(app_config, run_jobs=True)  # start-up itself copes, jobs included
        try:
            client = app.test_client()
            for url in ("/", f"/c/{slug}", f"/t/{tok_slug}", f"/api/t/{tok_slug}/vocab"):
                assert client.get(url).status_code == 200, url
            encoded = client.post(f"/api/t/{tok_slug}/encode", json={"text": "reads work"})
            assert encoded.status_code == 200
            refused = client.post("/api/corpora", json={"text": "a new corpus"})
            assert refused.status_code == 503 and refused.is_json
            assert "cannot be written" in refused.get_json()["error"]
            page = client.post(f"/t/{tok_slug}/share", data={"text": "share"})
            assert page.status_code == 503 and b"cannot be written" in page.data
            train = client.post(f"/c/{slug}/train", data={"vocab_size": "260"})
            assert train.status_code == 503
            assert client.get(f"/c/{slug}").status_code == 200  # and reads still go on
        finally:
            stop_runners(app)
            app.extensions["bpe_db"].dispose()
    finally:
        subprocess.run(["umount", "-l", str(read_only)], check=False)
        writable.extensions["bpe_db"].dispose()
