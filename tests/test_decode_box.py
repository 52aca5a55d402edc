"""The decode box (/t/<slug>/decode): pasted ids -> the text and its chips, in every form a
person pastes them, and a clear 4xx that keeps the box filled for anything else."""

from __future__ import annotations

import pytest

from webapp.plumbing.inputs import MAX_DECODE_IDS

HX = {"HX-Request": "true"}
TEXT = "the cat sat on the mat <script>alert(1)</script>\n"


@pytest.fixture
def trained(make_tokenizer, app):
    made = make_tokenizer(vocab_size=300, special_tokens=["<|end|>"])
    with app.app_context():
        from webapp.storage import browse, db
        from webapp.storage.convert import load_tokenizer

        tok = load_tokenizer(db.session(), browse.get_tokenizer(db.session(), made.slug))
    return made.slug, tok


@pytest.mark.parametrize(
    "spelled",
    [
        lambda ids: " ".join(map(str, ids)),
        lambda ids: ", ".join(map(str, ids)),
        lambda ids: "\r\n".join(map(str, ids)),  # one a line, as a browser sends a textarea
        lambda ids: str(ids),  # the JSON list the playground's "ids as a list" gives
    ],
    ids=["spaces", "commas", "lines", "json"],
)
def test_pasted_ids_decode_to_the_text(client, trained, spelled):
    slug, tok = trained
    ids = tok.encode(TEXT)
    response = client.post(f"/t/{slug}/decode", data={"ids": spelled(ids)})
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert f"{len(ids)} tokens" in html
    assert html.count('class="tok') >= len(ids) // 2  # the chips are drawn


def test_a_special_token_and_a_fragment(client, trained):
    slug, tok = trained
    ids = [*tok.encode("hi"), tok.special_tokens["<|end|>"]]
    fragment = client.get(f"/t/{slug}/decode", query_string={"ids": str(ids)}, headers=HX).text
    assert "<html" not in fragment and "hi&lt;|end|&gt;" in fragment


@pytest.mark.parametrize(
    ("ids", "status", "message"),
    [
        ("72 two 33", 422, "Item 2, &#39;two&#39;, is not a token id"),
        ("72 -1", 422, "Item 2, &#39;-1&#39;, is not a token id"),
        ("72 1.5", 422, "Item 2, &#39;1.5&#39;, is not a token id"),
        ("9" * 5000, 422, "Item 1, &#39;" + "9" * 24 + "…&#39;, is not a token id"),
        ("[[1, 2]]", 422, "Item 1, &#39;[1&#39;, is not a token id"),
        ("72 300", 422, "Item 2, id 300, is not in this tokeniser: its ids run 0 to 299"),
        (" ".join(["1"] * (MAX_DECODE_IDS + 1)), 413, f"At most {MAX_DECODE_IDS:,} ids"),
    ],
    ids=["word", "negative", "fraction", "huge", "nested", "outside", "too-many"],
)
def test_bad_ids_are_refused_and_the_box_keeps_them(client, trained, ids, status, message):
    slug, _ = trained
    response = client.post(f"/t/{slug}/decode", data={"ids": ids})
    html = response.get_data(as_text=True)
    assert response.status_code == status
    assert message in html
    assert 'id="decode-ids"' in html and (ids[:100] in html or ids.startswith("[["))


def test_empty_box_invites_ids(client, trained):
    slug, _ = trained
    response = client.get(f"/t/{slug}/decode")
    assert response.status_code == 200 and "Paste some ids above" in response.text


def test_the_playground_links_the_decode_box(client, trained):
    slug, _ = trained
    assert f'href="/t/{slug}/decode"' in client.get(f"/t/{slug}").text


def test_half_a_character_shows_as_the_library_decodes_it(client, trained):
    """The first two bytes of 东 alone: U+FFFD in the box, as the library's decode gives."""
    slug, tok = trained
    assert tok.decode([228, 184]) == "\ufffd"
    html = client.get(f"/t/{slug}/decode?ids=228+184").text
    assert ">\ufffd</textarea>" in html


def test_a_long_decode_stays_within_the_page_budget(client, trained):
    """100,000 ids: the text whole, the chips cut short with a note, at most 40 bytes of HTML
    per decoded byte (as the playground's pages)."""
    slug, _ = trained
    response = client.post(f"/t/{slug}/decode", data={"ids": " ".join(["97"] * 100_000)})
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "a" * 100_000 in html
    assert len(html.encode()) <= 40 * 100_000
    assert "Showing the first" in html
