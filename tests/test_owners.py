"""Owners, CSRF and same-origin: every state change refused (403, never 5xx, nothing
changed) without the owner's proof or from another origin; the real owner succeeds; an owner
link claims ownership on a second browser; lists and pages hand out only the visitor's links."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from tests.conftest import BrowserClient, TestOwner
from tests.same_page import comparable
from webapp.storage.models import (
    Base,
    Corpus,
    Merge,
    PlaygroundShare,
    Tokenizer,
    TrainingJob,
    VocabEntry,
)

TRAIN = {"mode": "chunked", "vocab_size": "300", "trainer": "reference", "pattern": "gpt4"}


@pytest.fixture
def app_config(app_config):
    """Room for the matrix's jobs: the per-owner limit has a test of its own below."""
    return {**app_config, "JOBS_PER_OWNER": 10}


def snapshot(app) -> dict[str, list[tuple]]:
    """Every row of every table: what "the target is unchanged" is checked against."""
    with app.extensions["bpe_db"].read_scope() as session:
        return {
            table.name: sorted(
                (tuple(str(v) for v in row) for row in session.execute(select(table))),
            )
            for table in Base.metadata.sorted_tables
        }


@dataclass
class Target:
    """One state change, as its owner sends it."""

    name: str
    method: str
    url: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    owners_only: bool = True  # False: anyone with the link may (upload, share)
    api: bool = False


@pytest.fixture
def targets(client, make_corpus, make_tokenizer) -> list[Target]:
    corpus = make_corpus()
    tok = make_tokenizer(corpus=corpus)
    spare = make_tokenizer(corpus=corpus, vocab_size=290)
    api_spare = make_tokenizer(corpus=corpus, vocab_size=295)
    doomed = make_tokenizer("text of a corpus to delete", vocab_size=260)
    api_doomed = make_tokenizer("another corpus to delete", vocab_size=260)
    started = client.post(f"/c/{corpus.slug}/train", data=TRAIN)
    job_id = started.headers["Location"].rsplit("/", 1)[-1]
    c, t = corpus.slug, tok.slug
    return [
        Target("rename corpus", "POST", f"/c/{c}/rename", {"data": {"name": "new name"}}),
        Target("train", "POST", f"/c/{c}/train", {"data": TRAIN}),
        Target("naive vs chunked", "POST", f"/c/{c}/compare", {"data": {"vocab_size": "300"}}),
        # After the two above: once the owner allows it, others may train.
        Target("allow training", "POST", f"/c/{c}/training", {"data": {"allow": "1"}}),
        Target("cancel a job", "POST", f"/c/{c}/jobs/{job_id}/cancel"),
        Target("rename tokeniser", "POST", f"/t/{t}/rename", {"data": {"name": "mine"}}),
        Target("delete tokeniser", "POST", f"/t/{spare.slug}/delete"),
        Target(
            "delete corpus",
            "POST",
            f"/c/{doomed.corpus_slug}/delete",
            {"data": {"confirm_tokenizers": "1"}},
        ),
        Target(
            "API rename corpus",
            "PATCH",
            f"/api/corpora/{c}",
            {"json": {"name": "api name"}},
            api=True,
        ),
        Target(
            "API delete tokeniser", "DELETE", f"/api/t/{api_spare.slug}", {"json": {}}, api=True
        ),
        Target(
            "API delete corpus",
            "DELETE",
            f"/api/corpora/{api_doomed.corpus_slug}",
            {"json": {"delete_tokenizers": True}},
            api=True,
        ),
        Target("upload", "POST", "/corpora", {"data": {"text": "new text"}}, owners_only=False),
        Target(
            "API upload",
            "POST",
            "/api/corpora",
            {"json": {"text": "new api text"}},
            owners_only=False,
            api=True,
        ),
        Target("share", "POST", f"/t/{t}/share", {"data": {"text": "hi"}}, owners_only=False),
    ]


def attacks(target: Target, owner: TestOwner, other: TestOwner, other_browser: BrowserClient):
    """(what, client, extra request arguments) that must all be refused with 403."""
    yield "no CSRF token", None, {"csrf": False}
    yield "a wrong CSRF token", None, {"csrf": False, "headers": {"X-CSRFToken": "forged.x.y"}}
    yield (
        "another session's CSRF token",
        None,
        {"csrf": False, "headers": {"X-CSRFToken": other_browser.csrf_token()}},
    )
    for site in ("cross-site", "same-site"):
        yield f"Sec-Fetch-Site: {site}", None, {"headers": {"Sec-Fetch-Site": site}}
    for origin in ("https://evil.example", "null", "http://", "not a url", "http://localhost:1"):
        yield f"Origin: {origin}", None, {"headers": {"Origin": origin}}
    if target.api and "json" in target.kwargs:
        yield "a text/plain JSON body", None, {"text_plain": True}
    if target.owners_only:
        yield "another owner's browser", other_browser, {}
        yield "another owner's bearer token", other_browser, {"headers": other.bearer}


def _send(client, target: Target, extra: dict):
    kwargs = {**target.kwargs, **{k: v for k, v in extra.items() if k != "text_plain"}}
    if extra.get("text_plain"):
        import json

        kwargs["data"] = json.dumps(kwargs.pop("json"))
        kwargs["content_type"] = "text/plain"
    headers = {**target.kwargs.get("headers", {}), **extra.get("headers", {})}
    if headers:
        kwargs["headers"] = headers
    return client.open(target.url, method=target.method, **kwargs)


def check_state_changes(
    app, client, owner: TestOwner, other: TestOwner, targets: list[Target], *, fresh=None
) -> int:
    """Send every attack on every target (each refused with 403, nothing changed), then the
    owner's own request (it changes something). Returns how many were refused. `fresh(target)`
    gives the target to send each time (a file upload's stream is read only once)."""
    other_browser = other.client()
    refused = 0
    for target in targets:
        for what, sender, extra in attacks(target, owner, other, other_browser):
            before = snapshot(app)
            response = _send(sender or client, fresh(target) if fresh else target, extra)
            where = f"{target.name} with {what}"
            assert response.status_code == 403, (where, response.get_data(as_text=True)[:300])
            assert snapshot(app) == before, where
            refused += 1
        before = snapshot(app)
        response = _send(client, fresh(target) if fresh else target, {})
        assert response.status_code in (200, 201, 303), (target.name, response.status_code)
        assert snapshot(app) != before, f"{target.name}: the owner's request changed nothing"
    return refused


def test_every_state_change_needs_the_owners_proof_and_this_origin(
    app, client, owner, make_owner, targets
):
    assert check_state_changes(app, client, owner, make_owner(), targets) >= 150


def test_a_403_says_why_as_a_page_or_json(app, client, make_corpus):
    corpus = make_corpus()
    page = client.post(f"/c/{corpus.slug}/rename", data={"name": "x"}, csrf=False)
    assert page.status_code == 403 and "CSRF token" in page.get_data(as_text=True)
    api = client.patch(
        f"/api/corpora/{corpus.slug}", data='{"name": "x"}', content_type="text/plain"
    )
    assert api.status_code == 403 and "application/json" in api.get_json()["error"]


def test_bearer_token_scripts_need_no_csrf_token_and_raw_uploads_work(raw_client, owner):
    reply = raw_client.post(
        "/api/corpora?name=raw", data=b"raw text from curl", headers=owner.bearer
    )
    assert reply.status_code == 201, reply.get_data(as_text=True)
    assert reply.get_json()["owner_token"] is None  # already an owner: no new token
    slug = reply.get_json()["slug"]
    renamed = raw_client.patch(
        f"/api/corpora/{slug}", json={"name": "by script"}, headers=owner.bearer
    )
    assert renamed.status_code == 200 and renamed.get_json()["name"] == "by script"
    unknown = raw_client.post(
        "/api/corpora", data=b"x", headers={"Authorization": "Bearer not-a-token"}
    )
    assert unknown.status_code == 403


def test_a_raw_upload_without_a_bearer_token_is_refused(raw_client, app):
    before = snapshot(app)
    reply = raw_client.post("/api/corpora", data=b"plain text", content_type="text/plain")
    assert reply.status_code == 403 and "Bearer" in reply.get_json()["error"]
    assert snapshot(app) == before


# ----- becoming an owner, and the owner link -----------------------------------------------------
def _owner_link(page: str) -> str | None:
    found = re.search(r'value="(http://localhost/owner/claim#[A-Za-z0-9_-]{43})"', page)
    return found.group(1) if found else None


def test_first_upload_makes_an_owner_and_shows_the_owner_link_once(app, stranger):
    response = stranger.post("/corpora", data={"text": "my first corpus", "name": "first"})
    assert response.status_code == 303
    cookie = response.headers["Set-Cookie"]
    assert "bpe_owner=" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie  # plain http here; over https it is Secure
    corpus_page = stranger.get(response.headers["Location"]).get_data(as_text=True)
    link = _owner_link(corpus_page)
    assert link is not None
    assert _owner_link(stranger.get(response.headers["Location"]).get_data(as_text=True)) is None
    token = link.split("#", 1)[1]
    assert stranger.get_cookie("bpe_owner").value == token
    # Only the token's SHA-256 is stored.
    with app.extensions["bpe_db"].read_scope() as session:
        from webapp.storage.models import Owner

        stored = session.scalars(select(Owner.token_sha256)).all()
    import hashlib

    assert hashlib.sha256(token.encode()).hexdigest() in stored
    assert not any(token in value for value in stored)


def test_a_missed_owner_link_can_be_seen_again_in_the_owning_browser(app, stranger, raw_client):
    assert "owns nothing here yet" in stranger.get("/owner").text  # no owner, no link
    made = stranger.post("/corpora", data={"text": "a corpus", "name": "mine"})
    first = _owner_link(stranger.get(made.headers["Location"]).text)  # the banner, once
    again = stranger.get("/owner")
    assert again.status_code == 200 and again.headers["Cache-Control"] == "no-store"
    assert 'value="' + first + '"' in again.text and "1 corpus," in again.text
    assert "Your owner link" in stranger.get("/").text  # reachable from every page
    # Someone else, or a script with a bearer token, is never shown this browser's link.
    token = first.split("#", 1)[1]
    assert token not in raw_client.get("/owner").text
    bearer = raw_client.get("/owner", headers={"Authorization": f"Bearer {token}"})
    assert token not in bearer.text


def test_an_owner_link_claims_ownership_on_a_second_browser(app, stranger, make_corpus):
    made = stranger.post("/corpora", data={"text": "corpus of the first device"})
    slug = made.headers["Location"].rsplit("/", 1)[-1]
    token = _owner_link(stranger.get(made.headers["Location"]).get_data(as_text=True)).split("#")[1]

    second = BrowserClient(app, app.response_class, owner_token=None)
    had = second.post("/corpora", data={"text": "what the second device had"})
    had_slug = had.headers["Location"].rsplit("/", 1)[-1]
    before = snapshot(app)
    assert second.post(f"/c/{slug}/rename", data={"name": "x"}).status_code == 403
    assert snapshot(app) == before
    assert second.get("/owner/claim").status_code == 200
    wrong = second.post("/owner/claim", data={"token": "A" * 43})
    assert wrong.status_code == 403
    asked = second.post("/owner/claim", data={"token": token})
    assert asked.status_code == 200 and "moves all of them" in asked.get_data(as_text=True)
    claimed = second.post("/owner/claim", data={"token": token, "move": "yes"})
    assert claimed.status_code == 303
    assert second.post(f"/c/{slug}/rename", data={"name": "renamed there"}).status_code == 303
    home = second.get("/").get_data(as_text=True)
    assert f"/c/{slug}" in home and "renamed there" in home
    assert f"/c/{had_slug}" in home  # what the second browser owned moved along
    # The first device still owns it too.
    assert stranger.post(f"/c/{slug}/rename", data={"name": "back"}).status_code == 303


def test_a_crafted_claim_link_says_what_would_move_where_before_anything_moves(app, make_owner):
    """Someone sends their own owner link: one click on it must not hand the visitor's corpora
    to them. The page says what this browser owns, that it would go to the link's owner, and how
    much that owner has; nothing moves until the visitor confirms."""
    attacker, victim = make_owner(), make_owner()
    attacker.client().post("/corpora", data={"text": "the attacker's bait corpus"})
    browser = victim.client()
    for text in ("the victim's first corpus", "the victim's second corpus"):
        assert browser.post("/corpora", data={"text": text}).status_code == 303
    before = snapshot(app)
    asked = browser.post("/owner/claim", data={"token": attacker.token})
    page = asked.get_data(as_text=True)
    assert asked.status_code == 200
    assert "<strong>2 corpora</strong>" in page and "moves all of them to the link" in page
    assert "The link's owner has 1 corpus" in page
    assert snapshot(app) == before  # nothing moved, no owner deleted


def test_a_browser_that_owns_nothing_claims_in_one_step(app, make_owner, stranger):
    owner = make_owner()
    owner.client().post("/corpora", data={"text": "a corpus to claim"})
    assert stranger.post("/owner/claim", data={"token": owner.token}).status_code == 303


def test_api_upload_hands_out_the_token_once(raw_client):
    first = raw_client.post("/api/corpora", json={"text": "api owner text"})
    assert first.status_code == 201
    token = first.get_json()["owner_token"]
    assert token and len(token) >= 43  # 256 bits in base64url
    assert first.get_json()["owner_link"].endswith("#" + token)
    bearer = {"Authorization": f"Bearer {token}"}
    again = raw_client.post("/api/corpora", json={"text": "api owner text"}, headers=bearer)
    assert again.status_code == 200 and again.get_json()["owner_token"] is None
    assert again.get_json()["slug"] == first.get_json()["slug"]
    fresh = FlaskClient(raw_client.application, raw_client.application.response_class)
    new = fresh.post("/api/owners", json={})
    assert new.status_code == 201 and len(new.get_json()["owner_token"]) >= 43
    assert raw_client.post("/api/owners", json={}, headers=bearer).status_code == 409


# ----- what a visitor is shown -------------------------------------------------------------------
def test_nobody_is_handed_a_link_they_were_not_given(app, client, make_owner, make_tokenizer):
    corpus_tok = make_tokenizer()
    second_tok = make_tokenizer(corpus=_corpus_ref(app, corpus_tok), vocab_size=280)
    job = client.post(f"/c/{corpus_tok.corpus_slug}/train", data=TRAIN)
    job_url = job.headers["Location"]
    share = client.post(f"/t/{corpus_tok.slug}/share", data={"text": "hello"})
    secrets = {corpus_tok.corpus_slug, second_tok.slug}
    visitor = make_owner().client()
    visitor.post("/corpora", data={"text": "the visitor's own corpus"})

    def shows_no_secret(url: str, allowed: set[str] = frozenset()) -> str:
        response = visitor.get(url)
        assert response.status_code < 500, url
        body = response.get_data(as_text=True) + str(response.headers)
        for secret in secrets - allowed:
            assert secret not in body, (url, secret)
        return body

    shows_no_secret("/")
    shows_no_secret(f"/t/{corpus_tok.slug}")  # no corpus link, no compare-with choices
    shows_no_secret(f"/t/{corpus_tok.slug}/vocab")
    shows_no_secret(share.headers["Location"])
    assert visitor.get(f"/api/t/{corpus_tok.slug}").get_json()["corpus"]["slug"] is None
    shows_no_secret(f"/api/t/{corpus_tok.slug}")
    body = shows_no_secret(f"/c/{corpus_tok.corpus_slug}", {corpus_tok.corpus_slug})
    assert corpus_tok.slug not in body and "/jobs/" not in body  # not the owner's tokenisers
    assert visitor.get(job_url).status_code == 404  # job ids are sequential: owner only
    shows_no_secret(job_url)
    shows_no_secret("/c/AAAAAAAAAAAAAAAAAAAAAA")
    shows_no_secret(f"/compare/{corpus_tok.slug}/{corpus_tok.slug}")
    # The same text uploaded by the visitor is their own copy, under a new link.
    same = visitor.post("/api/corpora", json={"text": _corpus_text(app, corpus_tok)})
    assert same.status_code == 201 and same.get_json()["slug"] != corpus_tok.corpus_slug
    # The owner sees them all.
    owner_home = client.get("/").get_data(as_text=True)
    assert corpus_tok.corpus_slug in owner_home and second_tok.slug in owner_home
    owner_page = client.get(f"/t/{corpus_tok.slug}").get_data(as_text=True)
    assert second_tok.slug in owner_page and f"/c/{corpus_tok.corpus_slug}" in owner_page


def _corpus_ref(app, tok_ref):
    from tests.conftest import CorpusRef

    with app.extensions["bpe_db"].read_scope() as session:
        row = session.get(Corpus, tok_ref.corpus_id)
        return CorpusRef(row.id, row.slug, row.name, row.sha256)


def _corpus_text(app, tok_ref) -> str:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.get(Corpus, tok_ref.corpus_id).text


def test_training_on_someone_elses_corpus_only_if_they_allow_it(
    app, client, make_owner, make_corpus
):
    corpus = make_corpus()
    visitor = make_owner().client()
    page = visitor.get(f"/c/{corpus.slug}").get_data(as_text=True)
    assert "not allowed others to train" in page and 'name="vocab_size"' not in page
    assert visitor.post(f"/c/{corpus.slug}/train", data=TRAIN).status_code == 403
    assert client.post(f"/c/{corpus.slug}/training", data={"allow": "1"}).status_code == 303
    started = visitor.post(f"/c/{corpus.slug}/train", data=TRAIN)
    assert started.status_code == 303
    # The visitor owns that job: they see it, the corpus owner's lists do not hand it out.
    assert visitor.get(started.headers["Location"]).status_code == 200
    assert client.get(started.headers["Location"]).status_code == 404


# ----- deleting ----------------------------------------------------------------------------------
def count_rows(app) -> dict[str, int]:
    with app.extensions["bpe_db"].read_scope() as session:
        return {
            model.__tablename__: session.scalar(select(func.count()).select_from(model))
            for model in (Corpus, Tokenizer, Merge, VocabEntry, TrainingJob, PlaygroundShare)
        }


def test_deleting_a_corpus_with_tokenisers_asks_first_then_takes_them_all(
    app, client, make_tokenizer, job_runner
):
    tok = make_tokenizer()
    corpus_slug = tok.corpus_slug
    client.post(f"/t/{tok.slug}/share", data={"text": "a share"})
    client.post(f"/c/{corpus_slug}/train", data=TRAIN)
    job_runner.run_next()  # a second tokeniser, made by a job
    client.post(f"/c/{corpus_slug}/train", data=TRAIN)  # and one still queued
    keep = make_tokenizer("some other corpus stays", vocab_size=260)
    kept_rows = count_rows(app)

    confirm_page = client.get(f"/c/{corpus_slug}/delete").get_data(as_text=True)
    assert "2 tokenisers" in confirm_page and "cancelled first" in confirm_page
    before = snapshot(app)
    refused = client.post(f"/c/{corpus_slug}/delete")
    assert refused.status_code == 409 and "confirm" in refused.get_data(as_text=True)
    assert snapshot(app) == before
    assert (
        client.post(f"/c/{corpus_slug}/delete", data={"confirm_tokenizers": "1"}).status_code == 409
    )
    done = client.post(f"/c/{corpus_slug}/delete", data={"confirm_tokenizers": "2"})
    assert done.status_code == 303
    assert client.get(f"/c/{corpus_slug}").status_code == 404
    assert client.get(f"/t/{tok.slug}").status_code == 404
    missing = client.get("/c/AAAAAAAAAAAAAAAAAAAAAA")
    gone = client.get(f"/c/{corpus_slug}")
    assert comparable(gone.data) == comparable(missing.data)  # the same 404
    assert job_runner.run_next() is None  # the queued job went with it
    rows = count_rows(app)
    assert rows["corpora"] == 1 and rows["tokenizers"] == 1
    assert rows["training_jobs"] == 0 and rows["playground_shares"] == 0
    assert rows["merges"] < kept_rows["merges"] and rows["merges"] == len(keep.tok.merges)
    assert_no_orphans(app)
    assert client.get(f"/t/{keep.slug}").status_code == 200


def assert_no_orphans(app) -> None:
    with app.extensions["bpe_db"].read_scope() as session:
        corpora = set(session.scalars(select(Corpus.id)))
        tokenizers = set(session.scalars(select(Tokenizer.id)))
        jobs = set(session.scalars(select(TrainingJob.id)))
        assert set(session.scalars(select(Tokenizer.corpus_id))) <= corpora
        assert set(session.scalars(select(TrainingJob.corpus_id))) <= corpora
        made = set(session.scalars(select(TrainingJob.tokenizer_id))) - {None}
        assert made <= tokenizers
        assert set(session.scalars(select(TrainingJob.rerun_of_id))) - {None} <= jobs
        for model in (Merge, VocabEntry, PlaygroundShare):
            assert set(session.scalars(select(model.tokenizer_id))) <= tokenizers, model


def test_deleting_a_tokeniser_takes_its_rows_and_its_job(app, client, make_corpus, job_runner):
    corpus = make_corpus()
    client.post(f"/c/{corpus.slug}/train", data=TRAIN)
    job_id = job_runner.run_next()
    with app.extensions["bpe_db"].read_scope() as session:
        slug = session.get(TrainingJob, job_id).tokenizer.slug
    assert client.get(f"/t/{slug}/delete").status_code == 200
    assert client.post(f"/t/{slug}/delete").status_code == 303
    assert client.get(f"/t/{slug}").status_code == 404
    assert client.get(f"/c/{corpus.slug}/jobs/{job_id}").status_code == 404
    assert count_rows(app)["merges"] == 0
    assert_no_orphans(app)
    assert client.get(f"/c/{corpus.slug}").status_code == 200  # the corpus stays


def test_renamed_items_show_their_names(client, make_tokenizer):
    tok = make_tokenizer()
    assert client.post(f"/t/{tok.slug}/rename", data={"name": "<b>mine</b>"}).status_code == 303
    page = client.get(f"/t/{tok.slug}").get_data(as_text=True)
    assert "&lt;b&gt;mine&lt;/b&gt;" in page and "<b>mine</b>" not in page
    assert client.post(f"/c/{tok.corpus_slug}/rename", data={"name": "  "}).status_code == 422
    renamed = client.patch(f"/api/t/{tok.slug}", json={"name": "api name"})
    assert renamed.status_code == 200 and renamed.get_json()["name"] == "api name"
    assert "api name" in client.get("/").get_data(as_text=True)


def test_one_owner_cannot_fill_the_queue(app_config, make_owner):
    from webapp import create_app, stop_runners

    app_config.update(JOBS_PER_OWNER=2, JOBS_MAX_QUEUED=8)
    app = create_app(app_config)
    try:
        greedy = BrowserClient(app, app.response_class, owner_token=None)
        made = greedy.post("/corpora", data={"text": "a corpus to train on a lot"})
        slug = made.headers["Location"].rsplit("/", 1)[-1]
        assert greedy.post(f"/c/{slug}/train", data=TRAIN).status_code == 303
        # A comparison needs two: one more than this owner has room for.
        pair = greedy.post(f"/c/{slug}/compare", data={"vocab_size": "300"})
        assert pair.status_code == 429 and "at most 2" in pair.get_data(as_text=True)
        assert greedy.post(f"/c/{slug}/train", data=TRAIN).status_code == 303
        before = snapshot(app)
        refused = greedy.post(f"/c/{slug}/train", data=TRAIN)
        assert refused.status_code == 429
        assert "at most 2" in refused.get_data(as_text=True)
        assert snapshot(app) == before
        # Someone else still gets in, and the greedy owner again once a job is gone.
        assert greedy.post(f"/c/{slug}/training", data={"allow": "1"}).status_code == 303
        other = BrowserClient(app, app.response_class, owner_token=None)
        assert other.post(f"/c/{slug}/train", data=TRAIN).status_code == 303
        assert greedy.post(f"/c/{slug}/jobs/1/cancel").status_code == 303
        assert greedy.post(f"/c/{slug}/train", data=TRAIN).status_code == 303
    finally:
        stop_runners(app)
        app.extensions["bpe_db"].dispose()
