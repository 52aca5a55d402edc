"""Shared fixtures: an app on a fresh temporary database, its client and CLI runner, and quick
ways to make a corpus and a trained tokeniser (other areas' tests rely on these; keep them stable).

Set TEST_DATABASE_URL=postgresql://... to run the suite against PostgreSQL instead of SQLite:
each test then starts from an emptied schema (downgrade to base, upgrade to head).

Set BPE_JOB_BACKEND=celery and TEST_BROKER_URL=redis://... to run it on the Celery backend:
every app then sends its jobs through its own broker queue, and the tests that need workers
start real ones (`celery_workers`). Without a broker those tests skip with a message; with
BPE_TESTS_NO_SKIP=1 (CI) they fail instead, so CI never skips them.

Owners and CSRF. CSRF protection is ON in every test app. Every Flask test client
(`client`, or any `app.test_client()`) is a `BrowserClient`:
- it is the *test owner's* browser: it carries the owner cookie of `TEST_OWNER` (a fixed token
  whose owner row it makes on first use), so `make_corpus`/`make_tokenizer` rows, which belong
  to that owner, can be trained on, renamed and deleted through it;
- on every POST/PUT/PATCH/DELETE it sends the CSRF token its own session was given, read from a
  real page exactly as htmx reads it from <body hx-headers>; pass `csrf=False` to leave it out.
Other visitors: `make_owner()` -> TestOwner (a second owner: `.client()` is their browser,
`.bearer` the `Authorization` header an API client sends), `stranger` (a browser with no owner
yet), `raw_client` (plain werkzeug client: no cookie, no CSRF token, for the CSRF tests).
A new POST route: post through `client` and it just works; an API call from a script sends
`headers=owner.bearer` (any Content-Type then, raw uploads included).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import flask
import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

import bpe
from webapp import create_app, stop_runners
from webapp.plumbing.owners import token_hash
from webapp.plumbing.security import OWNER_COOKIE
from webapp.storage import db
from webapp.storage.convert import store_tokenizer
from webapp.storage.models import Owner
from webapp.storage.uploads import store_text

pytest_plugins = ["tests.browser"]  # the `browser` fixture of the real-browser tests

# The background threads an app starts with run_jobs=True (webapp/jobs/).
RUNNER_THREADS = ("bpe-job-runner", "bpe-job-sweep")


@pytest.fixture(autouse=True, scope="module")
def no_runner_outlives_its_module():
    """Every app a module starts with its runners must stop them (webapp.stop_runners): a
    leaked runner polls the shared test database and claims the next tests' jobs."""
    yield
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = sorted(t.name for t in threading.enumerate() if t.name in RUNNER_THREADS)
        if not left:
            return
        time.sleep(0.1)
    pytest.fail(f"runner threads still running after this module: {left}")


SAMPLE_TEXT = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs on.\n"
    "Hello world! hello again, world: 123 456 7890.\n"
    "Über straße café naïve — 東京 😀 done.\n"
) * 3

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL", "")
TEST_BROKER_URL = os.environ.get("TEST_BROKER_URL", "")
JOB_BACKEND = os.environ.get("BPE_JOB_BACKEND") or "embedded"
# The suite makes far more owners, uploads and jobs from 127.0.0.1 than any visitor may: rate
# limits are off in every app it builds and every server it starts (the environment is
# inherited), except where tests/test_rate_limits.py turns them on.
os.environ.setdefault("BPE_RATELIMIT", "0")


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


STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CSRF_IN_PAGE = re.compile(r'hx-headers=\'\{"X-CSRFToken": "([^"]+)"\}\'')


@dataclass(frozen=True)
class TestOwner:
    """An owner as tests hold it: the token (the browser's cookie, the API's bearer)."""

    __test__ = False  # not a test class, whatever its name says
    id: int
    token: str
    app: flask.Flask

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def client(self) -> BrowserClient:
        return BrowserClient(self.app, self.app.response_class, owner_token=self.token)


TEST_OWNER_TOKEN = "test-owner-token-0123456789abcdefghijklmnopqrstuvwxyz"


def ensure_owner(app: flask.Flask, token: str) -> int | None:
    """The id of the owner with this token in the app's database, made if missing."""
    try:
        with app.extensions["bpe_db"].session_scope() as session:
            digest = token_hash(token)
            owner_id = session.scalar(select(Owner.id).where(Owner.token_sha256 == digest))
            if owner_id is None:
                owner = Owner(token_sha256=digest)
                session.add(owner)
                session.flush()
                owner_id = owner.id
            return owner_id
    except SQLAlchemyError:  # no schema (AUTO_MIGRATE off): nobody can own anything yet
        return None


class BrowserClient(FlaskClient):
    """A test client that behaves like the site's pages in a browser: owner cookie + CSRF token.

    `BrowserClient(app, app.response_class, owner_token=None)` is a visitor with no owner yet.
    """

    def __init__(self, *args, owner_token: str | None = TEST_OWNER_TOKEN, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._csrf_token: str | None = None
        if owner_token is not None and ensure_owner(self.application, owner_token):
            self.set_cookie(OWNER_COOKIE, owner_token)

    def csrf_token(self) -> str:
        """The token the site gave this client's session, read from a page as htmx reads it."""
        if self._csrf_token is None:
            page = super().open("/owner/claim", method="GET").get_data(as_text=True)
            found = _CSRF_IN_PAGE.search(page)
            assert found, "no CSRF token in <body hx-headers> of /owner/claim"
            self._csrf_token = found.group(1)
        return self._csrf_token

    def open(self, *args, csrf: bool = True, **kwargs):
        method = kwargs.get("method", "GET").upper()
        if csrf and method in STATE_CHANGING:
            headers = dict(kwargs.pop("headers", None) or {})
            headers.setdefault("X-CSRFToken", self.csrf_token())
            kwargs["headers"] = headers
        return super().open(*args, **kwargs)


# Every app.test_client() in the suite, other areas' tests included, is a BrowserClient.
flask.Flask.test_client_class = BrowserClient


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
        "JOBS_EXECUTION": "manual",  # nothing trains until a test calls runner.run_next()
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

    def __init__(
        self,
        config: dict,
        *,
        concurrency: int | None,
        log_path: Path,
        wrapper: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        extra = dict(env or {})
        env = {
            **os.environ,
            "DATABASE_URL": config["DATABASE_URL"],
            "CELERY_BROKER_URL": config["CELERY_BROKER_URL"],
            "BPE_JOB_QUEUE": config["JOB_QUEUE"],
            "BPE_AUTO_MIGRATE": "0",
            "BPE_JOBS_KILL_AFTER": str(config.get("JOBS_KILL_AFTER", 1.0)),
            **extra,
        }
        self.log_path = log_path
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        # `wrapper` runs the worker under another command (a wrong clock: `faketime`).
        command = [*wrapper, sys.executable, "-m", "celery", "-A", "webapp.celery_app", "worker"]
        name = f"w{uuid.uuid4().hex[:8]}@%h"
        # No `-c` (concurrency None): the worker's settings decide (BPE_WORKER_CONCURRENCY).
        options = ["-c", str(concurrency)] if concurrency is not None else []
        options += ["-n", name, "--loglevel", "INFO", "--without-mingle"]
        # A session of its own, so stop() can end the pool's children with it: a worker killed
        # mid-task left its forked child running after the suite (seen after a CI run).
        self.process = subprocess.Popen(
            [*command, *options, "--without-gossip"],
            env=env,
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
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
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture
def celery_workers(app_config, tmp_path):
    """start(concurrency=1) -> a running CeleryWorker on the app's database and queue."""
    started: list[CeleryWorker] = []

    def start(
        concurrency: int | None = 1,
        *,
        wrapper: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> CeleryWorker:
        need_broker()
        worker = CeleryWorker(
            app_config,
            concurrency=concurrency,
            log_path=tmp_path / f"worker{len(started)}.log",
            wrapper=wrapper,
            env=env,
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
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


@pytest.fixture
def owner(app) -> TestOwner:
    """The test owner: `client` is their browser; make_corpus/make_tokenizer rows are theirs."""
    return TestOwner(ensure_owner(app, TEST_OWNER_TOKEN), TEST_OWNER_TOKEN, app)


@pytest.fixture
def client(app, owner):
    return owner.client()


@pytest.fixture
def make_owner(app):
    """make_owner() -> TestOwner: another owner, with a fresh random token."""
    from webapp.plumbing.owners import new_token

    def _make() -> TestOwner:
        token = new_token()
        return TestOwner(ensure_owner(app, token), token, app)

    return _make


@pytest.fixture
def stranger(app) -> BrowserClient:
    """A browser that owns nothing (yet): pages give it CSRF tokens, it has no owner cookie."""
    return BrowserClient(app, app.response_class, owner_token=None)


@pytest.fixture
def raw_client(app) -> FlaskClient:
    """A plain client: no owner cookie and no CSRF token unless a test sends them itself."""
    return FlaskClient(app, app.response_class, use_cookies=True)


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def job_runner(app):
    """The app's job backend (manual execution: `job_runner.run_next()` trains the oldest queued
    job)."""
    return app.extensions["bpe_jobs"]


@pytest.fixture
def make_corpus(app):
    """make_corpus(text=SAMPLE_TEXT, *, name="sample", owner=<the test owner>) -> CorpusRef,
    stored like an upload. `owner=` a TestOwner from make_owner(), or None for no owner."""

    def _make(
        text: str = SAMPLE_TEXT, *, name: str = "sample", owner: TestOwner | None | str = "test"
    ) -> CorpusRef:
        owner_id = ensure_owner(app, TEST_OWNER_TOKEN) if owner == "test" else None
        if isinstance(owner, TestOwner):
            owner_id = owner.id
        row, _ = store_text(
            app.extensions["bpe_db"],
            text,
            name=name,
            tmp_dir=app.config["UPLOAD_TMP_DIR"],
            owner_id=owner_id,
        )
        return CorpusRef(row.id, row.slug, row.name, row.sha256)

    return _make


@pytest.fixture
def make_tokenizer(app, make_corpus):
    """make_tokenizer(text=SAMPLE_TEXT, *, vocab_size=300, mode="chunked", ...) -> TokenizerRef.

    Trains with the reference trainer (tiny texts, quick) and stores the result exactly as a
    finished job does. Pass `corpus=` (a CorpusRef) to reuse a corpus, `owner=` as make_corpus.
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
        owner: TestOwner | None | str = "test",
    ) -> TokenizerRef:
        corpus = corpus or make_corpus(text, owner=owner)
        owner_id = ensure_owner(app, TEST_OWNER_TOKEN) if owner == "test" else None
        if isinstance(owner, TestOwner):
            owner_id = owner.id
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
            row = store_tokenizer(session, tok, corpus_id=corpus.id, owner_id=owner_id)
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
