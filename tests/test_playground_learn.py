"""The tokeniser page's merge scrubber and "why this split?" replay, through the
Flask test client: k = 0, k = N and k in between, what merge k removed, and a replay that ends
in exactly the encoding of its chunk, for every mode, with and without htmx."""

from __future__ import annotations

import re

import pytest

import bpe
from tests.test_library import LOREM

HX = {"HX-Request": "true"}
TEXT = "Quisquam quaerat numquam. Amet quaerat quiquia, dolorem est 42!"
MODES = ("naive", "chunked", "words")


@pytest.fixture
def stored(make_corpus, make_tokenizer):
    """mode -> TokenizerRef, all trained on the same lorem ipsum."""
    corpus = make_corpus(LOREM, name="lorem")
    sizes = {"naive": 300, "chunked": 300, "words": 90}
    return {
        mode: make_tokenizer(LOREM, mode=mode, vocab_size=size, corpus=corpus)
        for mode, size in sizes.items()
    }


def shown_ids(html: str) -> list[int]:
    """The ids the playground shows (its "ids as a list" box, in the ids view)."""
    found = re.search(r'aria-label="Token ids, comma separated">([^<]*)</textarea>', html)
    assert found, "no ids list on the page"
    return [int(i) for i in found[1].split(", ") if i]


def play(client, ref, **data):
    return client.post(f"/t/{ref.slug}/encode", data={"view": "ids", **data})


# ----- the scrubber -------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["naive", "chunked"])
def test_no_merges_leaves_every_byte_its_own_token(client, stored, mode):
    response = play(client, stored[mode], text=TEXT, k="0")
    assert response.status_code == 200
    assert shown_ids(response.text) == list(TEXT.encode())
    assert "no merges: every byte" in response.text


def test_words_mode_without_merges_is_characters(client, stored):
    ref = stored["words"]
    ids = shown_ids(play(client, ref, text=TEXT, k="0").text)
    assert ids == ref.tok.encode(TEXT, merge_limit=0)
    assert len(ids) == len("".join(TEXT.split())) + len(TEXT.split())  # characters + </w>s


@pytest.mark.parametrize("mode", MODES)
def test_all_merges_is_the_full_encoding(client, stored, mode):
    ref = stored[mode]
    n = len(ref.tok.merges)
    for k in (str(n), "", str(n + 1000)):
        html = play(client, ref, text=TEXT, k=k).text
        assert shown_ids(html) == ref.tok.encode(TEXT)
        assert "removed <strong>" not in html  # no scrub line when every merge is used
    html = client.get(f"/t/{ref.slug}").text
    assert f'name="k" min="0" max="{n}" value="{n}"' in html  # the slider starts at the end


@pytest.mark.parametrize("mode", ["naive", "chunked"])
@pytest.mark.parametrize("k", [1, 9, 30])
def test_k_merges_equal_a_tokeniser_trained_to_256_plus_k(client, stored, make_tokenizer, mode, k):
    ref = stored[mode]
    small = make_tokenizer(LOREM, mode=mode, vocab_size=256 + k)
    assert small.tok.merges == ref.tok.merges[:k]
    scrubbed = shown_ids(play(client, ref, text=TEXT, k=str(k)).text)
    trained = shown_ids(play(client, small, text=TEXT).text)
    assert scrubbed == trained != ref.tok.encode(TEXT)


@pytest.mark.parametrize("mode", MODES)
def test_the_page_says_which_merge_k_is_and_what_it_removed(client, stored, mode):
    ref = stored[mode]
    tok = ref.tok
    for k in (1, 4, 12):
        fragment = play(client, ref, text=TEXT, k=str(k)).text
        removed = len(tok.encode(TEXT, merge_limit=k - 1)) - len(tok.encode(TEXT, merge_limit=k))
        left, right, new = tok.merges[k - 1]
        found = re.search(
            rf"merge {k} of {len(tok.merges)}:(.*?)removed <strong>(\d+)</strong> boundar",
            fragment,
            re.S,
        )
        assert found and int(found[2]) == removed, k
        for part in (left, right, new):
            assert f"id {part} ·" in found[1]


def test_scrubber_works_as_a_plain_form_and_refuses_nonsense(client, stored):
    ref = stored["chunked"]
    html = client.get(f"/t/{ref.slug}?text=quam&k=2").text  # a GET link keeps k too
    assert 'name="k" min="0"' in html and 'value="2"' in html and "first 2 merges" in html
    response = play(client, ref, text=TEXT, k="many")
    assert response.status_code == 400 and "k must be a whole number" in response.text
    response = play(client, ref, text=TEXT, k="-3")
    assert response.status_code == 200 and shown_ids(response.text) == list(TEXT.encode())


# ----- why this split? ----------------------------------------------------------------------------
def result_ids(html: str) -> list[int]:
    """The ids of the replay's last list of tokens ("The result")."""
    part = html[html.index('aria-label="The result"') :]
    part = part[: part.index("</div>")]
    return [int(i) for i in re.findall(r'data-tip="id (\d+) ', part)]


def start_ids(html: str) -> list[int]:
    part = html[html.index('aria-label="Tokens at the start"') :]
    part = part[: part.index("</div>")]
    return [int(i) for i in re.findall(r'data-tip="id (\d+) ', part)]


@pytest.mark.parametrize("mode", MODES)
def test_replay_ends_in_exactly_the_encoding_of_the_chunk(client, stored, mode):
    tok = stored[mode].tok
    text = "Quisquam quaerat numquam."
    chunks = bpe.stepwise.encode_chunks(tok, text)
    index = 0
    for chunk in chunks:
        piece = text[chunk.start : chunk.end]
        response = client.post(
            f"/t/{stored[mode].slug}/why", data={"text": text, "token": str(index + 1)}, headers=HX
        )
        assert response.status_code == 200 and "<html" not in response.text
        assert result_ids(response.text) == tok.encode(piece) == chunk.ids, piece
        assert start_ids(response.text) == bpe.stepwise.base_symbols(tok, piece)
        steps = re.findall(r"<strong>Step (\d+)\.</strong>", response.text)
        assert len(steps) == len(bpe.stepwise.replay(start_ids(response.text), tok.ranks))
        assert "exactly the tokens the playground shows" in response.text
        index += len(chunk.ids)


def test_each_step_lists_the_pairs_present_and_applies_the_earliest(client, stored):
    ref = stored["chunked"]
    html = client.post(f"/t/{ref.slug}/why", data={"text": "quaerat", "at": "0"}, headers=HX).text
    steps = html.split("<strong>Step ")[1:]
    assert steps
    for step in steps:
        ranks = [int(r) for r in re.findall(r"<small>rank (\d+)</small>", step)]
        assert ranks == sorted(ranks)
        applied = re.search(r'class="pair pair-applied">.*?<small>rank (\d+)</small>', step, re.S)
        assert applied and int(applied[1]) == ranks[0]
        assert "just-merged" in step


def test_a_long_naive_text_replays_a_window_that_encodes_the_same(client, stored):
    ref = stored["naive"]
    text = LOREM  # one sequence of ~700 bytes: far more than a replay shows
    ids = ref.tok.encode(text)
    middle = len(ids) // 2
    html = client.post(f"/t/{ref.slug}/why", data={"text": text, "token": str(middle + 1)}).text
    assert "<html" in html and 'id="why"' in html  # without htmx: the whole page, panel filled
    assert "replays the tokens around the one you picked" in html
    result = result_ids(html)
    assert result and any(
        ids[lo : lo + len(result)] == result
        for lo in range(max(0, middle - len(result) + 1), middle + 1)
    )
    assert "exactly the tokens the playground shows" in html


def test_replay_with_the_scrubber_uses_only_the_first_k_merges(client, stored):
    ref = stored["chunked"]
    html = client.post(
        f"/t/{ref.slug}/why", data={"text": "quaerat", "token": "1", "k": "3"}, headers=HX
    ).text
    assert "with the first 3 merges" in html
    assert result_ids(html) == ref.tok.encode("quaerat", merge_limit=3)
    assert all(int(r) < 3 for r in re.findall(r"<small>rank (\d+)</small>", html))


def test_a_special_token_is_explained_as_one(client, make_tokenizer):
    ref = make_tokenizer(LOREM, mode="chunked", vocab_size=280, special_tokens=["<|end|>"])
    html = client.post(f"/t/{ref.slug}/why", data={"text": "quam<|end|>", "token": "2"}).text
    assert "special token" in html and "matched as a whole" in html


def test_why_refuses_what_it_cannot_explain(client, stored):
    ref = stored["chunked"]
    url = f"/t/{ref.slug}/why"
    response = client.post(url, data={"text": "quam"}, headers=HX)
    assert response.status_code == 400 and "Say which token" in response.text
    response = client.post(url, data={"text": "quam", "token": "99"}, headers=HX)
    assert response.status_code == 422 and "no token 99" in response.text
    response = client.post(url, data={"text": "quam", "at": "x"}, headers=HX)
    assert response.status_code == 400
    response = client.post(url, data={"text": "", "token": "1"})
    assert response.status_code == 422


def test_the_playground_offers_why_without_javascript(client, stored):
    html = client.get(f"/t/{stored['chunked'].slug}?text=quam").text
    assert 'name="token"' in html and f'formaction="/t/{stored["chunked"].slug}/why#why"' in html
    assert f'data-why-url="/t/{stored["chunked"].slug}/why"' in html


@pytest.mark.parametrize("kind", ["tiktoken", "hf"])
def test_imported_tokenisers_replay_by_their_own_rule(app, client, kind):
    """A tiktoken rank file replays by its rank rule, a tokenizer.json by its merge list: the
    panel says which, joins one place a step, and ends in the playground's own tokens."""
    from bpe.export_hf import to_hf_json
    from bpe.export_tiktoken import rank_file_text
    from webapp.content.imports import import_upload

    ours = bpe.train(LOREM, vocab_size=300, mode="chunked")
    if kind == "tiktoken":
        raw, filename = rank_file_text(ours).encode(), "lorem.tiktoken"
        row = import_upload(app.extensions["bpe_db"], raw, filename=filename, pattern="cl100k")
    else:
        raw, filename = to_hf_json(ours).encode(), "tokenizer.json"
        row = import_upload(app.extensions["bpe_db"], raw, filename=filename)
    text = "Quisquam quaerat numquam."
    response = client.post(f"/t/{row.slug}/why", data={"text": text, "token": "1"}, headers=HX)
    assert response.status_code == 200, response.text[:300]
    html = response.text
    said = "tiktoken's rule" if kind == "tiktoken" else "by its merge list"
    assert said in html and "at its leftmost place" in html
    assert "exactly the tokens the playground shows here" in html
    scrubbed = client.post(
        f"/t/{row.slug}/why", data={"text": text, "token": "1", "k": "10"}, headers=HX
    )
    assert scrubbed.status_code == 200 and "with the first 10 merges" in scrubbed.text
    assert "exactly the tokens the playground shows here" in scrubbed.text


def test_a_tiktoken_replay_says_the_rank_its_chips_say(app, client):
    """A tiktoken token's id is its rank in the file (id 300 is rank 300 there) while its
    chip says its merge rank (44): the replay's text says the chip's number."""
    from bpe.export_tiktoken import rank_file_text
    from webapp.content.imports import import_upload

    ours = bpe.train(LOREM, vocab_size=300, mode="chunked")
    raw = rank_file_text(ours).encode()
    row = import_upload(app.extensions["bpe_db"], raw, filename="lorem.tiktoken", pattern="cl100k")
    html = client.post(
        f"/t/{row.slug}/why", data={"text": "Quisquam quaerat numquam.", "token": "1"}, headers=HX
    ).text
    steps = re.findall(
        r"Join the lowest, rank ([\d,]+), at its leftmost place: <span [^>]*"
        r'data-tip="id (\d+) · rank (\d+)',
        html,
    )
    assert steps, html[:500]
    for said, token_id, chip_rank in steps:
        assert int(token_id) != int(chip_rank)  # the file's rank and the merge rank differ
        assert said.replace(",", "") == chip_rank
