"""The Celery backend with real workers on a real Redis broker (BPE_JOB_BACKEND=celery).

These need TEST_BROKER_URL (`sh scripts/redis-test-server.sh` prints one); without it they
skip with a message, and under BPE_TESTS_NO_SKIP=1 (CI) they fail instead. They run on
SQLite, or on PostgreSQL with TEST_DATABASE_URL, like every web test.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select

import bpe
from bpe.shards import cut_text
from tests.conftest import TEST_OWNER_TOKEN, ensure_owner, need_broker
from tests.waiting import free_port, wait_for
from webapp import create_app, stop_runners
from webapp.jobs.celery_backend import OLD_TRAIN_TASK, TASK_NAME
from webapp.jobs.settings import JobSettings
from webapp.jobs.shard_counting import rule_of
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Corpus, CountShard, Tokenizer, TrainingJob, utcnow
from webapp.storage.uploads import store_text

pytestmark = pytest.mark.celery


@pytest.fixture
def celery_config(app_config):
    app_config.update(
        JOB_BACKEND="celery",
        CELERY_BROKER_URL=need_broker(),
        JOBS_EXECUTION="thread",
        JOBS_PROGRESS_INTERVAL=0.1,
    )
    app_config.setdefault("JOB_QUEUE", f"bpe-test-{os.urandom(6).hex()}")
    return app_config


@pytest.fixture
def web(celery_config):
    """A web app on the celery backend (it sends job ids; it never trains)."""
    app = create_app(celery_config, run_jobs=True)
    yield app
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


def job(app, job_id: int) -> TrainingJob:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.get_one(TrainingJob, job_id)


def count_tokenizers(app) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.execute(select(func.count()).select_from(Tokenizer)).scalar_one()


def corpus_of(app, text: str):
    """A corpus stored like an upload, owned by the test owner (whose token Pinned sends)."""
    row, _ = store_text(
        app.extensions["bpe_db"],
        text,
        name="c",
        tmp_dir=app.config["UPLOAD_TMP_DIR"],
        owner_id=ensure_owner(app, TEST_OWNER_TOKEN),
    )
    return row


def submit(app, corpus_id: int, **settings) -> int:
    return app.extensions["bpe_jobs"].submit(corpus_id, JobSettings(**settings))


def test_the_web_process_imports_celery_only_when_configured(tmp_path):
    import subprocess
    import sys

    check = (
        "import sys; from webapp import create_app; create_app({'DATABASE_URL': sys.argv[1]});"
        " print('celery' in sys.modules)"
    )
    url = f"sqlite:///{tmp_path / 'e.sqlite3'}"
    env = {k: v for k, v in os.environ.items() if k != "BPE_JOB_BACKEND"}
    result = subprocess.run(
        [sys.executable, "-c", check, url], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.stdout.strip() == "False", result.stderr


def test_a_worker_trains_a_job_and_only_the_id_travels(web, celery_workers, random_words):
    text = random_words(4000)
    corpus = corpus_of(web, text)
    job_id = submit(web, corpus.id, trainer="efficient", vocab_size=400)
    celery_workers()
    wait_for(lambda: job(web, job_id).finished)
    done = job(web, job_id)
    assert done.status == "succeeded", done.error
    expected = bpe.train(text, vocab_size=400, trainer="reference")
    with web.extensions["bpe_db"].read_scope() as session:
        row = session.get_one(Tokenizer, done.tokenizer_id)
        from webapp.storage.convert import load_tokenizer

        assert load_tokenizer(session, row).merges == expected.merges


def test_a_worker_killed_mid_job_leaves_nothing_running_and_a_rerun_matches(
    web, celery_workers, random_words, make_tokenizer
):
    other = make_tokenizer()  # an unrelated tokeniser that must survive untouched
    text = random_words(20000, seed=3)
    corpus = corpus_of(web, text)
    job_id = submit(web, corpus.id, trainer="reference", vocab_size=420)
    worker = celery_workers()
    wait_for(lambda: job(web, job_id).merges_done >= 3)
    os.kill(worker.process.pid, signal.SIGKILL)  # the whole worker, as a lost machine would
    worker.process.wait(10)

    # Its training child notices and marks the job; a sweep would do it for a lost machine.
    wait_for(lambda: job(web, job_id).status != "running", timeout=60)
    assert job(web, job_id).status == "interrupted"
    with web.extensions["bpe_db"].read_scope() as session:
        stored = session.get_one(Corpus, corpus.id)
        assert hashlib.sha256(stored.text.encode()).hexdigest() == corpus.sha256
        assert session.get_one(Tokenizer, other.id).merge_count == len(other.tok.merges)
    assert count_tokenizers(web) == 1

    # Run it again on a fresh worker: the same merges as an uninterrupted run.
    rerun_id = web.extensions["bpe_jobs"].rerun(job_id)
    celery_workers()
    wait_for(lambda: job(web, rerun_id).finished, timeout=180)
    again = job(web, rerun_id)
    assert again.status == "succeeded", again.error
    expected = bpe.train(text, vocab_size=420, trainer="reference")
    with web.extensions["bpe_db"].read_scope() as session:
        from webapp.storage.convert import load_tokenizer

        row = session.get_one(Tokenizer, again.tokenizer_id)
        assert load_tokenizer(session, row).merges == expected.merges
    assert job(web, job_id).status == "interrupted"  # the old one stays as it was


def test_a_duplicated_task_message_creates_one_tokenizer(web, celery_workers, random_words):
    corpus = corpus_of(web, random_words(6000, seed=5))
    job_id = submit(web, corpus.id, trainer="reference", vocab_size=330)
    celery = web.extensions["celery"]
    for copy in range(3):  # the same job id, delivered again (as a broker may)
        celery.send_task(TASK_NAME, args=[job_id], task_id=f"dup-{job_id}-{copy}")
    worker = celery_workers(concurrency=2)
    wait_for(lambda: job(web, job_id).finished)
    assert job(web, job_id).status == "succeeded"
    # Give the duplicates time to be taken and dropped, then count.
    wait_for(lambda: worker.log_path.read_text().count("succeeded in") >= 4, timeout=90)
    assert count_tokenizers(web) == 1


def test_a_message_queued_under_the_old_task_name_still_runs(web, celery_workers, random_words):
    """Before there was one task for every kind, training's was `bpe.train`: a message a web
    process queued under it before an upgrade is run by an upgraded worker, not lost."""
    corpus = corpus_of(web, random_words(6000, seed=6))
    settings = JobSettings(trainer="reference", vocab_size=300)
    [job_id] = web.extensions["bpe_jobs"].store.submit_many(corpus.id, [settings])  # not sent
    web.extensions["celery"].send_task(OLD_TRAIN_TASK, args=[job_id])
    worker = celery_workers()
    wait_for(lambda: job(web, job_id).finished)
    assert job(web, job_id).status == "succeeded"
    assert OLD_TRAIN_TASK in worker.log_path.read_text()


@pytest.fixture
def web_without_kill(celery_config):
    """The worker's force-kill pushed out of reach: a cancel must be seen by the training."""
    celery_config["JOBS_KILL_AFTER"] = 600.0
    app = create_app(celery_config, run_jobs=True)
    yield app
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


def test_cancel_reaches_a_worker_through_the_row(web_without_kill, celery_workers, random_words):
    web = web_without_kill
    corpus = corpus_of(web, random_words(60000))
    job_id = submit(web, corpus.id, trainer="reference", vocab_size=20000)
    celery_workers()
    wait_for(lambda: job(web, job_id).merges_done > 0)
    asked = time.monotonic()
    assert web.extensions["bpe_jobs"].request_cancel(job_id)
    wait_for(lambda: job(web, job_id).status == "cancelled", timeout=20)
    print(f"cancel took {time.monotonic() - asked:.2f} s")
    assert count_tokenizers(web) == 0


def test_a_worker_runs_as_many_jobs_at_once_as_its_setting_says(web, celery_workers, random_words):
    corpus = corpus_of(web, random_words(60000))
    ids = [submit(web, corpus.id, trainer="reference", vocab_size=20000) for _ in range(2)]
    # One worker process, no `-c`: BPE_WORKER_CONCURRENCY says two at once.
    worker = celery_workers(concurrency=None, env={"BPE_WORKER_CONCURRENCY": "2"})
    assert ".> concurrency: 2 (thread)" in worker.log_path.read_text()
    wait_for(lambda: all(job(web, one).merges_done > 0 for one in ids), timeout=60)
    assert {job(web, one).worker_pid for one in ids} == {worker.process.pid}
    for one in ids:
        assert web.extensions["bpe_jobs"].request_cancel(one)
    wait_for(lambda: all(job(web, one).status == "cancelled" for one in ids), timeout=30)


def test_the_sweep_marks_jobs_without_a_heartbeat_interrupted(web, make_corpus):
    corpus = make_corpus()
    database = web.extensions["bpe_db"]
    with database.session_scope() as session:
        rows = [
            TrainingJob(corpus_id=corpus.id, settings="{}", status="running", heartbeat_at=beat)
            for beat in (utcnow() - timedelta(minutes=5), utcnow())
        ]
        session.add_all(rows)
        session.flush()
        lost, alive = rows[0].id, rows[1].id
    assert web.extensions["bpe_jobs"].sweep() == 1
    assert job(web, lost).status == "interrupted" and "heartbeat" in job(web, lost).error
    assert job(web, alive).status == "running"


# ----- several web processes -------------------------------------------------------------------
class Pinned:
    """One keep-alive HTTP connection, and so one gunicorn worker process behind it."""

    def __init__(self, port: int, log_path) -> None:
        import http.client
        import uuid

        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        probe = uuid.uuid4().hex
        self.request("GET", f"/?probe={probe}")
        line = wait_for(lambda: _log_line(log_path, probe), timeout=10)
        self.pid = int(line.split()[0].strip("<>"))

    def request(self, method: str, path: str, body: bytes | None = None):
        # The owner's script: its bearer token stands in for the cookie and the CSRF token.
        headers = {"Authorization": f"Bearer {TEST_OWNER_TOKEN}"}
        if body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        response.read()
        return response


def _log_line(log_path, needle: str) -> str | None:
    if not log_path.exists():
        return None
    return next((line for line in log_path.read_text().splitlines() if needle in line), None)


@pytest.mark.slow
def test_three_web_processes_share_the_jobs_and_cancel_across_them(
    web, celery_config, celery_workers, random_words, tmp_path
):
    import subprocess
    import sys
    from pathlib import Path

    port = free_port()
    access_log = tmp_path / "access.log"
    env = {
        **os.environ,
        "DATABASE_URL": celery_config["DATABASE_URL"],
        "BPE_JOB_BACKEND": "celery",
        "CELERY_BROKER_URL": celery_config["CELERY_BROKER_URL"],
        "BPE_JOB_QUEUE": celery_config["JOB_QUEUE"],
        "PORT": str(port),
        "WEB_CONCURRENCY": "3",
        "BPE_AUTO_MIGRATE": "0",
        "BPE_JOBS_PER_OWNER": "8",  # one owner submits the six jobs below
        "SECRET_KEY": "shared by the three processes",
    }
    gunicorn = Path(sys.executable).parent / "gunicorn"
    server = subprocess.Popen(
        [str(gunicorn), "--config", "python:webapp.gunicorn_conf", "webapp.wsgi:app"]
        + ["--keep-alive", "60", "--access-logfile", str(access_log)]
        + ["--access-logformat", "%(p)s %(r)s %(s)s"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _answers(port), timeout=60)
        pinned: dict[int, Pinned] = {}
        for _ in range(60):  # connections land on workers as the kernel likes: collect three
            one = Pinned(port, access_log)
            pinned.setdefault(one.pid, one)
            if len(pinned) == 3:
                break
        assert len(pinned) == 3, f"only reached processes {sorted(pinned)}"
        a, b, c = pinned.values()
        celery_workers()
        celery_workers()

        big = corpus_of(web, random_words(60000))
        response = a.request(
            "POST", f"/c/{big.slug}/train", b"mode=chunked&vocab_size=20000&trainer=reference"
        )
        assert response.status == 303
        long_job = int(response.getheader("Location").rsplit("/", 1)[-1])
        wait_for(lambda: job(web, long_job).merges_done > 0)
        assert b.request("POST", f"/c/{big.slug}/jobs/{long_job}/cancel").status == 303
        wait_for(lambda: job(web, long_job).status == "cancelled", timeout=30)

        small = corpus_of(web, random_words(3000, seed=9))
        submitted = []
        for client in (a, b, c, a, b, c):
            form = f"mode=chunked&vocab_size={300 + len(submitted)}&trainer=efficient".encode()
            response = client.request("POST", f"/c/{small.slug}/train", form)
            assert response.status == 303
            submitted.append(int(response.getheader("Location").rsplit("/", 1)[-1]))
        wait_for(lambda: all(job(web, j).finished for j in submitted), timeout=240)
        assert all(job(web, j).status == "succeeded" for j in submitted)
        with web.extensions["bpe_db"].read_scope() as session:
            made = session.execute(
                select(TrainingJob.tokenizer_id).where(TrainingJob.id.in_(submitted))
            ).scalars()
            assert len(set(made)) == len(submitted)  # each ran once, each its own tokeniser
        assert count_tokenizers(web) == len(submitted)
        # The submissions really came through three different processes.
        posts = [line for line in access_log.read_text().splitlines() if "/train " in line]
        assert len({line.split()[0] for line in posts}) == 3
    finally:
        server.terminate()
        server.wait(30)


def _answers(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def test_a_worker_runs_an_evaluation_that_the_web_process_only_queued(
    web, celery_workers, make_tokenizer
):
    from tests.conftest import SAMPLE_TEXT
    from webapp.jobs.evaluations import claim
    from webapp.storage.models import EvaluationRow

    tok = make_tokenizer()
    database = web.extensions["bpe_db"]
    evaluation_id = web.extensions["bpe_evaluations"].submit(
        tokenizer_id=tok.id, corpus_id=tok.corpus_id
    )

    def row() -> EvaluationRow:
        with database.read_scope() as session:
            return session.get_one(EvaluationRow, evaluation_id)

    assert row().status == "queued"  # the web process sent the id; it runs nothing itself
    celery_workers()
    wait_for(lambda: row().status not in ("queued", "running"))
    done = row()
    assert done.status == "succeeded", done.error
    assert done.tokens == len(tok.tok.encode(SAMPLE_TEXT))
    assert not claim(database, evaluation_id)  # a duplicate message finds nothing to run


def test_a_workers_job_page_shows_it_learning_through_the_database(
    web, celery_workers, random_words
):
    """The worker writes the learning to the row; the web process, which never trains, draws
    the latest merges and the curves from it while the job runs (docs/training.md).

    The watched job uses the reference trainer (a pass over the whole text per merge), so it
    runs for minutes on any machine and is cancelled once seen drawn; the efficient trainer
    can finish before the page is first asked for. A short job then shows the finished page."""
    import json

    corpus = corpus_of(web, random_words(30_000))
    slow = JobSettings(mode="naive", trainer="reference", vocab_size=8000)
    owner = ensure_owner(web, TEST_OWNER_TOKEN)  # the client's: a job page is its owner's only
    jobs = web.extensions["bpe_jobs"]
    job_id = jobs.submit(corpus.id, slow, owner_id=owner)
    celery_workers()
    client = web.test_client()
    drawn = []

    def look() -> bool:
        row = job(web, job_id)
        if (
            row.status == "running"
            and len(json.loads(row.learning or '{"points": []}')["points"]) > 2
        ):
            page = client.get(f"/c/{corpus.slug}/jobs/{job_id}/status").text
            if 'class="learn-chart compression-chart"' in page and "latest-merges" in page:
                drawn.append(row.merges_done)
        return bool(drawn) or row.finished

    wait_for(look, timeout=240, interval=0.1)
    assert drawn, f"the page never drew the learning while the worker trained: {job(web, job_id)}"
    assert jobs.request_cancel(job_id)
    wait_for(lambda: job(web, job_id).status == "cancelled", timeout=60)

    quick = JobSettings(mode="naive", trainer="efficient", vocab_size=1200)
    done_id = jobs.submit(corpus.id, quick, owner_id=owner)
    wait_for(lambda: job(web, done_id).finished, timeout=240)
    assert job(web, done_id).status == "succeeded", job(web, done_id).error
    page = client.get(f"/c/{corpus.slug}/jobs/{done_id}").text
    assert '<strong class="vocab-now">1,200</strong>' in page


# ----- one training's shards counted on every worker (webapp/jobs/shard_counting.py) ---------
SHARD_CHARS = 4_000  # characters per counting task: a small corpus makes dozens


def counted_lines(worker, job_id: int) -> int:
    """Shards this worker's counting tasks counted for the job, from its own log lines."""
    lines = worker.log_path.read_text(errors="replace").splitlines()
    return sum(f"of training {job_id} counted" in line for line in lines)


def merges_of(app, job_id: int):
    done = job(app, job_id)
    assert done.status == "succeeded", done.error
    with app.extensions["bpe_db"].read_scope() as session:
        return load_tokenizer(session, session.get_one(Tokenizer, done.tokenizer_id)).merges


def shard_rows(app) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.execute(select(func.count()).select_from(CountShard)).scalar_one()


@pytest.mark.parametrize(
    "settings",
    [
        JobSettings(mode="chunked", pattern="gpt4", trainer="efficient", vocab_size=700),
        JobSettings(mode="words", pattern=None, trainer="efficient", vocab_size=700),
    ],
    ids=["chunked", "words"],
)
def test_both_workers_count_one_trainings_shards_and_the_merges_are_unsharded(
    web, celery_workers, random_words, settings
):
    text = random_words(40_000)
    corpus = corpus_of(web, text)
    owner = ensure_owner(web, TEST_OWNER_TOKEN)
    # The training holds one slot of one worker; the tasks get the other three. It never
    # counts a shard itself here (help after 60 s), so every shard is a task's. Both workers
    # are up before the job is sent: the shards must not all go to the first one to start.
    env = {"BPE_SHARD_CHARS": str(SHARD_CHARS), "BPE_SHARD_HELP_AFTER": "60"}
    first, second = celery_workers(2, env=env), celery_workers(2, env=env)
    job_id = web.extensions["bpe_jobs"].submit(corpus.id, settings, owner_id=owner)
    wait_for(lambda: job(web, job_id).finished, timeout=240)
    shards = len(cut_text(text, rule_of(settings), shard_chars=SHARD_CHARS))
    assert shards > 20
    by_worker = [counted_lines(first, job_id), counted_lines(second, job_id)]
    assert all(n > 0 for n in by_worker), by_worker
    assert sum(by_worker) == shards  # each shard counted once
    assert merges_of(web, job_id) == bpe.train(text, **settings.train_kwargs()).merges
    assert shard_rows(web) == 0  # the job cleared its shards


def test_a_training_on_the_only_busy_worker_counts_its_shards_itself(
    web, celery_workers, random_words
):
    """One worker, one slot, held by the training: no task can run, so after
    BPE_SHARD_HELP_AFTER with nothing counted it counts the shards itself, and finishes."""
    text = random_words(20_000)
    corpus = corpus_of(web, text)
    settings = JobSettings(mode="chunked", pattern="gpt4", trainer="efficient", vocab_size=500)
    owner = ensure_owner(web, TEST_OWNER_TOKEN)
    job_id = web.extensions["bpe_jobs"].submit(corpus.id, settings, owner_id=owner)
    worker = celery_workers(
        1, env={"BPE_SHARD_CHARS": str(SHARD_CHARS), "BPE_SHARD_HELP_AFTER": "0.5"}
    )
    wait_for(lambda: job(web, job_id).finished, timeout=240)
    assert merges_of(web, job_id) == bpe.train(text, **settings.train_kwargs()).merges
    assert counted_lines(worker, job_id) == 0  # no task could count: the training did
    assert shard_rows(web) == 0


def test_a_cancel_while_the_shards_are_counted_leaves_no_shards(web, celery_workers, random_words):
    """Nobody counts (one busy slot, help after 60 s): the cancel reaches the waiting training,
    the job is cancelled and its shards deleted; the tasks left find nothing to count."""
    text = random_words(20_000)
    corpus = corpus_of(web, text)
    settings = JobSettings(mode="chunked", pattern="gpt4", trainer="efficient", vocab_size=500)
    owner = ensure_owner(web, TEST_OWNER_TOKEN)
    jobs = web.extensions["bpe_jobs"]
    job_id = jobs.submit(corpus.id, settings, owner_id=owner)
    celery_workers(1, env={"BPE_SHARD_CHARS": str(SHARD_CHARS), "BPE_SHARD_HELP_AFTER": "60"})
    wait_for(lambda: shard_rows(web) > 0, timeout=120)
    assert jobs.request_cancel(job_id)
    wait_for(lambda: job(web, job_id).status == "cancelled", timeout=60)
    wait_for(lambda: shard_rows(web) == 0, timeout=30)
