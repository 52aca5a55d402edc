"""Two vocabularies side by side (/compare/<a>/<b>/vocab and /api/vocab-diff/<a>/<b>): the
counts per side and category equal set arithmetic on the two tokenisers' own vocabularies, and
the lists page, filter and sort like the vocabulary page."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

import bpe
from bpe.token_info import token_category

HX = {"HX-Request": "true"}
ENGLISH = "the cat sat on the mat; the dog ate the bone. " * 30
MIXED = "the cat ate 东京 and 北京 noodles, the end. <script>x</script> " * 30


def keys(tok: bpe.Tokenizer) -> dict[int, tuple[bytes, bool]]:
    """What makes two tokens the same: their bytes, and whether they end a word."""
    return {i: (tok.display_bytes(i), tok.ends_word(i)) for i in tok.vocab}


def expected(a: bpe.Tokenizer, b: bpe.Tokenizer) -> dict[str, Counter]:
    """Per side, tokens per category, by plain set arithmetic on the vocabularies."""
    ka, kb = keys(a), keys(b)
    in_a, in_b = set(ka.values()), set(kb.values())

    def category(tok: bpe.Tokenizer, i: int) -> str:
        return token_category(tok.display_bytes(i), special=i in set(tok.special_tokens.values()))

    return {
        "both": Counter(category(a, i) for i, key in ka.items() if key in in_b),
        "a": Counter(category(a, i) for i, key in ka.items() if key not in in_b),
        "b": Counter(category(b, i) for i, key in kb.items() if key not in in_a),
    }


@pytest.fixture
def pair(make_tokenizer):
    first = make_tokenizer(ENGLISH, vocab_size=300, special_tokens=["<|end|>"])
    second = make_tokenizer(MIXED, vocab_size=330, special_tokens=["<|end|>"])
    return first, second


@pytest.mark.parametrize("second_mode", ["chunked", "words"])
def test_counts_equal_set_arithmetic(client, make_tokenizer, second_mode):
    first = make_tokenizer(ENGLISH, vocab_size=300, special_tokens=["<|end|>"])
    size = 330 if second_mode == "chunked" else 60
    second = make_tokenizer(MIXED, vocab_size=size, mode=second_mode)
    answer = client.get(f"/api/vocab-diff/{first.slug}/{second.slug}").get_json()
    want = expected(first.tok, second.tok)
    got = answer["counts"]
    for side in ("both", "a", "b"):
        assert got["totals"][side] == sum(want[side].values()), side
        assert {c: n[side] for c, n in got["by_category"].items() if n[side]} == dict(want[side])
    assert got["totals"]["both"] > 0 and got["totals"]["a"] > 0 and got["totals"]["b"] > 0


def test_each_side_lists_its_tokens(client, pair):
    first, second = pair
    url = f"/api/vocab-diff/{first.slug}/{second.slug}"
    only_b = client.get(url, query_string={"side": "b", "per_page": 200}).get_json()
    listed = {bytes.fromhex(t["hex"]) for t in only_b["tokens"]}
    assert listed and not listed & set(first.tok.vocab.values())
    assert all(t["a_id"] is None for t in only_b["tokens"])
    both = client.get(url, query_string={"per_page": 200}).get_json()
    for t in both["tokens"]:  # each shared token names its id on both sides
        assert first.tok.vocab[t["a_id"]] == second.tok.vocab[t["b_id"]] == bytes.fromhex(t["hex"])


def test_filters_and_sorts_as_the_vocabulary_page(client, pair):
    first, second = pair
    url = f"/api/vocab-diff/{first.slug}/{second.slug}"
    longest = client.get(url, query_string={"side": "b", "sort": "-length"}).get_json()
    lengths = [t["byte_length"] for t in longest["tokens"]]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] > 1
    letters = client.get(url, query_string={"side": "b", "category": "letters"}).get_json()
    assert letters["tokens"] and {t["category"] for t in letters["tokens"]} == {"letters"}
    found = client.get(url, query_string={"side": "b", "q": "京"}).get_json()
    assert found["tokens"] and all(
        "京".encode() in bytes.fromhex(t["hex"]) for t in found["tokens"]
    )


def test_the_page_and_its_fragment(client, pair):
    first, second = pair
    url = f"/compare/{first.slug}/{second.slug}/vocab"
    page = client.get(url, query_string={"side": "b"}).text
    assert "only in B" in page and "in both" in page and 'id="diff-results"' in page
    for field in ('name="category"', 'name="min_len"', 'name="max_len"', 'name="sort"'):
        assert field in page  # the vocabulary page's filters
    # B learned `</` from `</script>`; both have the special `<|end|>`: drawn escaped
    learned = client.get(url, query_string={"side": "b", "q": "</"}, headers=HX).text
    assert "&lt;/" in learned
    special = client.get(url, query_string={"q": "<|"}, headers=HX).text
    assert "&lt;|end|&gt;" in special and "<|end|>" not in special
    fragment = client.get(url, query_string={"page": 2, "per_page": 25}, headers=HX)
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert fragment.headers["HX-Push-Url"].endswith("vocab?per_page=25&page=2")
    compare = client.get(f"/compare/{first.slug}/{second.slug}").text
    assert f'href="{url}"' in compare  # the comparison links its vocabularies


@pytest.mark.parametrize(
    ("query", "status"),
    [({"side": "c"}, 400), ({"sort": "nope"}, 400), ({"page": 9999}, 404), ({"min_len": "x"}, 400)],
)
def test_bad_queries_are_4xx(client, pair, query, status):
    first, second = pair
    for url in (
        f"/compare/{first.slug}/{second.slug}/vocab",
        f"/api/vocab-diff/{first.slug}/{second.slug}",
    ):
        assert client.get(url, query_string=query).status_code == status, (url, query)


def test_unknown_tokeniser_is_404(client, pair):
    first, _ = pair
    assert client.get(f"/compare/{first.slug}/nope/vocab").status_code == 404
    assert client.get(f"/api/vocab-diff/nope/{first.slug}").get_json()["status"] == 404


def test_command_line_counts_equal_set_arithmetic(tmp_path, pair):
    first, second = pair
    for name, ref in (("a.json", first), ("b.json", second)):
        bpe.save(ref.tok, tmp_path / name)
    result = subprocess.run(
        [sys.executable, "-m", "bpe", "vocab-diff", "a.json", "b.json", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(result.stdout)
    want = expected(first.tok, second.tok)
    for ours, theirs in (("both", "both"), ("only_a", "a"), ("only_b", "b")):
        assert answer["counts"][ours] == dict(want[theirs]), ours
        assert answer["totals"][ours] == sum(want[theirs].values())
    table = subprocess.run(
        [sys.executable, "-m", "bpe", "vocab-diff", "a.json", "b.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    [all_row] = [line.split() for line in table.splitlines() if line.startswith("all ")]
    assert all_row[1:] == [f"{sum(want[s].values()):,}" for s in ("both", "a", "b")]


def test_a_sentencepiece_token_is_the_same_as_what_it_stands_for(client, make_tokenizer):
    """Llama 2 spells ` the` as `▁the` and a newline as `<0x0A>`: the diff compares what the
    tokens stand for, so a byte-level tokeniser's ` the` and `\\n` are in both."""
    from tests.test_migrations import SENTENCEPIECE_FILE
    from tests.test_web_imports import upload

    raw = json.dumps(SENTENCEPIECE_FILE).encode()
    answer = upload(client, "/api/tokenizers/import", {"file": (raw, "tokenizer.json")})
    assert answer.status_code == 201, answer.get_data(as_text=True)
    llama_like = answer.get_json()["slug"]
    own = make_tokenizer(ENGLISH, vocab_size=300)
    both = client.get(
        f"/api/vocab-diff/{llama_like}/{own.slug}", query_string={"per_page": 200}
    ).get_json()
    shared = {bytes.fromhex(t["stands_for_hex"]): t["a_id"] for t in both["tokens"]}
    assert shared[b" the"] == 9 and shared[b"\n"] == 1 and shared[b" "] == 3
