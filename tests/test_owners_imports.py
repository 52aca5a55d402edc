"""Owners of imported tokenisers and of evaluations: the importer owns what
they import (rename and delete are theirs alone), references imported by `flask
import-references` belong to the site (nobody deletes them over the web), and evaluating a
tokeniser on a corpus follows training's rule (the corpus's owner, or anyone once the owner
allows it); the one who asks owns the evaluation and alone may cancel it."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import func, select

import bpe
from bpe.export_tiktoken import rank_file_text
from tests.conftest import BrowserClient
from tests.test_owners import Target, check_state_changes, snapshot
from webapp.jobs import evaluations
from webapp.storage.models import EvaluationRow, JobStatus, Owner, Tokenizer

SMALL = bpe.train(
    "the cat sat on the mat; the cat ate the rat. 123 456\n" * 5,
    vocab_size=280,
    mode="chunked",
    trainer="reference",
)
RANK_FILE = rank_file_text(SMALL).encode()


def import_form(client, name: str = "mine.tiktoken"):
    return client.post(
        "/import",
        data={"file": (io.BytesIO(RANK_FILE), name), "pattern": "gpt2"},
        content_type="multipart/form-data",
    )


def api_import(client, headers: dict | None = None):
    return client.post(
        "/api/tokenizers/import",
        data={"file": (io.BytesIO(RANK_FILE), "api.tiktoken"), "pattern": "gpt2"},
        content_type="multipart/form-data",
        headers=headers or {},
    )


def imported_slug(browser, made) -> str:
    """The form answers with the import's job page; the tokeniser is what the job made."""
    assert made.status_code == 303 and "/imports/" in made.headers["Location"]
    job = browser.get(
        "/api" + made.headers["Location"][made.headers["Location"].index("/imports/") :]
    )
    assert job.status_code == 200 and job.get_json()["status"] == "succeeded", job.get_data()
    return job.get_json()["tokenizer"]["slug"]


def tokenizer_row(app, slug: str) -> Tokenizer:
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.scalar(select(Tokenizer).where(Tokenizer.slug == slug))
        session.expunge(row)
        return row


def count(app, model) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.scalar(select(func.count()).select_from(model))


@pytest.fixture
def reference(app):
    """A reference as `flask import-references` stores it: the site's, no owner."""
    from webapp.content.imports import store_upload

    tok = bpe.importers.import_bytes(RANK_FILE, filename="cl100k_base.tiktoken", pattern="gpt2")
    row = store_upload(app.extensions["bpe_db"], tok, owner_id=None)
    with app.extensions["bpe_db"].session_scope() as session:
        session.get(Tokenizer, row.id).reference = "GPT-4"
    return row


# ----- imports -----------------------------------------------------------------------------------
def test_an_import_belongs_to_the_importer(app, client, owner, make_owner):
    made = import_form(client)
    slug = imported_slug(client, made)
    assert tokenizer_row(app, slug).owner_id == owner.id
    page = client.get(f"/t/{slug}").get_data(as_text=True)
    assert f'action="/t/{slug}/rename"' in page  # the owner's tools are shown

    other = make_owner().client()
    job_url = made.headers["Location"]
    assert client.get(job_url).status_code == 200
    assert other.get(job_url).status_code == 404  # the job page is the importer's alone
    assert other.post(job_url + "/cancel").status_code == 404
    assert f'action="/t/{slug}/rename"' not in other.get(f"/t/{slug}").get_data(as_text=True)
    before = snapshot(app)
    assert other.post(f"/t/{slug}/rename", data={"name": "taken"}).status_code == 403
    assert other.post(f"/t/{slug}/delete").status_code == 403
    assert snapshot(app) == before
    assert client.post(f"/t/{slug}/rename", data={"name": "my GPT"}).status_code == 303
    assert client.post(f"/t/{slug}/delete").status_code == 303
    assert client.get(f"/t/{slug}").status_code == 404


def test_a_first_import_makes_an_owner_and_shows_the_link_once(app, stranger):
    owners_before = count(app, Owner)
    made = import_form(stranger)
    assert made.status_code == 303 and "bpe_owner=" in made.headers["Set-Cookie"]
    assert count(app, Owner) == owners_before + 1
    first = stranger.get(made.headers["Location"]).get_data(as_text=True)  # the job's page
    assert "/owner/claim#" in first
    slug = imported_slug(stranger, made)
    assert "/owner/claim#" not in stranger.get(f"/t/{slug}").get_data(as_text=True)
    assert stranger.post(f"/t/{slug}/rename", data={"name": "ok"}).status_code == 303


def test_a_refused_import_makes_no_owner(app, stranger, raw_client):
    """Refused in the request (an empty file on the form; any refusal of the API's in-request
    import): nobody becomes an owner. A file only reading can refuse is the form's job's to
    refuse: the job, and so its owner, exist by then (its page says why)."""
    owners_before = count(app, Owner)
    refused = stranger.post(
        "/import",
        data={"file": (io.BytesIO(b""), "x.tiktoken"), "pattern": "gpt2"},
        content_type="multipart/form-data",
    )
    assert refused.status_code == 400
    assert count(app, Owner) == owners_before and "bpe_owner=" not in str(refused.headers)
    api = raw_client.post(
        "/api/tokenizers/import",
        data={"file": (io.BytesIO(b"not a rank file"), "x.tiktoken"), "pattern": "gpt2"},
        content_type="multipart/form-data",
    )
    assert api.status_code == 422
    assert count(app, Owner) == owners_before and "bpe_owner=" not in str(api.headers)

    queued = stranger.post(
        "/import",
        data={"file": (io.BytesIO(b"not a rank file"), "x.tiktoken"), "pattern": "gpt2"},
        content_type="multipart/form-data",
    )
    assert queued.status_code == 303 and count(app, Owner) == owners_before + 1
    page = stranger.get(queued.headers["Location"]).get_data(as_text=True)
    assert 'data-status="failed"' in page and "expected &#x27;base64-token rank&#x27;" in page
    assert count(app, Tokenizer) == 0


def test_api_import_hands_out_the_owner_token_once(app, raw_client, owner):
    fresh = api_import(raw_client)
    assert fresh.status_code == 201, fresh.get_data(as_text=True)
    token = fresh.get_json()["owner_token"]
    assert token and fresh.get_json()["owner_link"].endswith("#" + token)
    bearer = {"Authorization": f"Bearer {token}"}
    slug = fresh.get_json()["slug"]
    renamed = raw_client.patch(f"/api/t/{slug}", json={"name": "by script"}, headers=bearer)
    assert renamed.status_code == 200
    # An owner already: no new token, and the tokeniser is theirs.
    mine = api_import(raw_client, owner.bearer)
    assert mine.status_code == 201 and mine.get_json()["owner_token"] is None
    assert tokenizer_row(app, mine.get_json()["slug"]).owner_id == owner.id
    before = snapshot(app)
    unknown = api_import(raw_client, {"Authorization": "Bearer not-a-token"})
    assert unknown.status_code == 403 and snapshot(app) == before


def test_references_belong_to_the_site_and_nobody_deletes_them(app, client, reference):
    assert reference.owner_id is None
    page = client.get(f"/t/{reference.slug}").get_data(as_text=True)
    assert f'action="/t/{reference.slug}/rename"' not in page
    before = snapshot(app)
    assert client.post(f"/t/{reference.slug}/delete").status_code == 403
    assert client.post(f"/t/{reference.slug}/rename", data={"name": "x"}).status_code == 403
    api = client.delete(f"/api/t/{reference.slug}", json={})
    assert api.status_code == 403
    assert snapshot(app) == before


def test_import_references_stores_site_rows(app, runner, tmp_path):
    for name in ("gpt2", "cl100k_base", "o200k_base"):
        (tmp_path / f"{name}.tiktoken").write_bytes(RANK_FILE)
        (tmp_path / f"{name}.tiktoken.json").write_text(
            '{"pat_str": "\\\\S+|\\\\s+", "special_tokens": {}}'
        )
    result = runner.invoke(args=["import-references", str(tmp_path)])
    assert result.exit_code == 0, result.output
    with app.extensions["bpe_db"].read_scope() as session:
        rows = session.scalars(select(Tokenizer).where(Tokenizer.reference.is_not(None))).all()
        assert len(rows) == 3 and {r.owner_id for r in rows} == {None}


# ----- evaluations -------------------------------------------------------------------------------
@pytest.fixture
def evaluation_targets(app, client, owner, make_tokenizer, reference) -> list[Target]:
    """The evaluation state changes, as their owner sends them (see tests/test_owners.py)."""
    tok = make_tokenizer()
    queued = evaluations.request_evaluation(
        app.extensions["bpe_db"], tokenizer_id=tok.id, corpus_id=tok.corpus_id, owner_id=owner.id
    )
    c = tok.corpus_slug
    return [
        # Before evaluating: in the tests an evaluation runs at once, queued ones with it.
        Target("cancel an evaluation", "POST", f"/c/{c}/evaluations/{queued}/cancel"),
        Target("evaluate", "POST", f"/c/{c}/evaluate", {"data": {"tokenizer": reference.slug}}),
        Target("import", "POST", "/import", {"data": {"pattern": "gpt2"}, "file": True}, False),
    ]


def _with_file(target: Target) -> Target:
    """A fresh file per request: a stream is read once."""
    if not target.kwargs.get("file"):
        return target
    data = {**target.kwargs["data"], "file": (io.BytesIO(RANK_FILE), "m.tiktoken")}
    kwargs = {"data": data, "content_type": "multipart/form-data"}
    return Target(target.name, target.method, target.url, kwargs, target.owners_only)


def test_evaluation_and_import_changes_need_the_owners_proof_and_this_origin(
    app, client, owner, make_owner, evaluation_targets
):
    refused = check_state_changes(
        app, client, owner, make_owner(), evaluation_targets, fresh=_with_file
    )
    assert refused >= 30


def test_evaluating_someone_elses_corpus_only_if_they_allow_training(
    app, client, make_owner, make_tokenizer, reference
):
    tok = make_tokenizer()
    visitor = make_owner()
    browser = visitor.client()
    page = browser.get(f"/c/{tok.corpus_slug}").get_data(as_text=True)
    assert f'action="/c/{tok.corpus_slug}/evaluate"' not in page
    before = snapshot(app)
    refused = browser.post(f"/c/{tok.corpus_slug}/evaluate", data={"tokenizer": reference.slug})
    assert refused.status_code == 403 and "not allowed others" in refused.get_data(as_text=True)
    assert snapshot(app) == before
    assert client.post(f"/c/{tok.corpus_slug}/training", data={"allow": "1"}).status_code == 303
    page = browser.get(f"/c/{tok.corpus_slug}").get_data(as_text=True)
    assert f'action="/c/{tok.corpus_slug}/evaluate"' in page
    ok = browser.post(f"/c/{tok.corpus_slug}/evaluate", data={"tokenizer": reference.slug})
    assert ok.status_code == 303
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.scalar(
            select(EvaluationRow).where(EvaluationRow.tokenizer_id == reference.id)
        )
        assert row.owner_id == visitor.id and row.status == JobStatus.SUCCEEDED.value


def test_an_evaluation_of_a_private_tokeniser_is_shown_only_to_who_may_see_it(
    app, client, make_owner, make_tokenizer
):
    """Ids are sequential: another visitor of the corpus gets the same 404 as for a missing
    one, so an evaluation never hands out a tokeniser link it was not given."""
    mine = make_tokenizer()
    assert client.post(f"/c/{mine.corpus_slug}/training", data={"allow": "1"}).status_code == 303
    maker, asker = make_owner(), make_owner()
    theirs = make_tokenizer("a text of the maker's own", owner=maker)
    # The asker was given the maker's tokeniser link, and evaluates it on this corpus.
    asked = asker.client().post(f"/c/{mine.corpus_slug}/evaluate", data={"tokenizer": theirs.slug})
    assert asked.status_code == 303
    with app.extensions["bpe_db"].read_scope() as session:
        eid = session.scalar(
            select(EvaluationRow.id).where(EvaluationRow.tokenizer_id == theirs.id)
        )
    url = f"/c/{mine.corpus_slug}/evaluations/{eid}"
    for allowed in (asker.client(), maker.client()):
        assert allowed.get(url).status_code == 200
        assert allowed.get(url + ".json").get_json()["tokenizer"] == theirs.slug
        assert theirs.slug in allowed.get(f"/c/{mine.corpus_slug}").get_data(as_text=True)
    third = make_owner().client()
    for viewer in (client, third, BrowserClient(app, app.response_class, owner_token=None)):
        assert viewer.get(url).status_code == 404
        assert viewer.get(url + ".json").status_code == 404
        assert theirs.slug not in viewer.get(f"/c/{mine.corpus_slug}").get_data(as_text=True)


def test_claiming_an_owner_link_moves_evaluations_along(app, stranger, reference):
    first = stranger.post("/corpora", data={"text": "the first device's corpus"})
    page = stranger.get(first.headers["Location"]).get_data(as_text=True)
    token = page.split("/owner/claim#", 1)[1].split('"', 1)[0]
    second = BrowserClient(app, app.response_class, owner_token=None)
    made = second.post("/corpora", data={"text": "the second device's corpus"})
    slug = made.headers["Location"].rsplit("/", 1)[-1]
    assert second.post(f"/c/{slug}/evaluate", data={"tokenizer": reference.slug}).status_code == 303
    claimed = second.post("/owner/claim", data={"token": token, "move": "yes"})
    assert claimed.status_code == 303
    with app.extensions["bpe_db"].read_scope() as session:
        claimed = session.scalar(select(Owner.id).order_by(Owner.id).limit(1))
        owners_left = session.scalars(select(Owner.id)).all()
        row = session.scalar(select(EvaluationRow))
        assert row.owner_id in owners_left and len(owners_left) == 1 and row.owner_id == claimed


def test_only_the_asker_cancels_and_a_queued_evaluation_stops_at_once(
    app, client, owner, make_owner, make_tokenizer
):
    tok = make_tokenizer()
    database = app.extensions["bpe_db"]
    eid = evaluations.request_evaluation(
        database, tokenizer_id=tok.id, corpus_id=tok.corpus_id, owner_id=owner.id
    )
    url = f"/c/{tok.corpus_slug}/evaluations/{eid}/cancel"
    page = client.get(f"/c/{tok.corpus_slug}").get_data(as_text=True)
    assert f'action="{url}"' in page
    other = make_owner().client()
    assert f'action="{url}"' not in other.get(f"/c/{tok.corpus_slug}").get_data(as_text=True)
    assert other.post(url).status_code == 403
    assert client.post(url).status_code == 303
    with database.read_scope() as session:
        row = session.get(EvaluationRow, eid)
        assert row.status == JobStatus.CANCELLED.value and row.finished_at is not None


def test_one_owner_cannot_fill_the_evaluation_queue(app, owner, make_owner, make_tokenizer):
    database = app.extensions["bpe_db"]
    limits = evaluations.Limits(per_owner=2, max_queued=3)
    toks = [make_tokenizer(vocab_size=260 + k) for k in range(4)]
    corpus_id = toks[0].corpus_id

    def ask(tok, who):
        return evaluations.request_evaluation(
            database, tokenizer_id=tok.id, corpus_id=corpus_id, owner_id=who, limits=limits
        )

    first = ask(toks[0], owner.id)
    ask(toks[1], owner.id)
    assert ask(toks[0], owner.id) == first  # queued already: the same row, no new one
    with pytest.raises(evaluations.EvaluationQueueFull, match="at most 2"):
        ask(toks[2], owner.id)
    other = make_owner()
    ask(toks[2], other.id)
    with pytest.raises(evaluations.EvaluationQueueFull, match="queue is full"):
        ask(toks[3], other.id)
    assert count(app, EvaluationRow) == 3
