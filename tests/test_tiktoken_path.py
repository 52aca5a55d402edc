"""The tiktoken fast path gives the pure path's ids, which are the encode rule's
(docs/algorithms.md, "Encoding"): pure == fast == oracle.

Hypothesis compares the three on trained tokenisers (naive, GPT-4 and GPT-2 chunked), with
special tokens allowed and not; on random merge lists the condition `self_encoding_merges` is
checked against its definition and, where it holds, tiktoken against our rule; a slow test runs
every code point through both split engines.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe import batch
from bpe.encoder import encode_ids
from bpe.patterns import split_chunks
from bpe.tiktoken_path import needs_pure_path, self_encoding_merges, unknown_to_python
from tests.strategies import TEXTS
from tests.test_encoding import MULTIBYTE, MULTIBYTE_TEXTS, oracle_encode, random_merges

tiktoken = pytest.importorskip("tiktoken")

PATTERNS = {"naive": None, "gpt4": bpe.GPT4_PATTERN, "gpt2": bpe.GPT2_PATTERN}
LONG_TEXTS = st.lists(TEXTS, min_size=1, max_size=6).map("\n".join)


def trained(training: str, kind: str, extra: int) -> bpe.Tokenizer:
    mode = "naive" if kind == "naive" else "chunked"
    return bpe.train(
        training,
        vocab_size=257 + extra,
        mode=mode,
        pattern=kind if kind != "naive" else "gpt4",
        special_tokens=["<|x|>"],
    )


@settings(max_examples=120, deadline=None)
@given(
    training=TEXTS,
    text=LONG_TEXTS,
    kind=st.sampled_from(list(PATTERNS)),
    extra=st.integers(0, 80),
    allow=st.booleans(),
)
def test_property_fast_path_equals_pure_and_literal_rule(training, text, kind, extra, allow):
    tok = trained(training + text[::3], kind, extra)
    fast = tok.fast_path
    assert fast is not None  # trained merge lists always qualify
    allowed = "all" if allow else ()
    expected = oracle_encode(tok, text, allowed)
    assert tok.encode(text, allowed_special=allowed, engine="pure") == expected
    if not needs_pure_path(text) and not allow:
        assert fast.encode(text) == expected
    # Long enough for encode's own switch to take the fast path.
    long_text = (text + " ") * (2_000 // (len(text) + 1) + 1)
    assert tok.encode(long_text, allowed_special=allowed) == oracle_encode(tok, long_text, allowed)


@settings(max_examples=300, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=60))
def test_property_self_encoding_check_matches_its_definition(picks):
    merges = random_merges(picks, b"abc")
    tok = bpe.Tokenizer(mode="naive", merges=merges)
    by_definition = all(encode_ids(list(tok.vocab[t]), tok.ranks) == [t] for _, _, t in merges)
    assert self_encoding_merges(merges) == by_definition


@settings(max_examples=300, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=60),
    alphabet=st.sampled_from([b"abc", b"ab", MULTIBYTE.encode()]),
    texts=st.lists(st.one_of(MULTIBYTE_TEXTS, st.text("abc", max_size=60)), max_size=4),
    kind=st.sampled_from(list(PATTERNS)),
)
def test_property_random_merges_take_the_fast_path_only_when_it_agrees(
    picks, alphabet, texts, kind
):
    # The theorem behind the fast path, on merge lists no trainer would write.
    mode = "naive" if kind == "naive" else "chunked"
    tok = bpe.Tokenizer(mode=mode, merges=random_merges(picks, alphabet), pattern=PATTERNS[kind])
    fast = tok.fast_path
    assert (fast is not None) == self_encoding_merges(tok.merges)
    if fast is None:
        return
    for text in texts:
        assert fast.encode(text) == oracle_encode(tok, text)


def test_tiktoken_rule_conflicts_stay_on_the_pure_path():
    # (b, c), (a, b), (ab, c): we give a|bc for "abc", tiktoken would give abc.
    tok = bpe.Tokenizer(mode="naive", merges=[(98, 99, 256), (97, 98, 257), (257, 99, 258)])
    assert tok.fast_path is None
    assert tok.encode("abc" * 1000) == [97, 256] * 1000


def test_custom_patterns_words_mode_and_new_characters_stay_pure():
    text = "some text to train on, some more text " * 20
    custom = bpe.train(text, vocab_size=300, mode="chunked", pattern=r"\w+|\s+|[^\w\s]+")
    assert custom.fast_path is None
    assert bpe.train(text, vocab_size=300, mode="words").fast_path is None
    tok = bpe.train(text, vocab_size=300, mode="chunked")
    assert tok.fast_path is not None
    # U+1CC00 is newer than Python 3.11's Unicode tables (and tiktoken's may differ).
    assert needs_pure_path("abc \U0001cc00") and not needs_pure_path("abc 中文 é 😀")
    assert tok.fast_path.encode("a\U0001cc00b") is None
    assert needs_pure_path("a\ud800")  # a lone surrogate: tiktoken would replace it


def test_every_character_unknown_to_python_sends_text_to_the_pure_path():
    # needs_pure_path looks up only the characters its class finds: it must find each of them.
    missed = [c for c in unknown_to_python() if not needs_pure_path("中文 " + c + " é")]
    assert missed == []
    # Characters above the BMP are found too, but known ones keep the fast path.
    assert not needs_pure_path("中文 é 😀 \U00020000")


def test_text_dense_above_the_bmp_is_checked_whole_and_still_finds_every_unknown():
    adlam = "\U0001e900\U0001e922\U0001e901 \U0001e910\U0001e92d, "  # letters above the BMP
    dense = adlam * 40
    assert not needs_pure_path(dense)
    # not printable, yet nothing unknown: the lookups decide (a zero-width joiner, a tag, a bell)
    assert not needs_pure_path(dense + "\u200d\U000e0061\x07" + dense)
    # every unknown character, BMP or not, after the first one above the BMP, in dense text
    missed = [c for c in unknown_to_python() if not needs_pure_path(dense + c + adlam)]
    assert missed == []
    assert needs_pure_path("\U0001e900" + "\U0001cc00")  # dense from its first character


def test_encode_batch_matches_encode_on_both_engines(monkeypatch):
    text = "The quick brown fox, 東京 😀, jumps over the lazy dog. " * 50
    tok = bpe.train(text, vocab_size=400, mode="chunked", special_tokens=["<|x|>"])
    docs = [text[i : i + 300] + "<|x|>" for i in range(0, 2_000, 97)] + ["", "\U0001cc00 x"]
    expected = [tok.encode(d, engine="pure") for d in docs]
    assert tok.encode_batch(docs) == expected
    assert tok.encode_batch(docs, engine="pure") == expected
    with_specials = [tok.encode(d, allowed_special="all") for d in docs]
    # Worker processes, for once on a small batch.
    monkeypatch.setattr(batch, "PROCESS_MIN_CHARS", 0)
    assert tok.encode_batch(docs, allowed_special="all", workers=2, engine="pure") == with_specials


def test_without_tiktoken_the_pure_path_is_used():
    code = (
        "import sys; sys.modules['tiktoken'] = None\n"  # makes `import tiktoken` fail
        "import bpe\n"
        "tok = bpe.train('hello world ' * 50, vocab_size=280, mode='chunked')\n"
        "assert tok.fast_path is None\n"
        "ids = tok.encode('hello world ' * 500)\n"
        "assert tok.decode(ids) == 'hello world ' * 500\n"
        "docs = ['hello', 'world']\n"
        "assert tok.encode_batch(docs) == [tok.encode(d) for d in docs]\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr


def split_differently(pattern: str, codes: list[int]) -> list[int]:
    """The code points whose probes tiktoken's engine splits differently from ours.

    Each probe puts the character after and before a letter, a digit, a space, punctuation, a
    newline and an apostrophe (the patterns' contractions are case-insensitive); a group of
    probes is one text. The Encoding built here has every chunk we find in it as a token, so
    tiktoken returns exactly those tokens if and only if it cuts where we do: a piece that is a
    token is returned whole, and in a piece we would cut, a multi-byte chunk is unreachable
    (no token leads up to it from its bytes); for all-ASCII neighbours, where that argument
    fails, their concatenation is a token too. A group that differs is halved until the code
    points at fault are found.
    """
    if not codes:
        return []
    text = "".join(f"a{c}b1{c}2 {c} !{c}? \n{c}\n'{c} '{c}{c}\r{c}" for c in map(chr, codes))
    found = split_chunks(text, pattern)
    tokens = {bytes([b]): b for b in range(256)}
    for piece in found:
        tokens.setdefault(piece.encode(), len(tokens))
    for left, right in zip(found, found[1:], strict=False):
        if left.isascii() and right.isascii():
            tokens.setdefault((left + right).encode(), len(tokens))
    enc = tiktoken.Encoding("probe", pat_str=pattern, mergeable_ranks=tokens, special_tokens={})
    if enc.encode_ordinary(text) == [tokens[piece.encode()] for piece in found]:
        return []
    if len(codes) == 1:
        return codes
    half = len(codes) // 2
    return split_differently(pattern, codes[:half]) + split_differently(pattern, codes[half:])


def checkable_code_points() -> list[int]:
    """Every code point the fast path would hand to tiktoken."""
    pure = set(map(ord, unknown_to_python()))
    return [c for c in range(0x110000) if c not in pure]


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [bpe.GPT4_PATTERN, bpe.GPT2_PATTERN], ids=["gpt4", "gpt2"])
def test_every_code_point_splits_alike_in_both_regex_engines(pattern):
    codes = checkable_code_points()
    assert len(codes) > 1_000_000
    bad = []
    for start in range(0, len(codes), 50_000):
        bad += split_differently(pattern, codes[start : start + 50_000])
    assert bad == []


def test_the_probe_sees_a_split_difference():
    # The probe is only worth something if it notices characters split differently: letters
    # to `regex` that Python's tables call unassigned (assigned after Unicode 16 in part).
    newer_letters = sorted(
        ord(c)
        for c in unknown_to_python()
        if needs_pure_path(c) and regex.match(r"\p{L}", c) and not 0xD800 <= ord(c) < 0xE000
    )
    assert len(newer_letters) > 1000
    # a spread of 64 of them is enough to show the probe works (all 26k took minutes)
    sample = newer_letters[:: len(newer_letters) // 64]
    assert split_differently(bpe.GPT4_PATTERN, sample)
