"""The first visit: the home page offers the site's sample corpus; one click (a POST with CSRF)
trains its naive and chunked tokenisers once for the whole site and lands on their comparison;
from then on every visitor opens them at once. Nobody owns them (webapp/content/sample.py)."""

from __future__ import annotations

import html
import re

from sqlalchemy import select, update

import bpe
from tests.test_jobs import count
from webapp.content.sample import DEMO_TEXT, SAMPLE_NAME, SAMPLE_VOCAB_SIZE, sample_text
from webapp.storage.models import Corpus, Tokenizer, TrainingJob

COMPARE_LINK = re.compile(r'href="(/compare/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+\?text=[^"]+)"')


def sample_jobs(app) -> list[TrainingJob]:
    with app.extensions["bpe_db"].read_scope() as session:
        return list(session.scalars(select(TrainingJob).order_by(TrainingJob.id)))


def train_queued(job_runner) -> int:
    ran = 0
    while job_runner.run_next() is not None and ran < 10:
        ran += 1
    return ran


def test_the_sample_text_is_generated_the_same_every_time_and_is_varied():
    text = sample_text()
    assert text == sample_text()
    assert 40_000 < len(text.encode()) < 60_000
    assert "def merge(" in text and "東京" in text and "Привет" in text
    # Naive training merges across word boundaries, chunked never does: the pair differs.
    naive = bpe.train(text, vocab_size=SAMPLE_VOCAB_SIZE, mode="naive")
    chunked = bpe.train(text, vocab_size=SAMPLE_VOCAB_SIZE, mode="chunked")
    naive_tokens = {naive.token_bytes(i) for i in range(256, naive.vocab_size)}
    assert any(b" " in t.strip(b" ") for t in naive_tokens)  # a space inside a token
    chunked_tokens = {chunked.token_bytes(i) for i in range(256, chunked.vocab_size)}
    assert not any(b" " in t.strip(b" ") for t in chunked_tokens)


def test_one_click_trains_the_sample_and_lands_on_the_comparison(app, client, stranger, job_runner):
    home = client.get("/").get_data(as_text=True)
    assert "New here? Start with a sample" in home
    assert 'action="/sample"' in home and 'name="csrf_token"' in home
    clicked = client.post("/sample")
    assert clicked.status_code == 303 and clicked.headers["Location"] == "/sample"
    jobs = sample_jobs(app)
    assert [j.owner_id for j in jobs] == [None, None]  # the site's, not this visitor's
    assert sorted(j.settings_dict["mode"] for j in jobs) == ["chunked", "naive"]
    waiting = client.get("/sample").get_data(as_text=True)
    assert "Training the sample corpus" in waiting
    assert 'http-equiv="refresh"' in waiting and 'hx-get="/sample/status"' in waiting
    # A second click while they train queues nothing more.
    assert client.post("/sample").headers["Location"] == "/sample"
    assert count(app, TrainingJob) == 2
    assert train_queued(job_runner) == 2
    status = client.get("/sample/status", headers={"HX-Request": "true"})
    compare_url = status.headers["HX-Redirect"]
    assert compare_url.startswith("/compare/")
    assert client.get("/sample").headers["Location"] == compare_url  # without JS too
    page = client.get(compare_url)
    assert page.status_code == 200
    body = page.get_data(as_text=True)
    # It opens on the demo text, already cut by both: the boundary diff and a verdict show.
    assert SAMPLE_NAME in body and 'class="diff-summary"' in body
    assert "fewer token" in body and html.escape(DEMO_TEXT.splitlines()[1]) in body
    # Now every visitor, one who owns nothing included, gets plain links and no wait.
    for visitor in (client, stranger):
        home = visitor.get("/").get_data(as_text=True)
        assert html.unescape(COMPARE_LINK.search(home).group(1)) == compare_url
        assert "Try the sample" not in home
    assert client.post("/sample").headers["Location"] == compare_url
    assert count(app, TrainingJob) == 2


def test_nobody_owns_the_sample_but_anyone_trains_their_own_on_it(app, client, job_runner, owner):
    client.post("/sample")
    train_queued(job_runner)
    with app.extensions["bpe_db"].read_scope() as session:
        corpus = session.scalar(select(Corpus).where(Corpus.name == SAMPLE_NAME))
        owners = set(session.scalars(select(Tokenizer.owner_id)))
    assert corpus.owner_id is None and owners == {None}
    home = client.get("/").get_data(as_text=True)
    assert "None yet." in home  # "Your corpora": the sample is not this visitor's
    renamed = client.patch(
        f"/api/corpora/{corpus.slug}", json={"name": "mine"}, headers=owner.bearer
    )
    assert renamed.status_code == 403
    trained = client.post(f"/c/{corpus.slug}/train", data={"vocab_size": "300"})
    assert trained.status_code == 303
    assert sample_jobs(app)[-1].owner_id == owner.id


def test_a_sample_job_that_did_not_finish_is_trained_again_alone(app, client, job_runner):
    client.post("/sample")
    first, second = sample_jobs(app)
    with app.extensions["bpe_db"].session_scope() as session:
        session.execute(
            update(TrainingJob).where(TrainingJob.id == first.id).values(status="interrupted")
        )
    train_queued(job_runner)  # only the other one is left to train
    page = client.get("/sample").get_data(as_text=True)
    assert "interrupted" in page and "Train the sample again" in page
    assert 'http-equiv="refresh"' not in page  # nothing is training: no endless reloads
    client.post("/sample")
    again = sample_jobs(app)[-1]
    assert len(sample_jobs(app)) == 3
    assert again.settings_dict["mode"] == first.settings_dict["mode"]
    train_queued(job_runner)
    assert client.get("/sample").headers["Location"].startswith("/compare/")


def test_the_click_needs_its_csrf_token(app, raw_client):
    assert raw_client.post("/sample").status_code in (400, 403)
    assert count(app, TrainingJob) == 0


def test_flask_sample_queues_the_pair_once(app, runner, job_runner):
    first = runner.invoke(args=["sample"])
    assert first.exit_code == 0 and "queued jobs" in first.output
    assert runner.invoke(args=["sample"]).output.strip() == "sample: ready (or already training)"
    assert train_queued(job_runner) == 2
    assert count(app, Tokenizer) == 2


def test_each_sample_tokeniser_offers_the_other_to_compare_with(
    app, client, stranger, job_runner, make_tokenizer
):
    other_slug = make_tokenizer().slug  # on another corpus: not offered the sample pair
    client.post("/sample")
    train_queued(job_runner)
    with app.extensions["bpe_db"].read_scope() as session:
        rows = {t.mode: t.slug for t in session.scalars(select(Tokenizer))}
    for visitor in (client, stranger):
        page = visitor.get(f"/t/{rows['naive']}").get_data(as_text=True)
        assert f'<option value="{rows["chunked"]}">' in page
    # A visitor's own tokeniser on the sample corpus is offered the site's pair to compare with.
    with app.extensions["bpe_db"].read_scope() as session:
        corpus = session.scalar(select(Corpus).where(Corpus.name == SAMPLE_NAME))
    client.post(f"/c/{corpus.slug}/train", data={"vocab_size": "300"})
    train_queued(job_runner)
    with app.extensions["bpe_db"].read_scope() as session:
        mine = session.scalar(
            select(Tokenizer).where(
                Tokenizer.owner_id.is_not(None), Tokenizer.corpus_id == corpus.id
            )
        )
    page = client.get(f"/t/{mine.slug}").get_data(as_text=True)
    assert f'<option value="{rows["chunked"]}">' in page
    assert f'<option value="{rows["naive"]}">' in page
    assert f"/t/{rows['chunked']}" not in client.get(f"/t/{other_slug}").get_data(as_text=True)
