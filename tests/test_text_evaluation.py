"""Evaluating a tokeniser on pasted text: the tokeniser page's Evaluate tab and
`POST /api/t/<slug>/evaluate` give the figures a corpus evaluation gives, checked against a
direct computation; the never-used list is exact; the size cap answers 413; nothing is stored."""

from __future__ import annotations

import re

import pytest

import bpe
from bpe.export_tiktoken import rank_file_text
from tests.test_owners import snapshot
from webapp.content.imports import store_upload

TEXT = (
    "The cat sat on the mat. The dog ate 12 bones! Ünïcödé 東京 😀 <script>alert(1)</script>\n" * 6
)
LIMIT = 2_000


@pytest.fixture
def app_config(app_config):
    return {**app_config, "EVALUATE_MAX_BYTES": LIMIT}


@pytest.fixture
def toks(app, make_tokenizer):
    """A tokeniser trained here and one imported (its own ids, tiktoken's rule)."""
    own = make_tokenizer(TEXT, vocab_size=290)
    imported = bpe.importers.import_bytes(
        rank_file_text(own.tok).encode(), filename="own.tiktoken", pattern="gpt2"
    )
    row = store_upload(app.extensions["bpe_db"], imported, owner_id=None)
    return [(own.slug, own.tok), (row.slug, imported)]


def expected(tok: bpe.Tokenizer, text: str) -> dict:
    ids = tok.encode(text)
    ordinary = set(tok.ordinary_ids)
    return {
        "bytes": len(text.encode()),
        "characters": len(text),
        "words": len(text.split()),
        "tokens": len(ids),
        "bytes_per_token": len(text.encode()) / len(ids),
        "chars_per_token": len(text) / len(ids),
        "tokens_per_word": len(ids) / len(text.split()),
        "vocab_size": len(ordinary),
        "used": len(set(ids) & ordinary),
        "never_used": sorted(ordinary - set(ids)),
    }


def test_api_figures_match_a_direct_computation(raw_client, toks):
    text = TEXT[:700]
    for slug, tok in toks:
        reply = raw_client.post(f"/api/t/{slug}/evaluate", json={"text": text})
        assert reply.status_code == 200, reply.get_data(as_text=True)
        data = reply.get_json()
        want = expected(tok, text)
        for key, value in want.items():
            assert data[key] == pytest.approx(value), (slug, key)
        assert data["tokenizer"] == slug and data["vocab_share"] == pytest.approx(
            want["used"] / want["vocab_size"]
        )
        longest = sorted(set(tok.encode(text)), key=lambda i: (-len(tok.vocab[i]), i))[:20]
        counts = {i: tok.encode(text).count(i) for i in longest}
        assert data["longest"] == [[i, counts[i]] for i in longest]


def test_the_evaluate_tab_shows_the_figures_escaped(client, toks):
    slug, tok = toks[0]
    page = client.get(f"/t/{slug}")
    assert f'href="/t/{slug}/evaluate"' in page.get_data(as_text=True)  # the tab
    form = client.get(f"/t/{slug}/evaluate").get_data(as_text=True)
    assert 'name="text"' in form and 'aria-current="page">Evaluate' in form
    text = TEXT[:900]
    want = expected(tok, text)
    for headers in ({}, {"HX-Request": "true"}):
        html = client.post(f"/t/{slug}/evaluate", data={"text": text}, headers=headers)
        assert html.status_code == 200
        body = html.get_data(as_text=True)
        assert f"{want['bytes_per_token']:.3f}" in body
        assert f"{want['chars_per_token']:.3f}" in body
        assert f"{want['tokens_per_word']:.3f}" in body
        assert f"{want['used']:,} of {want['vocab_size']:,}" in body
        assert f"Never used: {len(want['never_used']):,} tokens" in body
        assert "<script>alert" not in body  # the text and its tokens, escaped
        assert ("<html" in body) is not bool(headers)  # htmx gets the results alone
    shown = re.findall(r'href="/t/[^/]+/token/(\d+)"', body)
    assert {int(i) for i in shown} >= set(want["never_used"][:50])


def test_evaluating_pasted_text_changes_nothing_and_needs_no_owner(app, stranger, toks):
    slug, _ = toks[1]
    before = snapshot(app)
    assert stranger.post(f"/t/{slug}/evaluate", data={"text": "hello"}).status_code == 200
    assert stranger.post(f"/api/t/{slug}/evaluate", json={"text": "hello"}).status_code == 200
    assert snapshot(app) == before


def test_bad_text_is_a_clear_4xx(client, raw_client, toks):
    slug, _ = toks[0]
    big = "a" * (LIMIT + 1)
    page = client.post(f"/t/{slug}/evaluate", data={"text": big})
    assert page.status_code == 413 and "at most 2,000 bytes" in page.get_data(as_text=True)
    fragment = client.post(f"/t/{slug}/evaluate", data={"text": big}, headers={"HX-Request": "1"})
    assert fragment.status_code == 413 and 'role="alert"' in fragment.get_data(as_text=True)
    api = raw_client.post(f"/api/t/{slug}/evaluate", json={"text": big})
    assert api.status_code == 413 and "at most" in api.get_json()["error"]
    for body in ({"text": ""}, {"text": "   "}, {"text": 5}, {}):
        reply = raw_client.post(f"/api/t/{slug}/evaluate", json=body)
        assert reply.status_code == 400 and "Paste some text" in reply.get_json()["error"]
    assert client.post(f"/t/{slug}/evaluate", data={"text": ""}).status_code == 400
    surrogate = raw_client.post(
        f"/api/t/{slug}/evaluate", data=b'{"text": "a\\ud800"}', content_type="application/json"
    )
    assert surrogate.status_code == 400
    assert (
        raw_client.post("/api/t/AAAAAAAAAAAAAAAAAAAAAA/evaluate", json={"text": "a"}).status_code
        == 404
    )
    assert client.get("/t/AAAAAAAAAAAAAAAAAAAAAA/evaluate").status_code == 404


def never_shown(body: str) -> list[int]:
    grid = body[body.index('<ul class="token-list token-grid"') :]
    grid = grid[: grid.index("</ul>")]
    return [int(i) for i in re.findall(r'href="/t/[^/]+/token/(\d+)"', grid)]


def test_the_never_used_grid_is_paged(client, make_tokenizer):
    """A text that uses almost none of a 700-token vocabulary: its never-used tokens come a
    page at a time, in id order, every one on exactly one page, with the count and a pager
    that sends the text again; a page past the last is a 404 and a bad one a 400."""
    from webapp.rendering.evaluations import NEVER_USED_PER_PAGE

    ref = make_tokenizer(TEXT * 4 + "".join(chr(c) for c in range(0x4E00, 0x4F00)), vocab_size=700)
    want = expected(ref.tok, "z")["never_used"]
    pages = -(-len(want) // NEVER_USED_PER_PAGE)
    assert pages >= 3
    seen: list[int] = []
    for number in range(1, pages + 1):
        for headers in ({}, {"HX-Request": "true"}):
            reply = client.post(
                f"/t/{ref.slug}/evaluate",
                data={"text": "z", "never_page": str(number)},
                headers=headers,
            )
            assert reply.status_code == 200
            body = reply.text
            assert f"Never used: {len(want):,} tokens" in body
            assert f"page {number} of {pages}" in body
        shown = never_shown(body)
        assert shown == want[(number - 1) * NEVER_USED_PER_PAGE :][:NEVER_USED_PER_PAGE]
        seen += shown
        offers_next = f'name="never_page" value="{number + 1}"' in body
        assert offers_next == (number < pages)
    assert seen == want
    past = client.post(f"/t/{ref.slug}/evaluate", data={"text": "z", "never_page": pages + 1})
    assert past.status_code == 404 and f"the list has {pages} pages" in past.text
    bad = client.post(f"/t/{ref.slug}/evaluate", data={"text": "z", "never_page": "two"})
    assert bad.status_code == 400
