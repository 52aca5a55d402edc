"""Rate limits per client address (webapp/plumbing/ratelimits.py): the N+1th request of a group
is a 429 with Retry-After and the site's refusal (a page, or JSON under /api/), clients count
apart, a trusted proxy's X-Forwarded-For names the client and a forged one does not, every
state-changing route is in a group or named a read, and a Redis storage is shared by two apps.

The rest of the suite runs with the limits off (tests/conftest.py); these turn them on.
"""

from __future__ import annotations

import os
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.conftest import BrowserClient, need_broker
from webapp import config, create_app, stop_runners
from webapp.plumbing import ratelimits
from webapp.plumbing.security import STATE_CHANGING

A, B = "127.0.0.2", "127.0.0.3"  # two clients (loopback addresses; nothing is sent anywhere)


def limited(app_config, **limits: object) -> dict:
    """The test config with the limits on, one key prefix per test, and these limits."""
    app_config.update(RATELIMIT_ENABLED=True, RATELIMIT_KEY_PREFIX=f"t{os.urandom(6).hex()}")
    app_config.update(limits)
    return app_config


@pytest.fixture
def make_app():
    made: list[Flask] = []

    def make(app_config: dict) -> Flask:
        app = create_app(app_config)
        made.append(app)
        return app

    yield make
    for app in made:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()


def upload(client, bearer: dict[str, str], address: str, name: str = "c"):
    return client.post(
        "/api/corpora",
        json={"name": name, "text": f"some text {name}"},
        headers=bearer,
        environ_base={"REMOTE_ADDR": address},
    )


def assert_refused(response, noun: str) -> int:
    """A rate-limit refusal: 429, Retry-After in seconds, the message naming the limit."""
    assert response.status_code == 429, response.get_data(as_text=True)[:300]
    retry_after = int(response.headers["Retry-After"])
    assert 1 <= retry_after <= 60
    if response.is_json:
        body = response.get_json()
        assert body["status"] == 429 and body["retry_after"] == retry_after
        message = body["error"]
    else:
        message = response.get_data(as_text=True)
        assert "<h1>Too many requests</h1>" in message
    assert f"Too many {noun} from your address: at most 2 per minute." in message
    assert re.search(r"Try again in \d+ s\.", message)
    return retry_after


def test_the_third_upload_in_a_minute_is_refused_with_retry_after(app_config, make_app, make_owner):
    app = make_app(limited(app_config, RATELIMIT_UPLOADS="2 per minute"))
    owner = make_owner()
    client = app.test_client()
    assert upload(client, owner.bearer, A, "one").status_code == 201
    assert upload(client, owner.bearer, A, "two").status_code == 201
    assert_refused(upload(client, owner.bearer, A, "three"), "uploads")


def test_the_upload_form_is_refused_with_the_sites_page(app_config, make_app, owner):
    app = make_app(limited(app_config, RATELIMIT_UPLOADS="2 per minute"))
    client = BrowserClient(app, app.response_class, owner_token=owner.token)
    for n in range(2):
        form = {"name": f"c{n}", "text": f"pasted text {n}"}
        response = client.post("/corpora", data=form, environ_base={"REMOTE_ADDR": A})
        assert response.status_code in (302, 303), response.status_code
    form = {"name": "c2", "text": "pasted text 2"}
    refused = client.post("/corpora", data=form, environ_base={"REMOTE_ADDR": A})
    assert_refused(refused, "uploads")
    assert refused.mimetype == "text/html"


def test_two_clients_count_apart(app_config, make_app, make_owner):
    app = make_app(limited(app_config, RATELIMIT_UPLOADS="2 per minute"))
    owner = make_owner()
    client = app.test_client()
    for n in range(2):
        assert upload(client, owner.bearer, A, f"a{n}").status_code == 201
    assert upload(client, owner.bearer, A, "a2").status_code == 429
    # The same owner from another address: its own count (the limit is the address's).
    assert upload(client, owner.bearer, B, "b0").status_code == 201
    assert upload(client, owner.bearer, B, "b1").status_code == 201
    assert upload(client, owner.bearer, B, "b2").status_code == 429


def test_new_owners_are_counted_and_known_owners_are_not(app_config, make_app, make_owner):
    app = make_app(limited(app_config, RATELIMIT_OWNERS="2 per minute"))
    raw = FlaskClient(app, app.response_class, use_cookies=False)  # a script with no token

    def new_owner(address: str):
        return raw.post("/api/owners", json={}, environ_base={"REMOTE_ADDR": address})

    assert new_owner(A).status_code == 201
    # A first upload without a token makes an owner too, and counts the same.
    made = raw.post(
        "/api/corpora", json={"name": "x", "text": "t"}, environ_base={"REMOTE_ADDR": A}
    )
    assert made.status_code == 201 and made.get_json()["owner_token"]
    assert_refused(new_owner(A), "new owners (a first upload, job or share without an owner token)")
    refused = raw.post(
        "/api/corpora", json={"name": "y", "text": "u"}, environ_base={"REMOTE_ADDR": A}
    )
    assert refused.status_code == 429
    assert new_owner(B).status_code == 201  # another client
    # An owner who proves who they are is never counted as a new one.
    owner = make_owner()
    for n in range(3):
        assert upload(raw, owner.bearer, A, f"known{n}").status_code == 201


def route_urls(app: Flask) -> list[tuple[str, str, str]]:
    """(endpoint, method, a URL of it with made-up arguments) for every state-changing rule."""
    found = []
    with app.test_request_context():
        for rule in app.url_map.iter_rules():
            methods = sorted((rule.methods or set()) & STATE_CHANGING)
            if not methods:
                continue
            found.append(
                (rule.endpoint, methods[0], rule.build(dict.fromkeys(rule.arguments, 1))[1])
            )
    return found


def test_every_state_changing_route_is_in_a_group_or_named_a_read(app):
    grouped = [e for _, _, endpoints in ratelimits.GROUPS.values() for e in endpoints]
    named = set(grouped) | set(ratelimits.READS_BY_POST)
    assert len(named) == len(grouped) + len(ratelimits.READS_BY_POST)  # none in two places
    changing = {endpoint for endpoint, _, _ in route_urls(app)}
    assert changing - named == set(), "a new write route: give it a group in GROUPS"
    assert named - changing == set(), "a limit names a route that no longer exists"


@pytest.mark.parametrize("group", sorted(ratelimits.GROUPS))
def test_each_groups_routes_share_its_limit(group, app_config, make_app, owner):
    """Every route of a group counts against one limit: the group's third request, whichever
    route it goes to (missing slugs: the limit counts before the view looks anything up)."""
    key, noun, endpoints = ratelimits.GROUPS[group]
    app = make_app(limited(app_config, **{key: "2 per minute"}))
    client = BrowserClient(app, app.response_class, owner_token=owner.token)
    urls = [(method, url) for endpoint, method, url in route_urls(app) if endpoint in endpoints]
    assert len(urls) == len(endpoints)
    answers = []
    for n in range(3):
        method, url = urls[n % len(urls)]
        answers.append(client.open(url, method=method, environ_base={"REMOTE_ADDR": A}, json={}))
    assert [a.status_code == 429 for a in answers] == [False, False, True], [
        a.status_code for a in answers
    ]
    assert_refused(answers[2], noun)


def test_reads_meet_the_requests_limit_and_static_files_none(app_config, make_app):
    app = make_app(limited(app_config, RATELIMIT_APPLICATION="2 per minute"))
    client = BrowserClient(app, app.response_class, owner_token=None)
    for _ in range(5):
        assert client.get("/static/app.js", environ_base={"REMOTE_ADDR": A}).status_code == 200
    assert client.get("/", environ_base={"REMOTE_ADDR": A}).status_code == 200
    assert client.get("/owner/claim", environ_base={"REMOTE_ADDR": A}).status_code == 200
    assert_refused(client.get("/", environ_base={"REMOTE_ADDR": A}), "requests")
    assert client.get("/", environ_base={"REMOTE_ADDR": B}).status_code == 200


def test_a_trusted_proxy_names_the_client_and_a_forged_header_does_not(app_config, make_app):
    app = make_app(
        limited(app_config, RATELIMIT_APPLICATION="2 per minute", FORWARDED_ALLOW_IPS=[A])
    )
    client = app.test_client()

    def get(peer: str, forwarded: str):
        return client.get(
            "/", environ_base={"REMOTE_ADDR": peer}, headers={"X-Forwarded-For": forwarded}
        ).status_code

    # Behind the proxy A, clients 127.0.0.7 and 127.0.0.8 count apart, and a client cannot
    # escape its count by writing addresses of its own in front of what the proxy adds.
    assert [get(A, "127.0.0.7"), get(A, "9.9.9.9, 127.0.0.7"), get(A, "127.0.0.7")] == [
        200,
        200,
        429,
    ]
    assert get(A, "127.0.0.8") == 200
    # From a peer that is no trusted proxy, the header is the client's own words: ignored.
    assert [get(B, "127.0.0.20"), get(B, "127.0.0.21"), get(B, "127.0.0.22")] == [200, 200, 429]


def test_limits_are_settings_and_a_bad_one_stops_start_up(app_config):
    parsed = config.from_env({"BPE_RATELIMIT_JOBS": "3 per minute; 9 per hour"})
    assert parsed == {"RATELIMIT_JOBS": "3 per minute; 9 per hour"}
    with pytest.raises(ValueError, match="BPE_RATELIMIT_JOBS"):
        config.from_env({"BPE_RATELIMIT_JOBS": "lots"})
    with pytest.raises(ValueError, match="RATELIMIT_WRITES"):
        create_app({**app_config, "RATELIMIT_WRITES": "often"})


@pytest.mark.parametrize("shared", [True, False], ids=["redis", "memory"])
def test_a_redis_storage_is_shared_by_two_apps(shared, app_config, make_app, make_owner):
    """Two web processes on one Redis count a client once; in memory each counts its own."""
    storage = need_broker() if shared else "memory://"
    settings = limited(app_config, RATELIMIT_UPLOADS="2 per minute", RATELIMIT_STORAGE_URI=storage)
    first, second = make_app(dict(settings)), make_app(dict(settings))
    owner = make_owner()
    assert upload(first.test_client(), owner.bearer, A, "one").status_code == 201
    assert upload(second.test_client(), owner.bearer, A, "two").status_code == 201
    third = upload(second.test_client(), owner.bearer, A, "three")
    if shared:
        assert_refused(third, "uploads")
    else:
        assert third.status_code == 201


def test_an_unreachable_redis_leaves_the_site_up_and_the_limits_counting_in_memory(
    app_config, make_app, make_owner
):
    # Port 1 on loopback: nothing listens, so every connection is refused at once.
    app = make_app(
        limited(
            app_config,
            RATELIMIT_UPLOADS="2 per minute",
            RATELIMIT_OWNERS="1 per minute",
            RATELIMIT_STORAGE_URI="redis://127.0.0.1:1/0",
        )
    )
    owner = make_owner()
    client = app.test_client()
    assert client.get("/", environ_base={"REMOTE_ADDR": A}).status_code == 200
    assert upload(client, owner.bearer, A, "one").status_code == 201
    assert upload(client, owner.bearer, A, "two").status_code == 201
    assert_refused(upload(client, owner.bearer, A, "three"), "uploads")
    # New owners are counted in memory too (the request's own limit found the storage down).
    raw = FlaskClient(app, app.response_class, use_cookies=False)
    assert raw.post("/api/owners", json={}, environ_base={"REMOTE_ADDR": B}).status_code == 201
    assert raw.post("/api/owners", json={}, environ_base={"REMOTE_ADDR": B}).status_code == 429
