"""A mode registered with the library is a mode of the web app too: the train form offers it,
a job trains it, and every page and download of its tokenisers works, with no edit to the web
app (the toy modes of tests/test_modes.py, touching `bpe` only through `register_mode`)."""

from __future__ import annotations

import re

from tests.test_modes import TEXT, lines_mode, said_lines_mode  # noqa: F401 - fixtures

FORMATS = ("json", "hf", "tiktoken")


def test_the_train_form_offers_every_registered_mode(client, make_corpus, lines_mode):  # noqa: F811
    corpus = make_corpus(TEXT)
    page = client.get(f"/c/{corpus.slug}").get_data(as_text=True)
    options = re.findall(r'<option value="([^"]+)" title="([^"]*)"', page)
    assert [name for name, _ in options[:4]] == ["chunked", "naive", "words", "lines"]
    assert dict(options)["lines"] == lines_mode.description
    assert lines_mode.label in page


def test_a_job_trains_a_registered_mode(client, make_corpus, job_runner, lines_mode):  # noqa: F811
    corpus = make_corpus(TEXT)
    queued = client.post(
        f"/api/corpora/{corpus.slug}/jobs", json={"mode": "lines", "vocab_size": 290}
    )
    assert queued.status_code == 202, queued.get_json()
    job = queued.get_json()
    assert job["settings"]["mode"] == "lines" and job["settings"]["pattern"] is None
    assert job_runner.run_next() == job["id"]
    done = client.get(job["api_url"]).get_json()
    assert done["status"] == "succeeded", done
    slug = done["tokenizer"]["slug"]
    page = client.get(f"/t/{slug}").get_data(as_text=True)
    assert "lines" in page and client.get(f"/t/{slug}/merges").status_code == 200
    refused = client.post(
        f"/api/corpora/{corpus.slug}/jobs", json={"mode": "sentences", "vocab_size": 290}
    )
    assert (
        refused.status_code == 422 and "naive, chunked, words, lines" in refused.get_json()["error"]
    )


def test_every_page_of_a_registered_modes_tokeniser_works(client, make_tokenizer, lines_mode):  # noqa: F811
    made = make_tokenizer(TEXT, mode="lines", pattern=None, vocab_size=290)
    for path in ("", "/merges", "/vocab", "/token/256"):
        response = client.get(f"/t/{made.slug}{path}")
        assert response.status_code == 200, (path, response.get_data(as_text=True)[:300])
    encoded = client.post(f"/api/t/{made.slug}/encode", json={"text": "the cat sat\nno"})
    assert encoded.get_json()["ids"] == made.tok.encode("the cat sat\nno")
    page = client.get(f"/t/{made.slug}").get_data(as_text=True)
    # No regex says how the mode splits, so the byte-level exports cannot carry it: the buttons
    # say so, and the downloads refuse it by name; the project's own JSON always works.
    assert page.count("(byte-level modes only)") == 2
    statuses = {fmt: client.get(f"/t/{made.slug}/download/{fmt}").status_code for fmt in FORMATS}
    assert statuses == {"json": 200, "hf": 422, "tiktoken": 422}


def test_a_mode_that_says_its_split_as_a_regex_exports(client, make_tokenizer, said_lines_mode):  # noqa: F811
    made = make_tokenizer(TEXT, mode="said-lines", pattern=None, vocab_size=290)
    page = client.get(f"/t/{made.slug}").get_data(as_text=True)
    assert "(byte-level modes only)" not in page
    statuses = {fmt: client.get(f"/t/{made.slug}/download/{fmt}").status_code for fmt in FORMATS}
    assert statuses == {"json": 200, "hf": 200, "tiktoken": 200}
