"""Shared fixtures: an app on a fresh temporary database, its client and CLI runner, and quick
ways to make a corpus and a trained tokeniser (other areas' tests rely on these; keep them stable).

Set TEST_DATABASE_URL=postgresql://... to run the suite against PostgreSQL instead of SQLite:
each test then starts from an emptied schema (downgrade to base, upgrade to head).

Set BPE_JOB_BACKEND=celery and TEST_BROKER_URL=redis://... to run it on the Celery backend:
every app then sends its jobs through its own broker queue, and the tests that need workers
start real ones (`celery_workers`). Without a broker those tests skip with a message; with
BPE_TESTS_NO_SKIP=1 (CI) they fail instead, so CI never skips them.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import bpe
from webapp import create_app, db
from webapp.convert import store_tokenizer
from webapp.uploads import store_text

SAMPLE_TEXT = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs on.\n"
    "Hello world! hello again, world: 123 456 7890.\n"
    "Über straße café naïve — 東京 😀 done.\n"
) * 3

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL", "")
TEST_BROKER_URL = os.environ.get("TEST_BROKER_URL", "")
JOB_BACKEND = os.environ.get("BPE_JOB_BACKEND") or "embedded"


def need_broker() -> str:
    """The test broker's URL; skip with a message when there is none (CI's BPE_TESTS_NO_SKIP
    turns that skip into a failure)."""
    problem = None
    if not TEST_BROKER_URL:
        problem = "set TEST_BROKER_URL=$(sh scripts/redis-test-server.sh) for the Celery tests"
    else:
        import redis

        try:
            redis.Redis.from_url(TEST_BROKER_URL, socket_connect_timeout=5).ping()
        except redis.RedisError as exc:
            problem = f"the test broker {TEST_BROKER_URL} does not answer: {exc}"
    if problem is not None:
        pytest.skip(problem)
    return TEST_BROKER_URL


DATABASE = "postgresql" if TEST_DATABASE_URL.startswith(("postgres://", "postgresql")) else "sqlite"
# CI sets BPE_TESTS_NO_SKIP=1: a test that would skip (no corpora, no Chromium, no reference
# tokenisers, a service not running) fails instead, so a green run cannot hide what it left out.
# The skips allowed are by design: a test marked for the other database or job backend.
NO_SKIP = os.environ.get("BPE_TESTS_NO_SKIP", "") not in ("", "0")


def _for_other_database(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("database")
    return marker is not None and marker.args[0] != DATABASE


def _for_other_backend(item: pytest.Item) -> bool:
    return JOB_BACKEND == "celery" and item.get_closest_marker("embedded_only") is not None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _for_other_database(item):
        pytest.skip(
            f"{item.get_closest_marker('database').args[0]} only; this run is on {DATABASE}"
        )
    if _for_other_backend(item):
        pytest.skip("tests the embedded runner's own machinery; BPE_JOB_BACKEND=celery")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    report = yield
    skipped = report.skipped and not hasattr(report, "wasxfail")
    if NO_SKIP and skipped and not (_for_other_database(item) or _for_other_backend(item)):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"BPE_TESTS_NO_SKIP is set (CI), so this may not skip: {reason}"
    return report


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if NO_SKIP and report.skipped:  # a whole module skipped, e.g. by a module-level importorskip
        report.outcome = "failed"


@dataclass(frozen=True)
class CorpusRef:
    id: int
    slug: str
    name: str
    sha256: str


@dataclass(frozen=True)
class TokenizerRef:
    id: int
    slug: str
    corpus_id: int
    corpus_slug: str
    tok: bpe.Tokenizer  # the trained library object, as it was stored


def _database_url(tmp_path) -> str:
    if TEST_DATABASE_URL:
        database = db.Database(TEST_DATABASE_URL)
        try:
            db.downgrade(database, "base")
        finally:
            database.dispose()
        return TEST_DATABASE_URL
    return f"sqlite:///{tmp_path / 'test.sqlite3'}"


@pytest.fixture
def app_config(tmp_path) -> dict:
    """The test configuration; a test may change it before asking for `app`."""
    return {
        "TESTING": True,
        "SECRET_KEY": "test",
        "DATABASE_URL": _database_url(tmp_path),
        "UPLOAD_TMP_DIR": str(tmp_path / "uploads-tmp"),
        "JOBS_MODE": "manual",  # nothing trains until a test calls runner.run_next()
        "JOBS_PROGRESS_INTERVAL": 0.0,
        **_backend_config(),
    }


def _backend_config() -> dict:
    if JOB_BACKEND != "celery":
        return {"JOB_BACKEND": "embedded"}
    # A queue of its own per test: no test's worker ever sees another test's job ids.
    return {
        "JOB_BACKEND": "celery",
        "CELERY_BROKER_URL": need_broker(),
        "JOB_QUEUE": f"bpe-test-{uuid.uuid4().hex[:12]}",
    }


class CeleryWorker:
    """A real `celery -A webapp.celery_app worker` process on the test's database and queue."""

    def __init__(self, config: dict, *, concurrency: int, log_path: Path) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": config["DATABASE_URL"],
            "CELERY_BROKER_URL": config["CELERY_BROKER_URL"],
            "BPE_JOB_QUEUE": config["JOB_QUEUE"],
            "BPE_AUTO_MIGRATE": "0",
            "BPE_JOBS_KILL_AFTER": str(config.get("JOBS_KILL_AFTER", 1.0)),
        }
        self.log_path = log_path
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        command = [sys.executable, "-m", "celery", "-A", "webapp.celery_app", "worker"]
        name = f"w{uuid.uuid4().hex[:8]}@%h"
        options = ["-c", str(concurrency), "-n", name, "--loglevel", "INFO", "--without-mingle"]
        self.process = subprocess.Popen(
            [*command, *options, "--without-gossip"], env=env, stdout=self.log, stderr=self.log
        )
        deadline = time.monotonic() + 90
        while " ready." not in log_path.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("celery worker did not start:\n" + log_path.read_text())
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.log.close()


@pytest.fixture
def celery_workers(app_config, tmp_path):
    """start(concurrency=1) -> a running CeleryWorker on the app's database and queue."""
    started: list[CeleryWorker] = []

    def start(concurrency: int = 1) -> CeleryWorker:
        need_broker()
        worker = CeleryWorker(
            app_config, concurrency=concurrency, log_path=tmp_path / f"worker{len(started)}.log"
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def app(app_config):
    app = create_app(app_config)
    yield app
    app.extensions["bpe_jobs"].stop()
    app.extensions["bpe_db"].dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def job_runner(app):
    """The app's JobRunner (manual mode: `job_runner.run_next()` trains the oldest queued job)."""
    return app.extensions["bpe_jobs"]


@pytest.fixture
def make_corpus(app):
    """make_corpus(text=SAMPLE_TEXT, *, name="sample") -> CorpusRef, stored like an upload."""

    def _make(text: str = SAMPLE_TEXT, *, name: str = "sample") -> CorpusRef:
        row, _ = store_text(
            app.extensions["bpe_db"], text, name=name, tmp_dir=app.config["UPLOAD_TMP_DIR"]
        )
        return CorpusRef(row.id, row.slug, row.name, row.sha256)

    return _make


@pytest.fixture
def make_tokenizer(app, make_corpus):
    """make_tokenizer(text=SAMPLE_TEXT, *, vocab_size=300, mode="chunked", ...) -> TokenizerRef.

    Trains with the reference trainer (tiny texts, quick) and stores the result exactly as a
    finished job does. Pass `corpus=` (a CorpusRef) to reuse a corpus.
    """

    def _make(
        text: str = SAMPLE_TEXT,
        *,
        vocab_size: int = 300,
        mode: str = "chunked",
        pattern: str = "gpt4",
        special_tokens: tuple[str, ...] | list[str] = (),
        min_frequency: int = 1,
        trainer: str = "reference",
        corpus: CorpusRef | None = None,
    ) -> TokenizerRef:
        corpus = corpus or make_corpus(text)
        tok = bpe.train(
            text,
            vocab_size=vocab_size,
            mode=mode,
            pattern=pattern,
            trainer=trainer,
            special_tokens=list(special_tokens),
            min_frequency=min_frequency,
        )
        with app.extensions["bpe_db"].session_scope() as session:
            row = store_tokenizer(session, tok, corpus_id=corpus.id)
            return TokenizerRef(row.id, row.slug, corpus.id, corpus.slug, tok)

    return _make


def make_random_words(n: int, seed: int = 1) -> str:
    """n words drawn from 3000 random ones: enough distinct pairs to keep a trainer busy."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    return " ".join(rng.choice(words) for _ in range(n))


@pytest.fixture
def random_words():
    """random_words(n, seed=1) -> a text of n random words (deterministic for a seed)."""
    return make_random_words
