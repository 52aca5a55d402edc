"""The JSON API: encode, decode, metadata, a page of merges, a page of the vocabulary."""

from __future__ import annotations

import pytest


@pytest.fixture
def tok_ref(make_tokenizer):
    return make_tokenizer(vocab_size=320, special_tokens=["<|end|>"])


def error_of(response, status: int) -> str:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.is_json
    body = response.get_json()
    assert body["status"] == status and body["error"]
    return body["error"]


def test_metadata(client, tok_ref):
    response = client.get(f"/api/t/{tok_ref.slug}")
    assert response.status_code == 200
    data = response.get_json()
    assert data["mode"] == "chunked" and data["trainer"] == "reference"
    assert data["vocab_size"] == 320 and data["merges"] == 63
    assert data["special_tokens"] == {"<|end|>": 319}
    assert data["corpus"]["name"] == "sample"
    assert data["compression"]["bytes_per_token"] > 1
    assert data["downloads"]["hf"].endswith(f"/t/{tok_ref.slug}/download/hf")


def test_encode_post_and_get_agree_with_the_library(client, tok_ref):
    text = "The quick brown fox, 東京 😀"
    expected = tok_ref.tok.encode(text)
    posted = client.post(f"/api/t/{tok_ref.slug}/encode", json={"text": text}).get_json()
    assert posted["ids"] == expected
    assert posted["counts"] == {
        "bytes": len(text.encode()),
        "characters": len(text),
        "tokens": len(expected),
        "bytes_per_token": len(text.encode()) / len(expected),
    }
    assert bytes.fromhex("".join(t["hex"] for t in posted["tokens"])) == text.encode()
    got = client.get(f"/api/t/{tok_ref.slug}/encode", query_string={"text": text}).get_json()
    assert got["ids"] == expected


@pytest.mark.parametrize("mode", ["chunked", "naive", "words"])
def test_an_encode_answer_is_byte_for_byte_what_jsonify_gives(
    app, client, make_tokenizer, mode, monkeypatch
):
    """The answer is joined from per-token JSON pieces cached per tokeniser: asked twice (pieces
    made, then reused) it must equal jsonify of the same structure, for specials, `</w>` words,
    tokens that are half a UTF-8 character, characters JSON escapes, and ids past the cap on
    cached pieces."""
    import webapp.rendering.encode_json

    ref = make_tokenizer(vocab_size=300, mode=mode, special_tokens=["<|end|>"])
    tok = ref.tok
    text = 'The quick "brown" fox\\ 東京 😀 \u202e\x07<|end|> done'
    ids = tok.encode(text, allowed_special="all")
    expected = app.json.dumps(
        {
            "ids": ids,
            "tokens": [
                {"id": i, "hex": tok.token_bytes(i).hex(), "text": tok.id_to_token(i)} for i in ids
            ],
            "counts": {
                "bytes": len(text.encode()),
                "characters": len(text),
                "tokens": len(ids),
                "bytes_per_token": len(text.encode()) / len(ids),
            },
        },
        separators=(",", ":"),
    )
    url = f"/api/t/{ref.slug}/encode"
    # A few pieces kept, the rest made per answer; then all kept; then all reused.
    for cap in (
        3,
        webapp.rendering.encode_json.MAX_PIECES,
        webapp.rendering.encode_json.MAX_PIECES,
    ):
        monkeypatch.setattr(webapp.rendering.encode_json, "MAX_PIECES", cap)
        response = client.post(url, json={"text": text, "allowed_special": "all"})
        assert response.mimetype == "application/json"
        assert response.get_data(as_text=True) == expected + "\n"


def test_encode_special_tokens_only_when_allowed(client, tok_ref):
    url = f"/api/t/{tok_ref.slug}/encode"
    plain = client.post(url, json={"text": "a<|end|>"}).get_json()["ids"]
    assert 319 not in plain
    for allowed in ("all", ["<|end|>"]):
        ids = client.post(url, json={"text": "a<|end|>", "allowed_special": allowed}).get_json()
        assert ids["ids"][-1] == 319
    message = error_of(client.post(url, json={"text": "a", "allowed_special": ["<|nope|>"]}), 422)
    assert "<|nope|>" in message
    error_of(client.post(url, json={"text": "a", "allowed_special": 5}), 422)


def test_encode_empty_text(client, tok_ref):
    data = client.post(f"/api/t/{tok_ref.slug}/encode", json={"text": ""}).get_json()
    assert data["ids"] == [] and data["counts"]["bytes_per_token"] is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"data": "not json", "content_type": "application/json"},
        {"json": ["a list"]},
        {"json": {"txt": "typo"}},
        {"json": {"text": 42}},
    ],
)
def test_encode_bad_bodies_are_400(client, tok_ref, kwargs):
    assert "text" in error_of(client.post(f"/api/t/{tok_ref.slug}/encode", **kwargs), 400)


def test_encode_oversize_text_is_413(app, client, tok_ref):
    app.config["PLAYGROUND_MAX_BYTES"] = 1000
    message = error_of(client.post(f"/api/t/{tok_ref.slug}/encode", json={"text": "x" * 1001}), 413)
    assert "1,000 bytes" in message
    assert (
        client.post(f"/api/t/{tok_ref.slug}/encode", json={"text": "x" * 1000}).status_code == 200
    )


def test_decode_round_trips(client, tok_ref):
    text = "hello wörld"
    ids = tok_ref.tok.encode(text)
    data = client.post(f"/api/t/{tok_ref.slug}/decode", json={"ids": ids}).get_json()
    assert data == {"text": text, "hex": text.encode().hex()}


def test_decode_partial_utf8_keeps_exact_bytes_in_hex(client, tok_ref):
    data = client.post(f"/api/t/{tok_ref.slug}/decode", json={"ids": [0xE6]}).get_json()
    assert data == {"text": "\ufffd", "hex": "e6"}


@pytest.mark.parametrize(
    ("ids", "status", "fragment"),
    [
        ([1, 320], 422, "ids[1] = 320"),
        ([-1], 422, "ids run 0 to 319"),
        ([1, "2"], 400, "whole numbers"),
        ([True], 400, "whole numbers"),
        ("1 2 3", 400, "list"),
        ([1.5], 400, "whole numbers"),
    ],
)
def test_decode_bad_ids(client, tok_ref, ids, status, fragment):
    message = error_of(client.post(f"/api/t/{tok_ref.slug}/decode", json={"ids": ids}), status)
    assert fragment in message


def test_merges_page(client, tok_ref):
    data = client.get(f"/api/t/{tok_ref.slug}/merges?per_page=10&page=2").get_json()
    assert (data["page"], data["per_page"], data["total"], data["pages"]) == (2, 10, 63, 7)
    first = data["merges"][0]
    left, right, new = tok_ref.tok.merges[10]
    assert (first["rank"], first["left_id"], first["right_id"], first["new_id"]) == (
        10,
        left,
        right,
        new,
    )
    assert first["pair_count"] == tok_ref.tok.training.merge_counts[10]
    assert bytes.fromhex(first["hex"]) == tok_ref.tok.token_bytes(new)
    found = client.get(f"/api/t/{tok_ref.slug}/merges?q=the").get_json()
    assert found["total"] >= 1 and all("the" in m["text"] for m in found["merges"])


def test_vocab_page_filters(client, tok_ref):
    data = client.get(f"/api/t/{tok_ref.slug}/vocab?category=special").get_json()
    assert data["total"] == 1
    [special] = data["tokens"]
    assert special == {
        "id": 319,
        "hex": b"<|end|>".hex(),
        "text": "<|end|>",
        "byte_length": 7,
        "char_length": 7,
        "category": "special",
        "rank": None,
        "pair_count": None,
        "special": True,
        "ends_word": False,
    }
    merged = client.get(f"/api/t/{tok_ref.slug}/vocab?q=20&match=hex&sort=-count").get_json()
    assert merged["tokens"][0]["rank"] is not None
    counts = [t["pair_count"] for t in merged["tokens"] if t["pair_count"] is not None]
    assert counts == sorted(counts, reverse=True)


@pytest.mark.parametrize(
    "query", ["sort=nope", "category=x", "page=0", "per_page=1000", "q=zz&match=hex"]
)
def test_bad_page_queries_are_400(client, tok_ref, query):
    error_of(client.get(f"/api/t/{tok_ref.slug}/vocab?{query}"), 400)


@pytest.mark.parametrize("suffix", ["", "/encode?text=a", "/merges", "/vocab"])
def test_unknown_slug_is_a_json_404(client, suffix):
    message = error_of(client.get(f"/api/t/{'Z' * 22}{suffix}"), 404)
    assert "no tokeniser" in message
    error_of(client.post(f"/api/t/{'Z' * 22}/decode", json={"ids": [1]}), 404)


def test_wrong_method_is_a_json_405(client, tok_ref):
    error_of(client.get(f"/api/t/{tok_ref.slug}/decode"), 405)
