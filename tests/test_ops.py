"""What an operator asks the site: /healthz, /readyz and /metrics (webapp/blueprints/ops.py)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import socket
import subprocess
from datetime import datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import test_rate_limits
from tests.conftest import TEST_DATABASE_URL, BrowserClient
from tests.readme_server import start_readme_server
from tests.relay import Forwarder, through
from tests.test_server import fetch
from tests.waiting import free_port, wait_for_server
from webapp import logs
from webapp.jobs.settings import JobSettings

limited = test_rate_limits.limited
make_app = test_rate_limits.make_app  # the fixture: create_app(config), each app stopped after


def samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, its labels sorted) -> value, parsed by the Prometheus text parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_healthz_and_readyz_answer_ok(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json() == {"status": "ok"}


@pytest.mark.embedded_only
def test_metrics_count_jobs_by_state_durations_heartbeats_and_requests(app, client, make_corpus):
    corpus = make_corpus()
    backend = app.extensions["bpe_jobs"]
    done = backend.submit(corpus.id, JobSettings(vocab_size=260))
    backend.run_next()
    backend.submit_many(corpus.id, [JobSettings(vocab_size=270), JobSettings(vocab_size=280)])
    running = backend.store.claim_next()  # one of them taken, as a worker would
    assert running is not None and done != running
    show = (("endpoint", "corpora.show"), ("method", "GET"))
    before = samples(client.get("/metrics").get_data(as_text=True))
    assert client.get(f"/c/{corpus.slug}").status_code == 200
    assert client.get("/c/no-such-corpus").status_code == 404

    page = client.get("/metrics")
    assert page.status_code == 200 and page.content_type.startswith("text/plain")
    got = samples(page.get_data(as_text=True))
    training = (("kind", "training"),)
    assert got[("bpe_jobs", (("kind", "training"), ("state", "succeeded")))] == 1
    assert got[("bpe_jobs", (("kind", "training"), ("state", "running")))] == 1
    assert got[("bpe_jobs", (("kind", "training"), ("state", "queued")))] == 1
    assert got[("bpe_job_queue_depth", training)] == 1
    assert got[("bpe_job_duration_seconds_count", training)] == 1
    worker = f"{socket.gethostname()}:{os.getpid()}"
    age = got[("bpe_worker_heartbeat_age_seconds", (("kind", "training"), ("worker", worker)))]
    assert 0 <= age < 30
    # Request latency by route: the endpoint's name, one series for every corpus id.
    count = ("bpe_request_duration_seconds_count", show)
    assert got[count] - before.get(count, 0) == 2
    assert not re.search(r'endpoint="/c/', page.get_data(as_text=True))


def test_health_endpoints_are_not_rate_limited(app_config, make_app):
    app = make_app(limited(app_config, RATELIMIT_APPLICATION="2 per minute"))
    client = BrowserClient(app, app.response_class, owner_token=None)
    for _ in range(5):
        for path in ("/healthz", "/readyz", "/metrics"):
            assert client.get(path).status_code == 200, path
    assert client.get("/").status_code == 200
    assert client.get("/").status_code == 200
    assert client.get("/").status_code == 429  # the limit is on, for pages


def test_readyz_fails_while_the_broker_cannot_be_reached(app_config, make_app):
    app_config.update(
        JOB_BACKEND="celery",
        CELERY_BROKER_URL=f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
        JOB_QUEUE="bpe-test-unreachable",
    )
    client = make_app(app_config).test_client()
    answer = client.get("/readyz")
    assert answer.status_code == 503
    assert "broker" in " ".join(answer.get_json()["problems"])
    assert client.get("/healthz").status_code == 200  # alive, only not ready


@pytest.mark.database("postgresql")
def test_readyz_fails_while_postgresql_is_down_and_recovers(app_config, make_app):
    relay = Forwarder.to_url(TEST_DATABASE_URL)
    try:
        app_config["DATABASE_URL"] = through(relay, TEST_DATABASE_URL)
        client = make_app(app_config).test_client()
        assert client.get("/readyz").status_code == 200
        relay.stop()
        down = client.get("/readyz")
        assert down.status_code == 503, down.get_data(as_text=True)
        assert "database" in " ".join(down.get_json()["problems"])
        assert client.get("/healthz").status_code == 200
        relay.open = True
        assert client.get("/readyz").status_code == 200
    finally:
        relay.close()


@pytest.mark.slow
@pytest.mark.embedded_only  # the README's run command is the embedded default
def test_metrics_under_gunicorn_add_up_every_worker_process(tmp_path):
    port = free_port()
    env = {
        "PORT": str(port),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'served.sqlite3'}",
        "WEB_CONCURRENCY": "3",
    }
    server = start_readme_server(env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(lambda: fetch(base + "/healthz"))
        for _ in range(29):  # a connection each, so the workers share them
            assert fetch(base + "/healthz")[0] == 200
        for _ in range(6):  # whichever worker answers the scrape counts all 30
            _, _, body = fetch(base + "/metrics")
            got = samples(body.decode())
            healthz = (("endpoint", "ops.healthz"), ("method", "GET"))
            assert got[("bpe_request_duration_seconds_count", healthz)] == 30
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in stderr


def test_log_lines_are_json_with_time_level_request_and_job(app_config, make_app):
    app = make_app(app_config)
    app.add_url_rule("/_log", "log_something", lambda: logging.getLogger("t").warning("hi") or "ok")
    buffer = io.StringIO()
    handler = logs.configure("json", stream=buffer)
    try:
        answer = app.test_client().get("/_log", headers={"X-Request-Id": "req-42"})
        with logs.job_context("training", 7):
            logging.getLogger("t").info("working")
    finally:
        logging.getLogger().removeHandler(handler)
    assert answer.headers["X-Request-Id"] == "req-42"
    request_line, job_line = [json.loads(one) for one in buffer.getvalue().splitlines()]
    assert request_line["message"] == "hi" and request_line["level"] == "WARNING"
    assert request_line["request_id"] == "req-42" and request_line["job_id"] is None
    assert job_line["job_id"] == 7 and job_line["job_kind"] == "training"
    assert datetime.fromisoformat(request_line["timestamp"]).tzinfo is not None
    # A request without an id (or with a strange one) gets a new one, told in the answer.
    made = app.test_client().get("/healthz", headers={"X-Request-Id": "<bad>"})
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["X-Request-Id"])
