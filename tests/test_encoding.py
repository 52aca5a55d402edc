"""Encoding is exact: every fast path gives the ids of the literal rescanning rule.

The oracle below is that rule's loop (docs/algorithms.md, "Encoding"), written out: find the
present pair with the lowest id, merge it everywhere (left to right), repeat. `Tokenizer.encode`
cuts text into cached pieces (`bpe.cuts`), encodes pieces character by character
(`bpe.encoder.CharacterEncoder`) and uses a heap for long sequences; each must give the oracle's
ids, in every mode, with special tokens allowed and not, for trained merge lists, for random
merge lists over multi-byte characters (which learn tokens holding parts of characters across a
character boundary), and on the corpora.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe import cuts as cuts_module
from bpe.cuts import CutTable
from bpe.encoder import CharacterEncoder, encode_all, encode_ids, encode_pieces, fill_cache
from bpe.model import _split_on_specials
from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN, _ascii_twin, _split_by_stand_ins, split_chunks
from bpe.reference import merge_pair
from bpe.stitch import Stitcher, whole_tokens
from tests.strategies import TEXTS

REPO = Path(__file__).resolve().parent.parent
CORPORA_DIR = Path(os.environ.get("BPE_CORPORA_DIR", REPO / "corpora-data"))
CORPORA = ["english_small", "english_large", "chinese_modern", "code"]
# Characters whose bytes share leads and tails, so random merges make tokens across them.
MULTIBYTE = "基础中文的是丹乐é😀a ,\n"


def literal_rule(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    """The encode rule, literally: apply the present learned pair with the lowest id, everywhere."""
    while len(ids) >= 2:
        pairs = set(zip(ids, ids[1:], strict=False))
        best = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
        if best not in ranks:
            break
        ids = merge_pair(ids, best, ranks[best])
    return ids


def oracle_encode(tok: bpe.Tokenizer, text: str, allowed=()) -> list[int]:
    """The ids the literal rule gives, piece by piece as the modes define pieces."""
    allowed_map = (
        dict(tok.special_tokens)
        if allowed == "all"
        else {s: tok.special_tokens[s] for s in allowed}
    )
    parts = _split_on_specials(text, allowed_map) if allowed_map else [(text, None)]
    out: list[int] = []
    for part, special in parts:
        if special is not None:
            out.append(special)
        elif tok.mode == "naive":
            out += literal_rule(list(part.encode()), tok.ranks)
        else:
            for chunk in split_chunks(part, tok.pattern or ""):
                out += literal_rule(list(chunk.encode()), tok.ranks)
    return out


def random_merges(picks: list[tuple[int, int]], alphabet: bytes) -> list[tuple[int, int, int]]:
    """A valid merge list: each pick joins two tokens already known (bytes first)."""
    known = sorted(set(alphabet))
    merges: list[tuple[int, int, int]] = []
    seen: set[tuple[int, int]] = set()
    for left, right in picks:
        pair = (known[left % len(known)], known[right % len(known)])
        if pair in seen:
            continue
        seen.add(pair)
        new = 256 + len(merges)
        merges.append((*pair, new))
        known.append(new)
    return merges


MULTIBYTE_TEXTS = st.lists(st.sampled_from(list(MULTIBYTE)), max_size=60).map("".join)


# ----- trained merge lists ---------------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(
    training=TEXTS,
    text=TEXTS,
    mode=st.sampled_from(["naive", "chunked"]),
    extra=st.integers(0, 60),
    allow=st.booleans(),
)
def test_property_encode_equals_literal_rule(training, text, mode, extra, allow):
    tok = bpe.train(
        training + text[::2],
        vocab_size=256 + extra + 1,
        mode=mode,
        trainer="efficient",
        special_tokens=["<|x|>"],
    )
    allowed = "all" if allow else ()
    assert tok.encode(text, allowed_special=allowed) == oracle_encode(tok, text, allowed)
    # A second time, from the warm cache.
    assert tok.encode(text, allowed_special=allowed) == oracle_encode(tok, text, allowed)


# ----- random merge lists over multi-byte characters ------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=80),
    texts=st.lists(MULTIBYTE_TEXTS, min_size=1, max_size=4),
    mode=st.sampled_from(["naive", "chunked"]),
)
def test_property_random_merges_over_multibyte_text(picks, texts, mode):
    merges = random_merges(picks, MULTIBYTE.encode())
    tok = bpe.Tokenizer(mode=mode, merges=merges, pattern=bpe.GPT4_PATTERN)
    for text in texts:  # several texts share one cache, as a long-lived tokeniser's do
        assert tok.encode(text) == oracle_encode(tok, text)


@settings(max_examples=200, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=60),
    text=MULTIBYTE_TEXTS,
)
def test_property_cut_pieces_encode_like_the_whole(picks, text):
    merges = random_merges(picks, MULTIBYTE.encode())
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    cuts = CutTable(tok.vocab[new] for _, _, new in merges)
    pieces, partial = cuts.pieces(text)
    assert "".join(pieces) == text
    characters = CharacterEncoder(tok.ranks)
    whole = literal_rule(list(text.encode()), tok.ranks)
    by_pieces: list[int] = []
    for piece in pieces:
        by_pieces += literal_rule(list(piece.encode()), tok.ranks)
        if piece not in partial:
            assert characters.encode(piece) == literal_rule(list(piece.encode()), tok.ranks)
    assert by_pieces == whole


def test_a_token_holding_part_of_a_character_keeps_its_text_whole():
    # 基 (e5 9f ba) + the first two bytes of 础 (e7 a1 80): byte-level training learns such
    # tokens. Then "基础" must not be cut between its characters, nor encoded per character.
    ji, chu = "基".encode(), "础".encode()
    merges = [
        (ji[0], ji[1], 256),
        (256, ji[2], 257),  # 基
        (chu[0], chu[1], 258),  # first two bytes of 础
        (257, 258, 259),  # 基 + e7 a1
        (259, chu[2], 260),  # 基础
    ]
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    cuts = CutTable(tok.vocab[new] for _, _, new in merges)
    assert cuts.pieces("基础基") == (["基础", "基"], {"基础"})
    assert cuts.pieces("础基") == (["础", "基"], set())
    assert cuts.pieces("中基础中基础中") == (["中", "基础", "中", "基础", "中"], {"基础"})
    assert tok.encode("基础基础") == [260, 260]
    assert tok.encode("丹基础") == oracle_encode(tok, "丹基础")


def test_text_holding_the_cut_marks_is_cut_alike():
    # pieces() marks cuts in a copy of the text with a pair of noncharacters the text does not
    # hold; a text holding one pair uses another, one holding them all is sliced instead.
    ji, chu = "基".encode(), "础".encode()
    merges = [(ji[0], ji[1], 256), (256, ji[2], 257), (chu[0], chu[1], 258), (257, 258, 259)]
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    every = "".join(chr(c) + chr(c + 1) for c in cuts_module._MARKS)
    for marks in ["", "\ufdd0\ufdd1", "\ufdd1", every]:
        text = "基础基中" + marks + "础基础"
        assert tok._cuts.pieces(text) == (["基础", "基", "中", *marks, "础", "基础"], {"基础"})
        assert tok.encode(text) == oracle_encode(tok, text)


def test_two_partial_characters_in_one_token_are_found_by_their_bytes():
    # The tail byte of 的 (e7 9a 84) with the head byte of 中 (e4 b8 ad): a token made of two
    # part-characters, which no whole character marks.
    de, zhong = "的".encode(), "中".encode()
    merges = [(de[2], zhong[0], 256), (de[0], de[1], 257), (257, 256, 258)]
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    text = "的中的文的中"
    assert tok.encode(text) == oracle_encode(tok, text)
    pieces, partial = tok._cuts.pieces(text)
    assert "".join(pieces) == text and partial


def test_partial_tokens_of_a_tail_and_a_character_or_a_tail_and_a_head_are_found():
    # The last byte of 中 (e4 b8 ad) with the whole 的 (e7 9a 84): found where 的 follows a
    # character ending in ad. The last byte of 的 with the first byte of 中: found among the
    # characters that byte starts. Cut at 中|的 or 的|中, neither would form.
    de, zhong = "的".encode(), "中".encode()
    tail_and_character = [(de[0], de[1], 256), (256, de[2], 257), (zhong[2], 257, 258)]
    tail_and_head = [(de[2], zhong[0], 256)]
    # ... and learned before 的 itself: encoded alone, 的 would be one token, in "的中" it is not.
    before_the_character = [(de[2], zhong[0], 256), (de[0], de[1], 257), (257, de[2], 258)]
    for merges in (tail_and_character, tail_and_head, before_the_character):
        tok = bpe.Tokenizer(mode="naive", merges=merges)
        for text in ["中的中的", "的中文的中", "文的中"]:
            assert tok.encode(text) == oracle_encode(tok, text)


def test_words_mode_is_unchanged_by_the_fast_paths():
    tok = bpe.train("low lower lowest newer wider " * 20, vocab_size=60, mode="words")
    ranks = tok.ranks
    for word in ["lowest", "newer", "wid"]:
        ids = [tok._char_to_id[c] for c in word] + [tok.base_size - 1]
        assert tok.encode(word) == literal_rule(ids, ranks)


# ----- the corpora --------------------------------------------------------------------------
def corpus_window(name: str, start_fraction: float, size: int) -> str:
    path = CORPORA_DIR / f"{name}.txt"
    if not path.exists():
        pytest.skip(f"{path} is missing: build the corpora with ../shared/corpora/make_corpora.sh")
    with path.open("rb") as f:
        f.seek(int(path.stat().st_size * start_fraction))
        data = f.read(size)
    return data.decode("utf-8", errors="ignore")


@pytest.mark.corpora
@pytest.mark.parametrize("mode", ["naive", "chunked"])
@pytest.mark.parametrize("name", CORPORA)
def test_corpus_samples_encode_like_the_plain_encoder(name, mode):
    training = corpus_window(name, 0.1, 150_000)
    tok = bpe.train(training, vocab_size=3000, mode=mode, trainer="efficient")
    for fraction in (0.3, 0.6, 0.9):
        sample = corpus_window(name, fraction, 40_000)
        if mode == "naive":
            expected = encode_ids(list(sample.encode()), tok.ranks)
        else:
            expected = [
                i
                for c in split_chunks(sample, tok.pattern)
                for i in encode_ids(list(c.encode()), tok.ranks)
            ]
        assert tok.encode(sample) == expected
        # Short documents, as the playground and the API send them, through the warm cache.
        for line in sample.splitlines()[:200]:
            assert tok.encode(line) == oracle_encode(tok, line)


# ----- naive text by stitched pieces (bpe.stitch) --------------------------------------------
# Few letters and many spaces: random merges then learn tokens across words ("a b") and the
# junctions between pieces fail often, several in a row, and repairs reach further left.
STITCH_ALPHABET = "ab ,\né"
STITCH_TEXTS = st.lists(st.sampled_from(list(STITCH_ALPHABET)), max_size=80).map("".join)


def valid_alone(merges: list[tuple[int, int, int]]) -> list[int]:
    """The ids whose bytes encode, alone, to themselves: those an encoding can hold."""
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    return [
        i for i in range(256 + len(merges)) if literal_rule(list(tok.vocab[i]), tok.ranks) == [i]
    ]


@settings(max_examples=300, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=80),
    texts=st.lists(STITCH_TEXTS, min_size=1, max_size=4),
)
def test_property_stitched_pieces_encode_like_the_whole(picks, texts):
    merges = random_merges(picks, STITCH_ALPHABET.encode())
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    stitcher = Stitcher(tok.ranks, tok.vocab, {})
    for text in texts:  # one stitcher for several texts: its memos carry over
        assert stitcher.encode(text) == literal_rule(list(text.encode()), tok.ranks)
        assert tok.encode(text, engine="pure") == literal_rule(list(text.encode()), tok.ranks)


@settings(max_examples=150, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=40))
def test_property_compatible_pairs_are_those_that_encode_as_themselves(picks):
    merges = random_merges(picks, STITCH_ALPHABET.encode())
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    stitcher = Stitcher(tok.ranks, tok.vocab, {})
    tokens = [i for i in valid_alone(merges) if i >= 256 or i in STITCH_ALPHABET.encode()]
    for a in tokens:
        for b in tokens:
            joined = literal_rule([*tok.vocab[a], *tok.vocab[b]], tok.ranks)
            assert stitcher.compatible(a, b) == (joined == [a, b]), (a, b)


def test_stitching_gives_up_past_its_repair_budget_and_stays_exact():
    # Found by a random search: with no budget beyond the fixed slack, this text's repairs
    # re-encode more than that, so the stitcher encodes the whole text at once instead.
    merges = [(97, 98, 256), (256, 98, 257), (257, 97, 258), (258, 97, 259), (32, 98, 260)]
    merges += [(260, 98, 261), (258, 258, 262), (256, 257, 263), (32, 256, 264), (98, 256, 265)]
    merges += [(261, 32, 266), (98, 266, 267), (262, 266, 268), (259, 32, 269), (262, 256, 270)]
    merges += [(264, 269, 271), (256, 270, 272), (258, 259, 273), (98, 264, 274), (269, 272, 275)]
    merges += [(274, 257, 276), (259, 258, 277), (32, 263, 278), (268, 256, 279), (258, 275, 280)]
    text = (
        "aaba a bab b b bb  a b aa a ab bbaa bb a b  aaa  abaa a abb aa aaa bb aa abaabab bb   b"
        "  b  aa b bbb b  bbabbab ab    ba  ab a b b b a  ab  a b bbaaba bb bbaab  aabaaa "
        "abbaaaab abb   ab abbbaa bbbb aa"
    )
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    stitcher = Stitcher(tok.ranks, tok.vocab, {})
    stitcher.repair_budget = 0
    assert stitcher.encode(text) == literal_rule(list(text.encode()), tok.ranks)


def test_a_remembered_repair_is_reused_where_the_repair_then_cascades():
    # Found by a random search: a junction's remembered repair is reused and then followed by
    # a further repair leftwards, which must not be remembered as that junction's repair (the
    # next time the junction fails, the tokens before it would be wrong).
    merges = [(32, 97, 256), (44, 32, 257), (257, 44, 258), (195, 256, 259), (44, 97, 260)]
    merges += [(98, 98, 261), (259, 258, 262), (98, 256, 263)]
    text = "b ab\n éb ab\n b ab\n "
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    stitcher = Stitcher(tok.ranks, tok.vocab, {})
    assert stitcher.encode(text) == literal_rule(list(text.encode()), tok.ranks)
    assert stitcher.repaired  # the junctions' repairs were remembered


# ----- the split of all-ASCII text by the standard `re` module (bpe.patterns) -----------------
def test_the_ascii_twins_assume_the_classes_regex_gives_ascii_characters():
    ascii_chars = [chr(i) for i in range(128)]
    assert [c for c in ascii_chars if regex.match(r"\p{L}", c)] == list(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    )
    assert [c for c in ascii_chars if regex.match(r"\p{N}", c)] == list("0123456789")
    assert [c for c in ascii_chars if regex.match(r"\s", c)] == list("\t\n\x0b\x0c\r ")


# Any ASCII, and the pieces the patterns treat specially: contractions, runs of spaces, digits.
ASCII_TEXTS = st.lists(
    st.one_of(
        st.characters(max_codepoint=127),
        st.sampled_from(["'s", "'LL", "'Ve", "  ", "\r\n", "1234", "ab", " .\n"]),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=ASCII_TEXTS, pattern=st.sampled_from([GPT4_PATTERN, GPT2_PATTERN]))
def test_property_ascii_text_splits_as_regex_splits_it(text, pattern):
    assert text.isascii()
    expected = [m for m in regex.findall(pattern, text) if m]
    assert split_chunks(text, pattern) == expected


# ----- looking many pieces up at once (bpe.encoder.fill_cache) ---------------------------------
def test_filling_a_cache_past_its_limit_keeps_every_piece_of_this_text():
    cache = {"old": [1], "kept": [2]}
    pieces = ["kept", "a", "b", "c", "a", "kept"]
    table = fill_cache(cache, pieces, lambda piece: [ord(piece[0])], limit=3)
    assert [table[p] for p in pieces] == [[2], [97], [98], [99], [97], [2]]
    assert len(cache) <= 3  # started over: the three new pieces only
    assert set(cache) == {"a", "b", "c"}
    # Under the limit the cache keeps growing and is itself the table.
    assert fill_cache(cache, ["a", "d"], lambda piece: [0], limit=10) is cache
    assert cache["d"] == [0] and cache["a"] == [97]


@settings(max_examples=200, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=60),
    # Up to 40 characters: short ASCII pieces take the rescanning loop, longer ones (and any
    # with a multi-byte character) the caller's encoder.
    pieces=st.sets(
        st.one_of(
            st.text(alphabet="a ,\n", max_size=40),
            st.lists(st.sampled_from(list(MULTIBYTE)), max_size=40).map("".join),
        )
    ),
)
def test_property_new_pieces_are_encoded_as_the_literal_rule_encodes_them(picks, pieces):
    merges = random_merges(picks, MULTIBYTE.encode())
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    pieces.discard("")
    pieces |= {tok.vocab[new].decode() for _, _, new in merges if is_text(tok.vocab[new])}

    def other(piece: str) -> list[int]:
        return encode_ids(list(piece.encode()), tok.ranks)

    table = encode_pieces(set(pieces), tok.ranks, whole_tokens(tok.ranks, tok.vocab), other)
    assert table == {piece: literal_rule(list(piece.encode()), tok.ranks) for piece in pieces}


# Letters (with and without case), digits, spaces, marks, punctuation, emoji; U+017F (long s)
# matches the contractions' "s" without case, so it has no ASCII stand-in.
NON_ASCII = "éÉßſKİ²٣\xa0\u2028\u3000\u0301—“😀中"


@settings(max_examples=500, deadline=None)
@given(
    parts=st.lists(st.one_of(ASCII_TEXTS, st.sampled_from(list(NON_ASCII))), max_size=12),
    pattern=st.sampled_from([GPT4_PATTERN, GPT2_PATTERN]),
)
def test_property_mostly_ascii_text_splits_as_regex_splits_it(parts, pattern):
    text = "".join(parts)
    expected = [m for m in regex.findall(pattern, text) if m]
    chunks = _split_by_stand_ins(text, _ascii_twin(pattern))
    assert chunks == (None if "ſ" in text else expected)
    padded = text + "x = 1\n" * len(text)  # mostly ASCII: split_chunks takes this path
    assert split_chunks(padded, pattern) == [m for m in regex.findall(pattern, padded) if m]


# ----- pieces that are one token (bpe.stitch.whole_tokens) -------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=60),
    alphabet=st.sampled_from([STITCH_ALPHABET, MULTIBYTE]),
)
def test_property_whole_tokens_are_the_tokens_that_encode_as_themselves(picks, alphabet):
    merges = random_merges(picks, alphabet.encode())
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    expected = {}
    for _, _, new in merges:
        data = tok.vocab[new]
        if literal_rule(list(data), tok.ranks) == [new] and is_text(data):
            expected[data.decode()] = new
    assert whole_tokens(tok.ranks, tok.vocab) == expected


def is_text(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


class Forgetful(dict):
    """A shared cache that another thread starts over right after this one filled it."""

    def update(self, *args, **kwargs):
        self.clear()


def test_pieces_are_encoded_even_when_the_shared_cache_is_started_over_meanwhile():
    pieces = ["a", "b", "a"]
    assert encode_all(Forgetful(), pieces, lambda piece: [ord(piece)], 10) == [[97], [98], [97]]
