"""Text typed into a form's box reaches the tokeniser as typed: a browser submits every line break
of a form as CRLF (with or without JavaScript), so the same text posted with CRLF and with LF
must give the same corpus, the same tokens and the same figures. Files and JSON stay byte-exact.
The real-browser version is tests/test_browser_line_breaks.py."""

from __future__ import annotations

import io

import pytest

from tests.same_page import comparable
from tests.test_uploads import slug_of, stored

TYPED = "line one\nline two\nline three\n"
SUBMITTED = TYPED.replace("\n", "\r\n")  # what a browser's form sends for TYPED
HX = {"HX-Request": "true"}


def test_pasted_corpus_keeps_the_typed_line_breaks(app, client):
    slug = slug_of(client.post("/corpora", data={"text": SUBMITTED, "name": "pasted"}))
    corpus = stored(app, slug)
    assert corpus.text == TYPED
    assert corpus.size_bytes == len(TYPED.encode()) == 29


def test_an_uploaded_file_stays_byte_exact(app, client):
    data = {"file": (io.BytesIO(SUBMITTED.encode()), "crlf.txt"), "name": "file"}
    slug = slug_of(client.post("/corpora", data=data, content_type="multipart/form-data"))
    assert stored(app, slug).text == SUBMITTED


def test_the_json_api_stays_byte_exact(client, make_tokenizer):
    tok = make_tokenizer(TYPED * 20, vocab_size=270)
    with_cr = client.post(f"/api/t/{tok.slug}/encode", json={"text": SUBMITTED}).get_json()
    without = client.post(f"/api/t/{tok.slug}/encode", json={"text": TYPED}).get_json()
    assert with_cr["ids"] == tok.tok.encode(SUBMITTED) != without["ids"]


@pytest.mark.parametrize("path", ["encode", "evaluate"])
def test_playground_and_evaluate_count_the_typed_text(client, make_tokenizer, path):
    tok = make_tokenizer((TYPED + "\r\n") * 20, vocab_size=280)
    url = f"/t/{tok.slug}/{path}"
    as_sent = comparable(client.post(url, data={"text": SUBMITTED}, headers=HX).text)
    as_typed = comparable(client.post(url, data={"text": TYPED}, headers=HX).text)
    assert as_sent == as_typed


def test_compare_counts_the_typed_text(client, make_tokenizer):
    a = make_tokenizer((TYPED + "\r\n") * 20, vocab_size=280)
    b = make_tokenizer((TYPED + "\r\n") * 20, vocab_size=270, mode="naive")
    url = f"/compare/{a.slug}/{b.slug}/encode"
    as_sent = comparable(client.post(url, data={"text": SUBMITTED}, headers=HX).text)
    as_typed = comparable(client.post(url, data={"text": TYPED}, headers=HX).text)
    assert as_sent == as_typed


def test_the_home_page_counts_the_typed_text(client, make_tokenizer):
    tok = make_tokenizer((TYPED + "\r\n") * 20, vocab_size=280)
    form = {"model": tok.slug}
    as_sent = comparable(client.post("/encode", data={**form, "text": SUBMITTED}, headers=HX).text)
    as_typed = comparable(client.post("/encode", data={**form, "text": TYPED}, headers=HX).text)
    assert as_sent == as_typed
