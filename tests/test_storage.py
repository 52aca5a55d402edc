"""Storage faults and crash leftovers: temp files of a killed server, a full disk, an unwritable
or corrupt database. Every one answers a clear status (507, 503, a one-line start-up error),
stores nothing half-way, and the app works again once the fault is gone."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

import pytest
from sqlalchemy import func, select

import bpe
from tests.conftest import SAMPLE_TEXT, TEST_OWNER_TOKEN
from tests.readme_server import start_readme_server
from tests.waiting import free_port, wait_for, wait_for_server
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
@contextlib.contextmanager
def _tmpfs(where, *, size: str, purpose: str):
    """A tmpfs of `size` mounted at `where` for the block; skipped, saying why, where it
    cannot be (not root, not Linux; CI runs as root on Linux, and BPE_TESTS_NO_SKIP)."""
    if not sys.platform.startswith("linux"):
        pytest.skip(f"{purpose} mount a Linux tmpfs")
    if os.geteuid() != 0:
        pytest.skip(f"{purpose} mount a tmpfs, which needs root (CI runs as root)")
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"{purpose} could not mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MB tmpfs to fill up."""
    with _tmpfs(tmp_path / "small-disk", size="6m", purpose="the disk-full tests") as where:
        yield where


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


@pytest.mark.database("sqlite")  # faults of SQLite files
def test_a_full_disk_under_both_database_and_temp_files_answers_507_and_recovers(
    app_config, small_disk
):
    """The default layout (`make run`): the database and the upload temp folder on one file
    system. The temporary file still fits; the row it is copied into (SQLite's blob I/O on the
    raw connection, which SQLAlchemy never wraps) does not."""
    app_config["DATABASE_URL"] = f"sqlite:///{small_disk / 'db.sqlite3'}"
    app_config["UPLOAD_TMP_DIR"] = str(small_disk / "uploads-tmp")
    app = create_app(app_config)
    try:
        client = app.test_client()
        assert client.post("/api/corpora", json={"text": SAMPLE_TEXT}).status_code == 201
        with app.extensions["bpe_db"].engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = _fill(small_disk)
        body = os.urandom(1_250_000).hex().encode()  # 2.5 MB of text
        # room for the temporary file and a little more, not for the text a second time
        os.truncate(filler, os.path.getsize(filler) - 4000 * 1024)

        refused = client.post(
            "/api/corpora?name=big", data=body, content_type="text/plain", headers=BEARER
        )
        assert refused.status_code == 507, refused.data
        assert "storage is full" in refused.get_json()["error"]
        page = client.post("/corpora", data={"file": (io.BytesIO(body), "big.txt"), "name": "big"})
        assert page.status_code == 507 and b"storage is full" in page.data
        assert "text/html" in page.content_type
        assert _count(app, Corpus) == 1 and _files(small_disk / "uploads-tmp") == []
        assert client.get("/").status_code == 200

        os.unlink(filler)  # space again: the same upload, same app, now stored
        stored = client.post(
            "/api/corpora?name=big", data=body, content_type="text/plain", headers=BEARER
        )
        assert stored.status_code == 201, stored.data
        assert stored.get_json()["sha256"] == hashlib.sha256(body).hexdigest()
        assert _count(app, Corpus) == 2 and _files(small_disk / "uploads-tmp") == []
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


# ----- the README's server on a read-only data folder -----------------------------------------
@pytest.fixture
def data_disk(tmp_path):
    """A tmpfs of its own for a server's database and temp files, to remount read-only."""
    with _tmpfs(tmp_path / "data", size="20m", purpose="the read-only tests") as where:
        yield where


def _remount(where, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True)


def _http(method: str, url: str, body: bytes | None = None, headers=None):
    """(status, body) of one request; an error status is an answer too."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _stored_with_a_queued_job(app_config) -> tuple[str, str]:
    """A corpus and a training job still queued, as a stopped server leaves them; (corpus
    slug, job page path). The app is closed after: SQLite folds its -wal into the file."""
    app = create_app(app_config)
    try:
        client = app.test_client()
        slug = client.post("/api/corpora", json={"text": SAMPLE_TEXT}).get_json()["slug"]
        queued = client.post(f"/c/{slug}/train", data={"vocab_size": "270"})
        assert queued.status_code == 303
        return slug, queued.headers["Location"]
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


@pytest.mark.slow
@pytest.mark.embedded_only  # the README's run command is the embedded default
@pytest.mark.database("sqlite")  # faults of SQLite files
def test_the_server_starts_on_a_read_only_data_folder_and_heals_when_it_is_writable(
    app_config, data_disk
):
    app_config["DATABASE_URL"] = f"sqlite:///{data_disk / 'db.sqlite3'}"
    app_config["UPLOAD_TMP_DIR"] = str(data_disk / "uploads-tmp")
    slug, job_path = _stored_with_a_queued_job(app_config)
    leftover = data_disk / "uploads-tmp" / "upload-left-by-a-kill.txt"
    leftover.parent.mkdir(exist_ok=True)
    leftover.write_text("an upload cut off by a kill -9")  # start-up would remove it
    _remount(data_disk, "ro")

    port = free_port()
    env = {
        "PORT": str(port),
        "DATABASE_URL": app_config["DATABASE_URL"],
        "BPE_UPLOAD_TMP_DIR": app_config["UPLOAD_TMP_DIR"],
        "SECRET_KEY": "test",
        "BPE_JOBS_EXECUTION": "thread",
        "WEB_CONCURRENCY": "2",
    }
    server = start_readme_server(env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    upload = json.dumps({"text": "written once the disk is writable"}).encode()
    owner = {**BEARER, "Content-Type": "application/json"}
    try:
        assert wait_for_server(lambda: _http("GET", base + "/"))[0] == 200
        assert _http("GET", f"{base}/c/{slug}")[0] == 200
        status, page = _http("GET", base + job_path, headers=BEARER)
        assert status == 200 and b"Jobs cannot start right now" in page
        status, reply = _http("POST", base + "/api/corpora", upload, owner)
        assert status == 503 and "cannot be written" in json.loads(reply)["error"]
        form = {**BEARER, "Content-Type": "application/x-www-form-urlencoded"}
        status, reply = _http("POST", f"{base}/c/{slug}/train", b"vocab_size=260", form)
        assert status == 503, reply

        _remount(data_disk, "rw")  # writable again: no restart
        status, reply = _http("POST", base + "/api/corpora", upload, owner)
        assert status == 201, reply
        # The queued job runs: a worker took the runner lock once it could be written.
        status_url = f"{base}{job_path}/status"
        wait_for(lambda: b'data-status="succeeded"' in _http("GET", status_url, headers=BEARER)[1])
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(data_disk)], check=False)
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")[-3000:]


def _make_read_only(where, how: str) -> None:
    if how == "read-only mount":
        _remount(where, "ro")
    else:  # immutable files: access(2) refuses to write them, even to root
        subprocess.run(["chattr", "+i", *map(str, where.glob("db.sqlite3*"))], check=True)


def _make_writable(where, how: str) -> None:
    if how == "read-only mount":
        subprocess.run(["mount", "-o", "remount,rw", str(where)], check=False)
    else:
        subprocess.run(["chattr", "-i", *map(str, where.glob("db.sqlite3*"))], check=False)


@pytest.mark.database("sqlite")  # faults of SQLite files
@pytest.mark.parametrize("how", ["read-only mount", "immutable files"])
def test_a_database_on_read_only_media_is_read_then_written_once_writable(
    app_config, data_disk, how
):
    app_config["DATABASE_URL"] = f"sqlite:///{data_disk / 'db.sqlite3'}"
    app_config["UPLOAD_TMP_DIR"] = str(data_disk / "uploads-tmp")
    slug, _job = _stored_with_a_queued_job(app_config)
    _make_read_only(data_disk, how)
    try:
        app = create_app(app_config)  # no -wal, no -shm, and none can be made
        try:
            client = app.test_client()
            refused = client.post("/api/corpora", json={"text": "new text"})
            assert refused.status_code == 503 and "cannot be written" in refused.get_json()["error"]
            assert client.get(f"/c/{slug}").status_code == 200
            engine = app.extensions["bpe_db"].engine
            # Two read-only connections back in the pool, as a busy server has them: a request
            # reads through one and writes through the other.
            with engine.connect() as one, engine.connect() as two:
                for conn in (one, two):
                    assert conn.exec_driver_sql("SELECT count(*) FROM corpora").scalar() == 1
            _make_writable(data_disk, how)  # the same app, those connections next: writes work
            assert client.post("/api/corpora", json={"text": "new text"}).status_code == 201
            assert _count(app, Corpus) == 2
        finally:
            stop_runners(app)
            app.extensions["bpe_db"].dispose()
    finally:
        _make_writable(data_disk, how)


@pytest.mark.embedded_only  # the embedded runner's lock
@pytest.mark.database("sqlite")  # the lock sits next to the SQLite file
def test_an_unwritable_runner_lock_refuses_new_jobs_then_runs_them_once_it_can(
    app_config, data_disk
):
    """Only the lock cannot be written (an immutable file: the database itself is fine): the
    server serves, says on the job page why the queued job waits, refuses new jobs with 503
    rather than queueing them for no one, and runs them once the lock can be taken."""
    app_config["DATABASE_URL"] = f"sqlite:///{data_disk / 'db.sqlite3'}"
    slug, job_path = _stored_with_a_queued_job(app_config)
    lock = data_disk / "db.sqlite3.runner.lock"
    lock.touch()
    subprocess.run(["chattr", "+i", str(lock)], check=True)
    try:
        app_config["JOBS_EXECUTION"] = "thread"
        app = create_app(app_config, run_jobs=True)
        try:
            client = app.test_client()
            page = client.get(job_path)
            assert page.status_code == 200 and b"Jobs cannot start right now" in page.data
            refused = client.post(f"/c/{slug}/train", data={"vocab_size": "260"})
            assert refused.status_code == 503 and b"Jobs cannot run right now" in refused.data
            assert _count(app, TrainingJob) == 1
            subprocess.run(["chattr", "-i", str(lock)], check=True)
            wait_for(lambda: b'data-status="succeeded"' in client.get(f"{job_path}/status").data)
            assert b"Jobs cannot start" not in client.get(job_path).data
            assert client.post(f"/c/{slug}/train", data={"vocab_size": "260"}).status_code == 303
        finally:
            stop_runners(app)
            app.extensions["bpe_db"].dispose()
    finally:
        subprocess.run(["chattr", "-i", str(lock)], check=False)
