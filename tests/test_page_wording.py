"""Numbers and words as a reader meets them: a size said once, one tokeniser called one, a file
the importer refuses quoted as text (not Python's b'...')."""

from __future__ import annotations

import io
import re

import pytest

from tests.conftest import TEST_OWNER_TOKEN


def size_fact(html: str) -> str:
    found = re.search(r"<dt>size</dt><dd>(.*?)</dd>", html, re.S)
    assert found, "no size on the corpus page"
    return re.sub(r"<[^>]+>", "", found[1]).strip()


def test_a_corpus_size_is_said_once_when_it_is_exact(client, make_corpus):
    for size, shown in ((32, "32 bytes"), (9_999, "9,999 bytes"), (20_000, "20 kB (20,000 bytes)")):
        corpus = make_corpus("x" * (size - 1) + "\n", name=f"{size} bytes")
        assert size_fact(client.get(f"/c/{corpus.slug}").text) == shown


def test_deleting_a_corpus_says_one_tokeniser_in_the_singular(client, make_corpus, make_tokenizer):
    one = make_tokenizer("a corpus with one tokeniser on it", vocab_size=260)
    page = re.sub(r"\s+", " ", client.get(f"/c/{one.corpus_slug}/delete").text)
    assert "the <strong>tokeniser</strong> trained on it (whoever trained it)" in page
    assert "1 tokeniser" not in page and "(whoever trained them)" not in page
    assert "Yes, delete its tokeniser too" in page

    corpus = make_corpus("a corpus with two tokenisers on it")
    for size in (260, 270):
        make_tokenizer("a corpus with two tokenisers on it", vocab_size=size, corpus=corpus)
    page = re.sub(r"\s+", " ", client.get(f"/c/{corpus.slug}/delete").text)
    assert "the <strong>2 tokenisers</strong> trained on it (whoever trained them)" in page
    assert "Yes, delete the 2 tokenisers too" in page


@pytest.mark.parametrize(
    ("raw", "quoted"),
    [
        (b"IQ== 0\nnot-base64! 1\n", "got 'not-base64! 1'"),
        (b"\xff\xfe garbage 1\n", "got '\\xff\\xfe garbage 1'"),
        (b"IQ== 0\nIQ== 1\n", "token '!' is repeated"),
    ],
)
def test_an_import_refusal_quotes_the_line_as_text(client, raw, quoted):
    response = client.post(
        "/api/tokenizers/import",
        data={"file": (io.BytesIO(raw), "bad.tiktoken"), "pattern": "gpt2"},
        content_type="multipart/form-data",
        headers={"Authorization": f"Bearer {TEST_OWNER_TOKEN}"},
    )
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert quoted in error and "b'" not in error, error
