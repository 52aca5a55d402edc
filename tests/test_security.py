"""Security headers on every route of app.url_map: HTML carries the CSP and nosniff,
downloads are attachments, no page holds inline code the CSP would block, hosts come from
configuration only."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from tests.waiting import wait_for_server
from webapp.plumbing.security import CSP

TRAIN = {"mode": "chunked", "vocab_size": "300", "trainer": "reference", "pattern": "gpt4"}
INLINE_CODE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "an inline <script>"),
    (re.compile(r"<style\b", re.I), "a <style> block"),
    (re.compile(r"\sstyle\s*=", re.I), "a style attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "an on* handler"),
    (re.compile(r"\shx-on", re.I), "an hx-on attribute"),
    (re.compile(r"javascript:", re.I), "a javascript: URL"),
    (re.compile(r"\shx-vars|\bjs:", re.I), "an htmx eval expression"),
]
# Payloads for the routes that take a body; every other POST is sent empty.
FORMS = {
    "corpora.upload": {"data": {"text": "a fresh corpus for the header test"}},
    "corpora.api_upload": {"json": {"text": "another fresh corpus", "name": "api"}},
    "corpora.train": {"data": TRAIN},
    "compare.start": {"data": {"vocab_size": "300", "trainer": "reference"}},
    "tokenizers.encode": {"data": {"text": "hello world"}},
    "tokenizers.share": {"data": {"text": "hello world"}},
    "compare.encode": {"data": {"text": "hello world"}},
    "api.encode": {"json": {"text": "hello world"}},
    "api.decode": {"json": {"ids": [104, 105]}},
    "manage.rename_corpus": {"data": {"name": "renamed"}},
    "manage.corpus_training": {"data": {"allow": "1"}},
    "manage.rename_tokenizer": {"data": {"name": "renamed"}},
    "manage.api_update_corpus": {"json": {"name": "renamed"}},
    "manage.api_update_tokenizer": {"json": {"name": "renamed"}},
    "manage.api_delete_corpus": {"json": {"delete_tokenizers": True}},
    "owner.api_new_owner": {"json": {}},
}
# These remove what they are pointed at, so they get a tokeniser (and corpus) of their own.
DESTRUCTIVE = {
    "manage.delete_corpus",
    "manage.delete_tokenizer",
    "manage.api_delete_corpus",
    "manage.api_delete_tokenizer",
}


@pytest.fixture
def world(client, owner, make_corpus, make_tokenizer):
    """One of everything a route can point at, all owned by the test owner."""
    corpus = make_corpus()
    toks = [make_tokenizer(corpus=corpus, vocab_size=size) for size in (280, 300, 320, 340)]
    job = client.post(f"/c/{corpus.slug}/train", data=TRAIN)
    assert job.status_code == 303, job.get_data(as_text=True)
    pair = client.post(f"/c/{corpus.slug}/compare", data={"vocab_size": "300"})
    assert pair.status_code == 303, pair.get_data(as_text=True)
    job_a, job_b = pair.headers["Location"].rstrip("/").split("/")[-2:]
    share = client.post(f"/t/{toks[0].slug}/share", data={"text": "shared text"})
    assert share.status_code == 303
    return {
        "slug": corpus.slug,
        "slug_a": toks[0].slug,
        "slug_b": toks[1].slug,
        "slug_c": toks[2].slug,
        "slug_d": toks[3].slug,
        "job_id": job.headers["Location"].rsplit("/", 1)[-1],
        "job_a": job_a,
        "job_b": job_b,
        "share_slug": share.headers["Location"].rsplit("/", 1)[-1],
        "token_id": "100",
        "fmt": "json",
        "evaluation_id": "1",  # none exists: a 404 page must carry the headers too
        "filename": "app.js",
    }


def _url(rule, values: dict, *, tokenizer_route: bool) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name == "slug" and tokenizer_route:
            return values["slug_a"]
        return str(values[name])

    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", value, rule.rule)


def _routes(app):
    for rule in app.url_map.iter_rules():
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            yield rule, method


def test_every_route_sends_the_security_headers(app, client, world, make_tokenizer):
    seen_html = 0
    checked = []
    for rule, method in _routes(app):
        endpoint = rule.endpoint
        values = dict(world)
        if endpoint in DESTRUCTIVE and method != "GET":
            own = make_tokenizer(vocab_size=260)
            values.update(slug=own.corpus_slug, slug_a=own.slug)
        tokenizer_route = rule.rule.startswith(("/t/", "/api/t/"))
        urls = [_url(rule, values, tokenizer_route=tokenizer_route)]
        if endpoint == "tokenizers.download":
            urls = [urls[0].rsplit("/", 1)[0] + f"/{fmt}" for fmt in ("json", "hf", "tiktoken")]
        for url in urls:
            response = client.open(url, method=method, **FORMS.get(endpoint, {}))
            where = f"{method} {url} -> {response.status_code}"
            assert response.status_code < 500, where
            headers = response.headers
            assert headers.get("X-Content-Type-Options") == "nosniff", where
            assert headers.get("Referrer-Policy") == "no-referrer", where
            if response.mimetype == "text/html":
                seen_html += 1
                assert headers.get("Content-Security-Policy") == CSP, where
                assert "unsafe" not in headers["Content-Security-Policy"]
                assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
                _assert_no_inline_code(response.get_data(as_text=True), where)
            if response.mimetype in ("text/html", "application/json"):  # pages and API answers
                assert headers.get("Cache-Control") == "no-store", where
            if endpoint == "tokenizers.download":
                assert response.status_code == 200, where
                assert headers["Content-Disposition"].startswith("attachment;"), where
            checked.append((rule.rule, method))
    assert len(checked) >= len(list(_routes(app))) + 2  # every route, three downloads
    assert seen_html >= 25


def _assert_no_inline_code(page: str, where: str) -> None:
    for pattern, what in INLINE_CODE:
        found = pattern.search(page)
        assert found is None, f"{where}: {what}: {page[found.start() : found.start() + 80]!r}"


def test_pages_configure_htmx_for_the_csp_and_send_the_csrf_token(client, make_tokenizer):
    made = make_tokenizer()
    page = client.get(f"/t/{made.slug}").get_data(as_text=True)
    meta = re.search(r'<meta name="htmx-config" content=\'([^\']+)\'>', page)
    assert meta is not None
    import json

    config = json.loads(meta.group(1))
    assert config == {"allowEval": False, "allowScriptTags": False, "includeIndicatorStyles": False}
    headers = re.search(r"<body hx-headers='([^']+)'>", page)
    assert headers is not None and set(json.loads(headers.group(1))) == {"X-CSRFToken"}


def test_an_untrusted_host_is_refused_and_never_echoed(client, make_tokenizer):
    made = make_tokenizer()
    response = client.get(f"/t/{made.slug}", headers={"Host": "evil.example"})
    assert response.status_code == 400
    assert "evil.example" not in response.get_data(as_text=True)
    api = client.get(f"/api/t/{made.slug}", headers={"Host": "evil.example"})
    assert api.status_code == 400 and api.is_json


@pytest.mark.parametrize(
    "host", ["LOCALHOST", "LocalHost:5000", "[::1]", "[::1]:5000", "[0:0:0:0:0:0:0:1]:80"]
)
def test_trusted_hosts_are_matched_in_any_case_and_as_bracketed_ipv6(client, host):
    """Host names are case-insensitive (RFC 3986) and an IPv6 literal comes in brackets; the
    API's absolute links then carry the host lowercased."""
    page = client.get("/", headers={"Host": host})
    assert page.status_code == 200, page.get_data(as_text=True)[:300]
    made = client.post("/api/corpora", json={"text": "host text"}, headers={"Host": host})
    assert made.status_code == 201
    assert made.get_json()["url"].startswith(f"http://{host.lower().removesuffix(':80')}/c/")


@pytest.mark.parametrize(
    "host", ["evil.example", "[::2]", "[::1", "localhost.evil.example", "LOCALHOST:99999"]
)
def test_untrusted_hosts_stay_refused_whatever_their_case(client, host):
    assert client.get("/", headers={"Host": host}).status_code == 400
    assert client.get("/", headers={"Host": host.upper()}).status_code == 400


def test_a_host_with_an_impossible_port_is_not_trusted():
    from webapp.plumbing.security import TrustedHosts

    trusted = TrustedHosts(["localhost", "::1"])
    assert trusted.allows("localhost:65535") and trusted.allows("[::1]:1")
    for host in ("localhost:65536", "localhost:0", "[::1]:99999", "localhost:", ""):
        assert not trusted.allows(host), host


def test_configured_hosts_are_trusted_in_any_case_and_with_subdomains(app_config):
    from webapp import create_app

    app_config["TRUSTED_HOSTS"] = ["Bpe.Example.ORG", ".lab.example", "[2001:db8::5]:8080"]
    app = create_app(app_config)
    try:
        client = app.test_client()
        for host, status in (
            ("bpe.example.org", 200),
            ("BPE.EXAMPLE.ORG:8443", 200),
            ("a.LAB.example", 200),
            ("lab.example.evil", 400),
            ("[2001:DB8:0::5]", 200),
            ("localhost", 400),
        ):
            assert client.get("/", headers={"Host": host}).status_code == status, host
    finally:
        app.extensions["bpe_db"].dispose()


def test_absolute_links_come_from_the_public_url(app_config, owner):
    from tests.conftest import BrowserClient
    from webapp import create_app

    app_config["PUBLIC_URL"] = "https://bpe.example.org"
    app = create_app(app_config)
    try:
        assert app.extensions["bpe_trusted_hosts"].names == {"bpe.example.org"}
        client = BrowserClient(app, app.response_class, owner_token=None)
        reply = client.post(
            "/api/corpora",
            json={"text": "public url text"},
            base_url="https://bpe.example.org",
            headers={"Origin": "https://bpe.example.org"},
            csrf=False,  # an anonymous JSON call carries no cookie, so it needs no token
        )
        assert reply.status_code == 201, reply.get_data(as_text=True)
        body = reply.get_json()
        assert body["url"].startswith("https://bpe.example.org/c/")
        assert body["owner_link"].startswith("https://bpe.example.org/owner/claim#")
        cookies = reply.headers.getlist("Set-Cookie")
        # Under https the owner cookie is a __Host- cookie: Secure, path /, no domain, so no
        # other page of this host can plant one beside it.
        [owner_cookie] = [c for c in cookies if c.startswith("__Host-bpe_owner=")]
        assert "HttpOnly" in owner_cookie and "SameSite=Lax" in owner_cookie
        assert "Secure" in owner_cookie and "Path=/;" in owner_cookie + ";"
        assert "Domain" not in owner_cookie
        token = owner_cookie.split(";", 1)[0].split("=", 1)[1]
        corpus_api = body["url"].replace("/c/", "/api/corpora/")
        visitor = FlaskClient(app, app.response_class, use_cookies=False)  # sends Cookie as given
        for name, owned in (("bpe_owner", False), ("__Host-bpe_owner", True)):
            reply = visitor.get(corpus_api, headers={"Cookie": f"{name}={token}"})
            assert reply.get_json()["owned"] is owned, name  # the plain name is not believed
        page = client.get("/", base_url="https://bpe.example.org")
        assert page.headers["Strict-Transport-Security"] == "max-age=31536000"
        [session_cookie] = page.headers.getlist("Set-Cookie")
        assert "HttpOnly" in session_cookie and "SameSite=Lax" in session_cookie
        assert "Secure" in session_cookie
        assert client.get("/", base_url="http://localhost").status_code == 400
    finally:
        app.extensions["bpe_db"].dispose()


def test_a_request_with_two_owner_cookies_is_refused(app, owner, make_tokenizer):
    """Cookie tossing: another page of this host set an owner cookie on a longer path, so the
    browser sends two; neither is believed, and the page says what to do."""
    made = make_tokenizer()
    raw_client = FlaskClient(app, app.response_class, use_cookies=False)  # sends Cookie as given
    cookies = {"Cookie": f"bpe_owner={owner.token}; bpe_owner=someone-elses-token"}
    refused = raw_client.get(f"/c/{made.corpus_slug}", headers=cookies)
    assert refused.status_code == 403
    assert "two owner cookies" in refused.get_data(as_text=True)
    api = raw_client.get(f"/api/corpora/{made.corpus_slug}", headers=cookies)
    assert api.status_code == 403 and "two owner cookies" in api.get_json()["error"]
    same_twice = {"Cookie": f"bpe_owner={owner.token}; bpe_owner={owner.token}"}
    assert raw_client.get(f"/c/{made.corpus_slug}", headers=same_twice).status_code == 200


def test_plain_http_sends_no_hsts(client):
    assert "Strict-Transport-Security" not in client.get("/").headers


@contextlib.contextmanager
def readme_server(tmp_path: Path, **env: str) -> Iterator[int]:
    """The README's server (gunicorn, one worker) on a free port of its own; yields the port."""
    from tests.readme_server import start_readme_server
    from tests.waiting import free_port

    port = free_port()
    env = {
        "PORT": str(port),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'served.sqlite3'}",
        "BPE_UPLOAD_TMP_DIR": str(tmp_path / "uploads"),
        "WEB_CONCURRENCY": "1",
        **env,
    }
    server = start_readme_server(
        env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, own_session=True
    )
    try:
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)


@pytest.mark.slow
@pytest.mark.embedded_only
@pytest.mark.parametrize("trusted", [False, True])
def test_the_server_believes_forwarded_https_only_from_a_named_proxy(tmp_path, trusted):
    """The README's server (gunicorn) takes X-Forwarded-Proto from FORWARDED_ALLOW_IPS only: any
    local process could otherwise pass plain http off as https (HSTS, Secure cookies)."""
    proxy = {"FORWARDED_ALLOW_IPS": "127.0.0.1"} if trusted else {}
    with readme_server(tmp_path, **proxy) as port:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/", headers={"X-Forwarded-Proto": "https"}
        )
        headers = wait_for_server(lambda: urllib.request.urlopen(request, timeout=10).headers)
    assert ("Strict-Transport-Security" in headers) is trusted


@pytest.mark.slow
@pytest.mark.embedded_only
def test_the_servers_own_refusals_carry_the_headers_and_echo_nothing(tmp_path):
    """What gunicorn refuses before the app sees it (a request line or headers it cannot read)
    is answered as JSON with the app's security headers, and quotes none of the sender's text."""
    hostile = "<script>alert(1)</script>"
    requests = {
        400: f"{hostile} / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        414: f"GET /{hostile}{'a' * 9000} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        431: "GET / HTTP/1.1\r\nHost: localhost\r\n"
        + "".join(f"X-{hostile[1:7]}-{i}: {i}\r\n" for i in range(200))
        + "\r\n",
    }
    answers = {}
    with readme_server(tmp_path) as port:
        wait_for_server(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10))
        for status, raw in requests.items():
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(raw.encode())
                answers[status] = b"".join(iter(lambda s=sock: s.recv(65536), b"")).decode()
    for status, answer in answers.items():
        head, _, body = answer.partition("\r\n\r\n")
        assert head.startswith(f"HTTP/1.1 {status} "), answer[:200]
        assert f"Content-Security-Policy: {CSP}" in head and "X-Frame-Options: DENY" in head
        assert json.loads(body)["status"] == status
        assert "script" not in body and "alert" not in body, body


@pytest.mark.slow
@pytest.mark.embedded_only
def test_the_server_answers_hosts_in_any_case_and_bracketed_ipv6(tmp_path):
    """Through gunicorn, raw requests: nothing between the socket and the app normalises the
    Host header for us."""
    hosts = {
        "LOCALHOST": 200,
        "[::1]": 200,
        "[::1]:5000": 200,
        "Localhost:5000": 200,
        "evil.example": 400,
        "EVIL.example": 400,
        "[::2]:5000": 400,
    }
    answers = {}
    with readme_server(tmp_path) as port:
        wait_for_server(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10))
        for host in hosts:
            raw = f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(raw.encode())
                answers[host] = b"".join(iter(lambda s=sock: s.recv(65536), b"")).decode()
    for host, status in hosts.items():
        assert answers[host].startswith(f"HTTP/1.1 {status} "), (host, answers[host][:300])
        if status == 400:
            assert host.lower() not in answers[host].lower()  # never echoed


def test_the_secret_key_survives_a_restart(tmp_path):
    """Pages left open across a restart keep working: the key is made once and kept."""
    from webapp.plumbing.security import load_or_make_secret_key

    first = load_or_make_secret_key(str(tmp_path))
    assert load_or_make_secret_key(str(tmp_path)) == first and len(first) >= 32
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0  # readable by the owner only
