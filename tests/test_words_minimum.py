"""Words mode's smallest vocab size: counted once at upload (CorpusStats), shown on the corpus
page and in its JSON, and a vocab size below it refused on the form, on "Run again" and in the
API (422, the trainer's own message, nothing queued) instead of failing a queued job."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape
from sqlalchemy import delete, select

import bpe
from bpe.training import word_sequences
from tests.strategies import KNOWN_CHARACTERS
from tests.test_jobs import TRAIN, count, job_row, start_job
from webapp.storage.models import Corpus, CorpusStats, Tokenizer, TrainingJob

TEXT = "abc abd\nxyz"  # a b c d x y z: 7 characters, + </w> + <unk> = 9


def forget_alphabet(app, corpus_id: int) -> None:
    """Make a corpus look as if nothing had counted its alphabet (the form cannot check)."""
    with app.extensions["bpe_db"].session_scope() as session:
        session.execute(delete(CorpusStats).where(CorpusStats.corpus_id == corpus_id))


def stored_alphabet(app, corpus_id: int) -> int | None:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.scalar(
            select(CorpusStats.word_alphabet_size).where(CorpusStats.corpus_id == corpus_id)
        )


def library_refusal(text: str, vocab_size: int, specials=()) -> str:
    with pytest.raises(ValueError, match="vocab_size must be at least") as refused:
        bpe.train(text, vocab_size=vocab_size, mode="words", special_tokens=list(specials))
    return str(refused.value)


def test_the_corpus_page_shows_words_modes_minimum(client, make_corpus):
    corpus = make_corpus(TEXT)
    page = client.get(f"/c/{corpus.slug}").get_data(as_text=True)
    assert "256 for naive and chunked" in page
    assert "9 for words (7 distinct characters and <code>&lt;/w&gt;</code>: 8 base ids;" in page
    assert 'aria-describedby="train-vocab-minimum"' in page


def test_the_refusal_adds_up_as_the_corpus_page_does(client, make_corpus):
    """No special token given: the refusal names <unk> as words mode's own, with the same
    base ids and the same sum as the page's minimum (it said "8 base ids + 1 special tokens")."""
    corpus = make_corpus(TEXT)
    page = client.get(f"/c/{corpus.slug}").get_data(as_text=True)
    assert "9 for words (7 distinct characters" in page and "8 base ids" in page
    response = client.post(
        f"/c/{corpus.slug}/train", data={**TRAIN, "mode": "words", "vocab_size": "8"}
    )
    refusal = (
        "vocab_size must be at least 9 here: 8 base ids (the text&#39;s 7 distinct characters"
        " and &lt;/w&gt;) + the special token &lt;unk&gt; (words mode&#39;s own)"
    )
    assert refusal in response.get_data(as_text=True)
    assert "special tokens" not in library_refusal(TEXT, 8)
    assert "2 special tokens: <unk> (words mode's own), <eot>" in library_refusal(
        TEXT, 9, ["<eot>"]
    )


def test_a_words_vocab_below_the_minimum_is_refused_on_the_form(
    app, client, job_runner, make_corpus
):
    corpus = make_corpus(TEXT)
    response = client.post(
        f"/c/{corpus.slug}/train", data={**TRAIN, "mode": "words", "vocab_size": "8"}
    )
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert escape(library_refusal(TEXT, 8)) in page  # the trainer's own words, on the corpus page
    assert 'value="8"' in page  # the refused form keeps what was typed
    # A special token raises the floor by one (<unk> is words mode's own, not counted twice).
    special = {**TRAIN, "mode": "words", "vocab_size": "9", "special_tokens": "<eot>"}
    response = client.post(f"/c/{corpus.slug}/train", data=special)
    assert response.status_code == 422
    assert escape(library_refusal(TEXT, 9, ["<eot>"])) in response.get_data(as_text=True)
    unk = {**TRAIN, "mode": "words", "vocab_size": "9", "special_tokens": "<unk>"}
    assert client.post(f"/c/{corpus.slug}/train", data=unk).status_code == 303
    assert count(app, TrainingJob) == 1  # only the last one
    start_job(client, corpus.slug, mode="words", vocab_size="9")  # the minimum itself trains
    assert job_runner.run_next() and job_runner.run_next()
    assert count(app, Tokenizer) == 2


def test_end_of_word_as_a_special_token_is_refused_on_the_form(app, client, make_corpus):
    corpus = make_corpus(TEXT)
    data = {**TRAIN, "mode": "words", "vocab_size": "50", "special_tokens": "</w>"}
    response = client.post(f"/c/{corpus.slug}/train", data=data)
    assert response.status_code == 422
    assert "end of every word" in response.get_data(as_text=True)
    assert count(app, TrainingJob) == 0


def test_run_again_of_a_job_that_cannot_work_is_refused(app, client, job_runner, make_corpus):
    corpus = make_corpus(TEXT)
    counted = stored_alphabet(app, corpus.id)
    forget_alphabet(app, corpus.id)  # a job from before the count: it was queued, and failed
    job_id = start_job(client, corpus.slug, mode="words", vocab_size="5")
    job_runner.run_next()
    assert job_row(app, job_id).status == "failed"
    with app.extensions["bpe_db"].session_scope() as session:
        session.add(CorpusStats(corpus_id=corpus.id, word_alphabet_size=counted))
    response = client.post(f"/c/{corpus.slug}/jobs/{job_id}/rerun")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert escape(library_refusal(TEXT, 5)) in page
    assert f"Training job {job_id}" in page  # the job page again, with its Run again button
    assert count(app, TrainingJob) == 1  # nothing new queued


def test_an_uncounted_corpus_falls_back_to_the_trainers_refusal(
    app, client, job_runner, make_corpus
):
    corpus = make_corpus(TEXT)
    forget_alphabet(app, corpus.id)
    page = client.get(f"/c/{corpus.slug}").get_data(as_text=True)
    assert "not counted for this corpus" in page
    api = client.get(f"/api/corpora/{corpus.slug}").get_json()
    assert api["smallest_vocab_size"] == {"naive": 256, "chunked": 256, "words": None}
    job_id = start_job(client, corpus.slug, mode="words", vocab_size="8")
    job_runner.run_next()
    assert job_row(app, job_id).error == library_refusal(TEXT, 8)


def test_the_corpus_json_gives_each_modes_minimum(client, make_corpus):
    corpus = make_corpus(TEXT)
    body = client.get(f"/api/corpora/{corpus.slug}").get_json()
    assert body["smallest_vocab_size"] == {"naive": 256, "chunked": 256, "words": 9}


def test_uploading_the_same_text_again_counts_a_corpus_nobody_counted(app, client, make_corpus):
    corpus = make_corpus(TEXT)
    forget_alphabet(app, corpus.id)
    again = make_corpus(TEXT)
    assert again.id == corpus.id
    assert stored_alphabet(app, corpus.id) == 7


# Whitespace that str.split() cuts at but a naive count might keep: \x1c-\x1f, NEL, U+2028, U+3000.
ODD_SPACE = st.sampled_from(["\x1c", "\x1f", "\x85", "\u2028", "\u3000", "\t", "\r\n", " "])
CORPUS_TEXT = st.lists(
    st.one_of(ODD_SPACE, st.text(KNOWN_CHARACTERS.filter(lambda c: c != "\x00"), max_size=8)),
    min_size=1,
    max_size=30,
).map("".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=CORPUS_TEXT)
def test_the_upload_counts_the_alphabet_the_trainer_will_use(app, make_corpus, text):
    if not text:
        return  # an empty upload is refused (tests/test_uploads.py)
    corpus = make_corpus(text)
    with app.extensions["bpe_db"].read_scope() as session:
        stored_text = session.get(Corpus, corpus.id).text  # what a job will train on
    alphabet, _ = word_sequences(stored_text)
    assert stored_alphabet(app, corpus.id) == len(alphabet)


# ----- the JSON API -------------------------------------------------------------------------------
def test_the_json_api_refuses_a_words_vocab_below_the_minimum(
    app, raw_client, owner, job_runner, make_corpus
):
    corpus = make_corpus(TEXT)
    url = f"/api/corpora/{corpus.slug}/jobs"
    low = raw_client.post(url, json={"mode": "words", "vocab_size": 8}, headers=owner.bearer)
    assert low.status_code == 422
    assert low.get_json()["error"] == library_refusal(TEXT, 8)
    assert count(app, TrainingJob) == 0
    queued = raw_client.post(
        url, json={"mode": "words", "vocab_size": 11, "trainer": "reference"}, headers=owner.bearer
    )
    assert queued.status_code == 202
    job = queued.get_json()
    assert job["status"] == "queued" and job["settings"]["vocab_size"] == 11
    assert queued.headers["Location"] == job["api_url"]
    job_runner.run_next()
    done = raw_client.get(job["api_url"], headers=owner.bearer).get_json()
    assert done["status"] == "succeeded" and done["tokenizer"]["slug"]
    assert done["merges_done"] == done["merges_target"] == 2


def test_the_json_api_refuses_what_is_not_a_settings_object(
    app, raw_client, owner, make_corpus, make_owner
):
    corpus = make_corpus(TEXT)
    url = f"/api/corpora/{corpus.slug}/jobs"
    for body in ([1, 2], "words", {"mode": "words", "vocab_size": "lots"}):
        response = raw_client.post(url, json=body, headers=owner.bearer)
        assert 400 <= response.status_code < 500 and response.get_json()["error"]
    # Another owner sees no job of ours, and may not train on a corpus that does not allow it.
    other = make_owner()
    assert raw_client.post(url, json={"vocab_size": 300}, headers=other.bearer).status_code == 403
    assert count(app, TrainingJob) == 0
