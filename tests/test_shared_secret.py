"""One secret for every web process (docs/operations.md, "One secret key"): under the celery
backend a form loaded from one gunicorn posts to another, and a web process without a shared
SECRET_KEY refuses to start. Real servers: the Makefile's gunicorn line, twice."""

from __future__ import annotations

import http.cookiejar
import os
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.conftest import need_broker
from tests.readme_server import start_readme_server
from tests.waiting import free_port, wait_for_server
from webapp import create_app

pytestmark = [pytest.mark.celery, pytest.mark.slow]

CSRF_INPUT = re.compile(r'name="csrf_token" value="([^"]+)"')


def server_env(app_config: dict, port: int, **extra: str) -> dict[str, str]:
    return {
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "DATABASE_URL": app_config["DATABASE_URL"],
        "BPE_JOB_BACKEND": "celery",
        "CELERY_BROKER_URL": need_broker(),
        "BPE_JOB_QUEUE": app_config.get("JOB_QUEUE", "bpe-test-shared-secret"),
        **extra,
    }


class Servers:
    """gunicorn servers started by one test, each stopped after it."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, env: dict[str, str], *, without: tuple[str, ...] = ()):
        # start_readme_server lays env over os.environ: drop the names this server goes without.
        saved = {name: os.environ.pop(name) for name in without if name in os.environ}
        try:
            server = start_readme_server(env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        finally:
            os.environ.update(saved)
        self.started.append(server)
        return server

    def stop(self) -> None:
        for server in self.started:
            if server.poll() is None:
                server.terminate()
            server.communicate(timeout=30)


@pytest.fixture
def servers():
    started = Servers()
    yield started
    started.stop()


def answers(base: str) -> int:
    with urllib.request.urlopen(base + "/healthz", timeout=10) as response:
        return response.status


def test_a_form_loaded_from_one_web_process_posts_to_another(app_config, servers):
    key = os.urandom(32).hex()
    bases = []
    for _ in range(2):  # one after the other: the first one's master upgrades the schema
        port = free_port()
        servers.start(server_env(app_config, port, SECRET_KEY=key))
        bases.append(f"http://127.0.0.1:{port}")
        wait_for_server(lambda base=bases[-1]: answers(base))
    first, second = bases
    # One browser (one cookie jar: cookies do not care for ports), as behind a balancer.
    browser = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with browser.open(first + "/", timeout=30) as page:
        token = CSRF_INPUT.search(page.read().decode()).group(1)
    form = urllib.parse.urlencode(
        {"csrf_token": token, "name": "posted elsewhere", "text": "the cat sat on the mat"}
    ).encode()
    try:
        with browser.open(second + "/corpora", data=form, timeout=30) as answer:
            status, landed, body = answer.status, answer.url, answer.read().decode()
    except urllib.error.HTTPError as refused:
        pytest.fail(f"{refused.code}: {refused.read().decode()[:300]}")
    # The upload went through (a redirect to the new corpus's page, served by the second).
    assert status == 200 and landed.startswith(second + "/c/"), landed
    assert "posted elsewhere" in body


def test_without_a_shared_secret_key_the_celery_web_refuses_to_start(app_config, servers):
    port = free_port()
    server = servers.start(server_env(app_config, port), without=("SECRET_KEY",))
    _, stderr = server.communicate(timeout=60)
    assert server.returncode != 0
    message = stderr.decode(errors="replace")
    assert "set SECRET_KEY to the same value for every web process" in message, message[-2000:]
    assert "Traceback" not in message  # one line from the master, not a worker's crash
    # The app factory says the same to any other process that would serve pages.
    config = {**app_config, "JOB_BACKEND": "celery", "CELERY_BROKER_URL": need_broker()}
    del config["SECRET_KEY"]
    with pytest.raises(ValueError, match="set SECRET_KEY"):
        create_app(config)
    # A worker signs nothing, so it starts without one (webapp/celery_app.py).
    create_app(config, serves_pages=False).extensions["bpe_db"].dispose()
