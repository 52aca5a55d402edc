"""Encoding text of every script is exact: the branches taken by script (short pieces of any
script encoded whole, the rough cuts stitched where partial tokens are many, the exact cuts
where they are few) give the literal rule's ids, and HF's and tiktoken's on our exports.

Texts come from `tests.strategies` (words of 18 scripts, joined with spaces, punctuation or
nothing); the merge lists are trained on such text or drawn at random over one script's bytes,
which learns tokens holding parts of characters (partial tokens, `bpe.cuts`) all over.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe.cuts import CutTable
from bpe.encoder import encode_pieces
from bpe.modes.byte_symbols import (
    cheap_search,
    encode_chunks_joined,
    encode_in_pieces,
    encode_multibyte,
)
from bpe.modes.chunked import cut_whole
from bpe.stitch import word_ends
from tests.strategies import SCRIPT_TEXTS, SCRIPT_WORDS, SEPARATORS, WORLD_TEXTS
from tests.test_encoding import literal_rule, oracle_encode, random_merges

PICKS = st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=80)
SCRIPTS = st.sampled_from(sorted(SCRIPT_WORDS))


def script_texts(script: str) -> st.SearchStrategy[str]:
    parts = st.tuples(st.sampled_from(SCRIPT_WORDS[script]), SEPARATORS)
    return st.lists(parts, min_size=1, max_size=30).map(lambda p: "".join(w + s for w, s in p))


def script_tokenizer(script: str, picks: list[tuple[int, int]], mode: str) -> bpe.Tokenizer:
    """Random merges over one script's bytes (and a space): partial tokens all over."""
    alphabet = ("".join(SCRIPT_WORDS[script]) + " ,").encode()
    merges = random_merges(picks, alphabet)
    return bpe.Tokenizer(mode=mode, merges=merges, pattern=bpe.GPT4_PATTERN)


@settings(max_examples=300, deadline=None)
@given(script=SCRIPTS, picks=PICKS, mode=st.sampled_from(["naive", "chunked"]), data=st.data())
def test_property_random_merges_over_each_script_encode_as_the_rule(script, picks, mode, data):
    tok = script_tokenizer(script, picks, mode)
    texts = data.draw(st.lists(script_texts(script), min_size=1, max_size=3))
    for text in texts:  # one cache for several texts, as a long-lived tokeniser's
        assert tok.encode(text, engine="pure") == oracle_encode(tok, text)


@settings(max_examples=300, deadline=None)
@given(script=SCRIPTS, picks=PICKS, data=st.data())
def test_property_rough_cuts_flagged_exact_are_exact(script, picks, data):
    tok = script_tokenizer(script, picks, "naive")
    text = data.draw(script_texts(script))
    cuts = CutTable(tok.vocab[new] for _, _, new in tok.merges)
    pieces, exact = cuts.rough_pieces(text, word_ends(text))
    assert "".join(pieces) == text
    assert len(exact) == len(pieces) - 1
    # Joined at the cuts not flagged exact, the pieces are stretches whose encodings join.
    stretches = [pieces[0]]
    for piece, flag in zip(pieces[1:], exact, strict=True):
        if flag:
            stretches.append(piece)
        else:
            stretches[-1] += piece
    by_stretches = [i for part in stretches for i in literal_rule(list(part.encode()), tok.ranks)]
    assert by_stretches == literal_rule(list(text.encode()), tok.ranks)


@settings(max_examples=200, deadline=None)
@given(script=SCRIPTS, picks=PICKS, data=st.data())
def test_property_both_cutting_routes_give_the_rule(script, picks, data):
    """`encode_multibyte` either searches partial tokens or stitches rough pieces; both are
    forced here whichever the cost model picks."""
    tok = script_tokenizer(script, picks, "naive")
    text = data.draw(script_texts(script))
    want = literal_rule(list(text.encode()), tok.ranks)
    pieces, exact = tok._cuts.rough_pieces(text, word_ends(text))
    assert tok._stitcher.stitch(text, pieces, exact) == want
    tok.clear_caches()
    assert encode_multibyte(tok, text) == want


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.sets(st.one_of(WORLD_TEXTS, SCRIPT_TEXTS), max_size=12),
    script=SCRIPTS,
    picks=PICKS,
)
def test_property_short_pieces_of_any_script_are_encoded_as_the_rule(pieces, script, picks):
    tok = script_tokenizer(script, picks, "naive")
    pieces.discard("")

    def other(piece: str) -> list[int]:
        assert len(piece.encode()) >= 32, "a short piece must be encoded whole, in the batch"
        return literal_rule(list(piece.encode()), tok.ranks)

    table = encode_pieces(pieces, tok.ranks, tok._whole_tokens, other)
    assert table == {p: literal_rule(list(p.encode()), tok.ranks) for p in pieces}


def test_many_partial_tokens_send_text_to_the_stitcher():
    # は is E3 81 AF, の E3 81 AE; tokens はは and はの, each followed by E3 81 or E3, hold two
    # whole characters and part of the next: found by str.find, a step per は for each of four.
    merges = [(0xE3, 0x81, 256), (256, 0xAF, 257), (256, 0xAE, 258), (257, 257, 259)]
    merges += [(259, 256, 260), (259, 0xE3, 261), (257, 258, 262), (262, 256, 263)]
    merges += [(262, 0xE3, 264)]
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    text = "ははのはは、のは" * 4
    assert not cheap_search(tok, text)
    assert tok.encode(text, engine="pure") == literal_rule(list(text.encode()), tok.ranks)
    assert tok._stitcher.valid  # the stitcher checked junctions: this text went through it


def test_a_character_and_the_next_ones_lead_bytes_cost_no_search():
    # は + E3 81 and は + E3: tests on two neighbouring characters, run in C for every pair.
    merges = [(0xE3, 0x81, 256), (256, 0xAF, 257), (257, 256, 258), (257, 0xE3, 259)]
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    text = "ははのはは、のは" * 4
    assert tok._cuts.search_work(text) == 0
    assert cheap_search(tok, text)
    assert tok.encode(text, engine="pure") == literal_rule(list(text.encode()), tok.ranks)
    assert not tok._stitcher.valid  # cut exactly: no junction to check


def test_few_partial_tokens_keep_the_exact_cuts():
    merges = [(0xE3, 0x81, 256), (256, 0xAF, 257), (257, 256, 258)]
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    text = "はのはの、のは" * 4
    assert cheap_search(tok, text)
    assert tok.encode(text, engine="pure") == literal_rule(list(text.encode()), tok.ranks)
    assert not tok._stitcher.valid  # cut exactly: no junction to check


def inside_partial_tokens_by_bytes(tokens: list[bytes], text: str) -> set[int]:
    """The character boundaries strictly inside an occurrence, in the text's bytes, of a token
    that does not decode alone (it holds part of a character): a search over the bytes."""
    data = text.encode()
    boundary_at = dict(
        zip(itertools.accumulate(len(c.encode()) for c in text), range(1, len(text)), strict=False)
    )
    inside: set[int] = set()
    for token in tokens:
        try:
            token.decode()
            continue  # whole characters: aligned wherever it occurs
        except UnicodeDecodeError:
            pass
        at = data.find(token)
        while at >= 0:
            inside.update(
                boundary_at[o] for o in range(at + 1, at + len(token)) if o in boundary_at
            )
            at = data.find(token, at + 1)
    return inside


@settings(max_examples=300, deadline=None)
@given(script=SCRIPTS, picks=PICKS, data=st.data())
def test_property_partial_tokens_are_found_as_a_byte_search_finds_them(script, picks, data):
    """The pair tests and the search by whole characters together find exactly the boundaries
    inside a partial token's occurrences."""
    tok = script_tokenizer(script, picks, "naive")
    text = data.draw(st.one_of(script_texts(script), SCRIPT_TEXTS, WORLD_TEXTS))
    tokens = [tok.vocab[new] for _, _, new in tok.merges]
    found = CutTable(tokens)._inside_partial_tokens(text)
    assert set(found) == inside_partial_tokens_by_bytes(tokens, text)


@settings(max_examples=200, deadline=None)
@given(script=SCRIPTS, picks=PICKS, data=st.data())
def test_property_chunked_text_cut_whole_or_chunk_by_chunk_gives_the_rule(script, picks, data):
    """`ChunkedMode.encode_ordinary` takes one of two ways (`cut_whole`); both are forced
    here, whichever the rule picks."""
    tok = script_tokenizer(script, picks, "chunked")
    text = data.draw(script_texts(script))
    want = oracle_encode(tok, text)
    chunks = tok.mode_object.split(text, tok.pattern)
    ends = list(itertools.accumulate(map(len, chunks)))
    assert encode_in_pieces(tok, text, ends) == want
    tok.clear_caches()
    assert encode_chunks_joined(tok, chunks) == want
    tok.clear_caches()
    assert tok.encode(text, engine="pure") == want


def test_chunked_text_is_cut_whole_when_its_new_chunks_hold_most_of_its_bytes():
    tok = bpe.train(CHINESE * 3 + CYRILLIC * 3, vocab_size=400, mode="chunked")
    for text, whole in [(CHINESE, True), (CYRILLIC, False), ("abc " * 50, False)]:
        tok.clear_caches()
        chunks = tok.mode_object.split(text, tok.pattern)
        assert cut_whole(tok, text, chunks) == whole, text[:20]
        assert tok.encode(text, engine="pure") == oracle_encode(tok, text)
    # Chunks already in the cache are not new: the same text again goes chunk by chunk.
    chunks = tok.mode_object.split(CHINESE, tok.pattern)
    tok.clear_caches()
    encode_chunks_joined(tok, chunks)
    assert not cut_whole(tok, CHINESE, chunks)


CHINESE = "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。"
CYRILLIC = "все люди рождаются свободными и равными в своем достоинстве и правах " * 8


# ----- trained on many scripts: pure == default == literal rule == HF == tiktoken ----------
@settings(max_examples=40, deadline=None)
@given(
    training=st.lists(st.one_of(WORLD_TEXTS, SCRIPT_TEXTS), min_size=1, max_size=4).map("\n".join),
    texts=st.lists(st.one_of(WORLD_TEXTS, SCRIPT_TEXTS), min_size=1, max_size=3),
    mode=st.sampled_from(["naive", "chunked"]),
    extra=st.integers(0, 300),
)
def test_property_trained_on_many_scripts_every_encoder_agrees(training, texts, mode, extra):
    tokenizers = pytest.importorskip("tokenizers")
    from bpe.export_hf import to_hf_json

    tok = bpe.train(training, vocab_size=256 + extra + 1, mode=mode, pattern="gpt4")
    hf = tokenizers.Tokenizer.from_str(to_hf_json(tok))
    fast = tok.fast_path
    for text in texts:
        want = oracle_encode(tok, text)
        assert tok.encode(text, engine="pure") == want
        assert tok.encode(text) == want
        assert hf.encode(text, add_special_tokens=False).ids == want
        if fast is not None:
            assert fast.encoding.encode_ordinary(text) == want
