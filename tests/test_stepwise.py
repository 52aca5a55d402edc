"""bpe.stepwise: encoding with the first k merges, the chunks of a text, and the step-by-step
replay of one chunk (the library half of the merge scrubber and "why this split?")."""

from __future__ import annotations

import base64
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe.encoder import encode_ids
from bpe.stepwise import apply_merge, base_symbols, encode_chunks, first_merges, replay

TEXT = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit. Quisque quam quod quorum.\n"
    "that cat sat at the mat; it is not what it was. Café 東京 😀 42 1234567\n"
) * 3
MODES = ("naive", "chunked", "words")


def trained(mode: str, vocab_size: int) -> bpe.Tokenizer:
    return bpe.train(TEXT, vocab_size=vocab_size, mode=mode, trainer="reference")


@pytest.fixture(scope="module", params=MODES)
def tok(request):
    base = 256 if request.param != "words" else len(set(TEXT) - set(" \n")) + 1
    return trained(request.param, base + 60)


def test_no_merges_leaves_every_byte_its_own_token():
    tok = trained("chunked", 300)
    ids = tok.encode("qu'or 東", merge_limit=0)
    assert ids == list("qu'or 東".encode())
    naive = trained("naive", 300)
    assert naive.encode(TEXT, merge_limit=0) == list(TEXT.encode())


def test_words_mode_without_merges_is_characters_and_end_of_word():
    tok = trained("words", 200)
    ids = tok.encode("cat sat", merge_limit=0)
    char = {c: i for i, c in enumerate(tok.alphabet)}
    end = tok.end_of_word_id
    assert ids == [char["c"], char["a"], char["t"], end, char["s"], char["a"], char["t"], end]


def test_all_merges_is_the_full_encoding(tok):
    n = len(tok.merges)
    for text in (TEXT, "quorum, the mat! 東京 x", ""):
        assert tok.encode(text, merge_limit=n) == tok.encode(text)
        assert bpe.stepwise.encode_with_merges(tok, text) == tok.encode(text)


@pytest.mark.parametrize("mode", ["naive", "chunked"])
@pytest.mark.parametrize("k", [1, 7, 30])
def test_first_k_merges_equal_training_with_a_vocab_of_256_plus_k(mode, k):
    big = trained(mode, 256 + 60)
    small = trained(mode, 256 + k)
    assert small.merges == big.merges[:k]  # greedy training: the premise of the scrubber
    for text in (TEXT, "quam quod sit amet; cat mat"):
        assert big.encode(text, merge_limit=k) == small.encode(text)
        assert big.encode(text, merge_limit=k) != big.encode(text)


def test_words_mode_first_k_merges_equal_training_that_far():
    big = trained("words", 200)
    small = trained("words", big.vocab_size - len(big.merges) + 12)  # `<unk>` counts too
    assert small.merges == big.merges[:12]
    assert big.encode(TEXT, merge_limit=12) == small.encode(TEXT) != big.encode(TEXT)


def test_each_merge_is_one_more_pass_over_the_previous_encoding(tok):
    """encode(k) is encode(k-1) with merge k-1 applied within each chunk: what the scrubber
    relies on to say how many boundaries merge k removed."""
    previous = encode_chunks(tok, TEXT, merge_limit=0)
    for k in range(1, len(tok.merges) + 1):
        left, right, new = tok.merges[k - 1]
        current = encode_chunks(tok, TEXT, merge_limit=k)
        assert [c.ids for c in current] == [
            apply_merge(c.ids, (left, right), new) for c in previous
        ]
        previous = current


def test_chunks_cover_the_text_and_carry_specials():
    tok = bpe.train(TEXT, vocab_size=300, mode="chunked", special_tokens=["<|end|>"])
    text = "the mat<|end|> quam"
    chunks = encode_chunks(tok, text, allowed_special="all")
    assert [text[c.start : c.end] for c in chunks] == ["the", " mat", "<|end|>", " quam"]
    assert [c.special for c in chunks] == [False, False, True, False]
    assert [i for c in chunks for i in c.ids] == tok.encode(text, allowed_special="all")
    with pytest.raises(ValueError, match="not a special token"):
        encode_chunks(tok, text, allowed_special=["<|nope|>"])


def test_a_negative_limit_is_refused():
    with pytest.raises(ValueError, match="0 or more"):
        first_merges(trained("naive", 260), -1)


def test_the_worked_encode_example_replayed():
    ranks = {(97, 97): 256, (256, 97): 257, (257, 98): 258}
    steps = replay([97, 98, 97, 97, 97, 98], ranks)
    assert [s.applied for s in steps] == [(97, 97), (256, 97), (257, 98)]
    assert steps[0].present == [((97, 97), 256)]
    assert steps[0].positions == [2]
    assert steps[-1].after == [97, 98, 258]
    aaaa = replay([97, 97, 97, 97], ranks)
    assert [s.after for s in aaaa] == [[256, 256]]  # no (256, 256) learned: it stops there
    assert aaaa[0].positions == [0, 2]


def test_replay_of_every_chunk_ends_in_its_encoding(tok):
    for chunk in encode_chunks(tok, TEXT):
        symbols = base_symbols(tok, TEXT[chunk.start : chunk.end])
        steps = replay(symbols, tok.ranks)
        assert (steps[-1].after if steps else symbols) == chunk.ids
        ranks_applied = [s.new_id for s in steps]
        assert ranks_applied == sorted(ranks_applied)  # the encode rule: earliest learned first
        for step in steps:
            assert step.present[0] == (step.applied, step.new_id)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="abcqu t.東\n", max_size=60), st.integers(min_value=0, max_value=70))
def test_limited_encoding_decodes_back_and_replays_exactly(text, k):
    tok = trained("chunked", 316)
    ids = tok.encode(text, merge_limit=k)
    assert tok.decode(ids) == text
    ranks = first_merges(tok, k)
    for chunk in encode_chunks(tok, text, merge_limit=k):
        symbols = base_symbols(tok, text[chunk.start : chunk.end])
        steps = replay(symbols, ranks)
        assert (steps[-1].after if steps else symbols) == chunk.ids


_CUT_BACK = {mode: trained(mode, 256 + 90) for mode in ("naive", "chunked")}


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(sorted(_CUT_BACK)),
    st.text(alphabet="abcqu t.東😀\n", max_size=80),
    st.integers(min_value=0, max_value=95),
)
def test_the_full_encoding_cut_back_equals_encoding_with_the_first_k_merges(mode, text, k):
    """encode_chunks(merge_limit=k) splits the full encoding's later tokens back into parts;
    that must be exactly the encode rule's loop (docs/algorithms.md, "Encoding") run with the
    first k merges only."""
    tok = _CUT_BACK[mode]
    ranks = first_merges(tok, k)
    for chunk in encode_chunks(tok, text, merge_limit=k):
        symbols = base_symbols(tok, text[chunk.start : chunk.end])
        assert chunk.ids == encode_ids(symbols, ranks)


def test_imported_tokenisers_with_shuffled_ids_segment_by_their_own_rule():
    """An HF file whose ids are shuffled (single bytes are not 0..255): chunks, the scrubber's
    k-limited encoding and the boundary spans all follow the tokeniser's own encode."""
    import json
    import random

    from bpe.export_hf import to_hf_json
    from bpe.importers import import_bytes
    from tests.test_imports import synthetic
    from webapp.rendering.segmentation import scrub, segment

    ours = trained("chunked", 300)
    options = {
        "shuffle_merges": False,
        "string_merges": False,
        "ignore_merges": False,
        "prefix": False,
        "use_regex": True,
        "split": None,
    }
    data = synthetic(json.loads(to_hf_json(ours)), random.Random(3), options)
    tok = import_bytes(json.dumps(data).encode(), filename="tokenizer.json")
    assert tok.byte_ids != list(range(256))  # the premise: bytes have other ids
    text = TEXT
    assert segment(tok, text).ids == tok.encode(text)
    for k in range(0, len(tok.merges) + 1, 4):
        cut = scrub(tok, text, k)
        assert cut.segmentation.ids == tok.encode(text, merge_limit=k)
        spans = cut.segmentation.spans
        assert spans[0][0] == 0 and spans[-1][1] == len(text.encode())
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        if k:
            before = len(tok.encode(text, merge_limit=k - 1))
            assert cut.removed == before - len(cut.segmentation.ids)


# ----- "why this split?" for imported tokenisers ------------------------------------------------
def _imported_tokenisers() -> dict[str, bpe.Tokenizer]:
    """A tiktoken rank file and two HF files (shuffled merges and ids; ignore_merges and a
    prefix space) made from our own export, so each encodes by its source's rule."""
    import json
    import random

    from bpe.export_hf import to_hf_json
    from bpe.export_tiktoken import rank_file_text
    from bpe.importers import import_bytes
    from tests.test_imports import synthetic

    ours = trained("chunked", 330)
    made = {
        "tiktoken": import_bytes(
            rank_file_text(ours).encode(), filename="ours.tiktoken", pattern="cl100k"
        )
    }
    base = json.loads(to_hf_json(ours))
    for name, seed, shuffled, ignore, prefix in (
        ("hf", 3, True, False, False),
        ("hf-ignore", 4, False, True, True),
    ):
        options = {
            "shuffle_merges": shuffled,
            "string_merges": False,
            "ignore_merges": ignore,
            "prefix": prefix,
            "use_regex": True,
            "split": None,
        }
        data = synthetic(base, random.Random(seed), options)
        made[name] = import_bytes(json.dumps(data).encode(), filename="tokenizer.json")
    return made


_IMPORTED = _imported_tokenisers()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(_IMPORTED)),
    st.text(alphabet="abcqu thre.東😀\n", max_size=90),
    st.sampled_from([None, 0, 5, 40]),
    st.data(),
)
def test_imported_replays_end_in_the_tokens_the_page_shows(name, text, k, data):
    """Any token of any text: the replay of its piece, by the file's own rule, ends in exactly
    the ids the playground shows there (the whole piece's ids when it is not windowed)."""
    from webapp.rendering.replay import _window_in_page
    from webapp.rendering.segmentation import replay_token

    tok = _IMPORTED[name]
    ids = tok.encode(text, merge_limit=k)
    if not ids:
        assert replay_token(tok, text, 0, merge_limit=k) is None
        return
    at = data.draw(st.integers(min_value=0, max_value=len(ids) - 1))
    replayed = replay_token(tok, text, at, merge_limit=k)
    assert replayed is not None and replayed.rule == tok.rule
    assert _window_in_page(replayed, ids) is not None
    if not replayed.windowed:  # the whole piece, as the model sees it (a prefix space too)
        shown = b"".join(tok.token_bytes(i) for i in replayed.result)
        assert shown == replayed.chunk_text.encode()
    if not replayed.whole:
        for step in replayed.steps:  # one join a step, by the lowest rank present
            assert len(step.positions) == 1 and step.present[0] == (step.applied, step.new_id)


def test_a_tiktoken_replay_joins_what_our_rule_would_not():
    """Ranks `b c bc ab abc`: tiktoken joins a|bc (our rule's learned pairs never do), and
    the replay shows that join; `xxx` joins its leftmost pair; `abc` alone is taken whole."""
    from bpe.importers import import_bytes
    from webapp.rendering.segmentation import replay_token

    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"bc": 256, b"ab": 257, b"abc": 258, b"abca": 259, b"xx": 260})
    raw = "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()).encode()
    tok = import_bytes(raw, filename="tiny.tiktoken", pattern="gpt2")
    assert tok.encode("abcab") == [258, 257]
    replayed = replay_token(tok, "abcab", 0)
    # bc (256) first; then ab (257) at its one place left; then a + bc joins into abc (258)
    applied = [(s.applied, s.new_id, s.positions) for s in replayed.steps]
    assert applied == [((98, 99), 256, [1]), ((97, 98), 257, [2]), ((97, 256), 258, [0])]
    assert replayed.result == [258, 257] and not replayed.whole
    ties = replay_token(tok, "xxx", 0)  # the leftmost of equal ranks joins first
    assert [s.positions for s in ties.steps] == [[0]] and ties.result == [260, 120]
    alone = replay_token(tok, "abc", 0)
    assert alone.whole and alone.steps == [] and alone.result == [258]


def test_replaying_the_real_cl100k_ends_in_tiktokens_ids():
    from bpe.importers import import_path
    from tests.reference_files import reference_dir
    from webapp.rendering.segmentation import replay_token

    tok = import_path(reference_dir() / "cl100k_base.tiktoken")
    text = "Tokenisers, indivisibly: 東京タワー; 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and  spaces\n"
    ids = tok.encode(text)
    for at in range(len(ids)):
        replayed = replay_token(tok, text, at)
        if not replayed.windowed:
            assert replayed.result == tok.encode(replayed.chunk_text)
