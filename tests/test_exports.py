"""HF and tiktoken exports: the exported tokenisers encode like ours wherever that can hold.

Equality is claimed only where it truly holds:
- HF: for tokenisers where no two ids share their bytes (`duplicate_tokens` is empty), which is
  every tokeniser our trainers make; a hand-made duplicate has its own test of what happens.
- tiktoken: tiktoken always follows its rank rule (checked against a small Python model of it,
  `rank_rule_encode`), and gives our ids on every chunk where that rule agrees with our merge
  order, which for trained tokenisers is every chunk; a hand-made merge list shows where not.
Texts use only characters Python's Unicode tables know (`tests.strategies.KNOWN_CHARACTERS`):
the `regex` module classifies characters by a newer Unicode than HF's and tiktoken's engines.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import bpe
from bpe.byte_level import bytes_to_unicode
from bpe.export_common import (
    ExportError,
    canonical_ids,
    duplicate_tokens,
    export_warnings,
    special_token_clashes,
)
from bpe.export_hf import to_hf_json, write_hf
from bpe.export_tiktoken import (
    NAIVE_PATTERN,
    load_tiktoken,
    mergeable_ranks,
    rank_file_text,
    rank_rule_conflicts,
    rank_rule_encode,
    to_tiktoken_encoding,
    write_tiktoken,
)
from bpe.model import Tokenizer
from tests.strategies import HARD_PIECES, KNOWN_CHARACTERS, TEXTS

SPECIALS = ["<|endoftext|>", "<pad>", "<|end of turn|>"]

# Training text with every script the property tests throw at the exports.
TRAINING_TEXT = (
    "The quick brown fox jumps over the lazy dog. Il était une fois, déjà, à Noël. "
    "Naïve café résumé: 3.14159, 42 and 1000000! "
    "中文的文本和中文的字符。東京は日本の首都です。 "
    "Emoji 😀😀 and 🎉 party 👍🏽; tabs\tand\nnewlines\r\n  indented  code(x) == y[0] "
    "it's we're they'll I'd you've "
) * 6

# The third pattern is custom and leaves gaps (no alternative matches punctuation): those
# characters are dropped by our split and must be by the export too.
PATTERNS = ["gpt4", "gpt2", r"\p{L}+|\p{N}+|\s+"]


def _train(mode: str, pattern: str = "gpt4", vocab_size: int = 420) -> Tokenizer:
    return bpe.train(
        TRAINING_TEXT,
        vocab_size=vocab_size,
        mode=mode,
        pattern=pattern,
        trainer="reference",
        special_tokens=SPECIALS,
    )


@pytest.fixture(scope="module")
def tokenisers() -> dict[str, Tokenizer]:
    toks = {"naive": _train("naive")}
    for pattern in PATTERNS:
        toks[f"chunked-{pattern}"] = _train("chunked", pattern)
    for name, tok in toks.items():
        # The precondition of every equality below.
        assert not duplicate_tokens(tok), f"{name} has duplicate tokens; pick another vocab size"
        assert not special_token_clashes(tok)
    return toks


TOKENISER_NAMES = ["naive", *(f"chunked-{p}" for p in PATTERNS)]

# Text, sometimes with special tokens spliced in.
TEXTS_WITH_SPECIALS = st.lists(
    st.one_of(TEXTS, st.sampled_from(SPECIALS)), min_size=1, max_size=4
).map("".join)

PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _hf():
    return pytest.importorskip("tokenizers", reason="HF export tests need `tokenizers`")


def _tiktoken():
    return pytest.importorskip("tiktoken", reason="tiktoken export tests need `tiktoken`")


@pytest.fixture(scope="module")
def hf_tokenisers(tokenisers: dict[str, Tokenizer]) -> dict[str, Any]:
    tokenizers = _hf()
    return {name: tokenizers.Tokenizer.from_str(to_hf_json(t)) for name, t in tokenisers.items()}


@pytest.fixture(scope="module")
def tiktoken_encodings(tokenisers: dict[str, Tokenizer]) -> dict[str, Any]:
    _tiktoken()
    return {name: to_tiktoken_encoding(t, name=name) for name, t in tokenisers.items()}


def _pieces(tok: Tokenizer, text: str) -> list[str]:
    """The pieces tiktoken runs its rule on (no special tokens in text)."""
    if tok.mode == "naive":
        return [text] if text else []
    return bpe.split_chunks(text, tok.pattern or "")


# ----- both exports ----------------------------------------------------------------------------
def test_words_mode_is_refused(tmp_path):
    tok = bpe.train("low lower lowest", vocab_size=20, mode="words", trainer="reference")
    with pytest.raises(ValueError, match="byte-level modes only"):
        to_hf_json(tok)
    with pytest.raises(ValueError, match="byte-level modes only"):
        write_tiktoken(tok, tmp_path / "words")
    assert not list(tmp_path.iterdir())


def test_byte_level_alphabet_is_gpt2s():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert all(not c.isspace() and c.isprintable() for c in table.values())
    tokenizers = pytest.importorskip("tokenizers")
    assert set(table.values()) == set(tokenizers.pre_tokenizers.ByteLevel.alphabet())


# ----- HF -----------------------------------------------------------------------------------
def test_hf_file_pins_the_settings_that_change_ids(tokenisers):
    data = json.loads(to_hf_json(tokenisers["chunked-gpt4"]))
    model = data["model"]
    assert model["type"] == "BPE"
    assert model["ignore_merges"] is False  # else whole-vocab pieces skip the merges
    assert model["dropout"] is None and model["byte_fallback"] is False
    assert model["unk_token"] is None and data["normalizer"] is None
    assert len(model["merges"]) == len(tokenisers["chunked-gpt4"].merges)
    split, byte_level = data["pre_tokenizer"]["pretokenizers"]
    assert split["pattern"]["Regex"] == bpe.GPT4_PATTERN
    assert (split["behavior"], split["invert"]) == ("Removed", True)
    assert byte_level["use_regex"] is False and byte_level["add_prefix_space"] is False
    assert [(t["content"], t["id"], t["special"]) for t in data["added_tokens"]] == [
        (s, tokenisers["chunked-gpt4"].special_tokens[s], True) for s in SPECIALS
    ]


def test_hf_worked_example_of_the_encode_rule():
    tokenizers = _hf()
    tok = Tokenizer(mode="naive", merges=[(97, 97, 256), (256, 97, 257), (257, 98, 258)])
    hf = tokenizers.Tokenizer.from_str(to_hf_json(tok))
    assert hf.encode("abaaab").ids == [97, 98, 258]
    assert hf.encode("aaaa").ids == [256, 256]  # 257 (aaa) is a token, but merges stop first


def test_hf_export_keeps_merges_for_pieces_that_are_tokens():
    # Trained merge lists are self-encoding (every token's bytes encode to that token), so on
    # them `ignore_merges` changes nothing and the property tests cannot see it. Here the
    # chunk "abc" is token 258, but our rule (docs/algorithms.md, "Encoding") merges (b, c)
    # first and never learned (a, bc): the export must make HF run the merges too.
    tokenizers = _hf()
    tok = Tokenizer(
        mode="chunked",
        merges=[(98, 99, 256), (97, 98, 257), (257, 99, 258)],
        pattern=bpe.GPT4_PATTERN,
    )
    hf = tokenizers.Tokenizer.from_str(to_hf_json(tok))
    for text in ["abc", "abc abc", "x abc."]:
        assert tok.encode(text) == hf.encode(text).ids
    assert hf.encode("abc").ids == [97, 256]  # not [258], the whole-piece token


# Chunked tokenisers trained on GPT-4's chunks, each with a text where a learned token's bytes
# sit across a chunk boundary (docs/algorithms.md, "Chunked training": no merge crosses one).
# Runs of spaces: "x    x" is cut "x", "   ", " x", so "  " is learned; in "x  x" the chunks are
# "x", " ", " x" and the two spaces must stay apart (HF with no split at all joins them).
# Digits: GPT-4 cuts "1234567" as "123", "456", "7", so "45" is learned; "3456" is cut "345",
# "6", and "456" must not form across that cut (HF's own GPT-2 split, which keeps digits
# together, forms it as well).
SPLIT_CASES = [
    ("x    x    x    x    x   x", [b"  ", b" x", b"   "], "x  x", [120, 32, 257]),
    ("1234567 " * 5, [b"12", b"45", b"123", b"456"], "3456", [51, 257, 54]),
]


@pytest.mark.parametrize(("training", "learned", "text", "ids"), SPLIT_CASES)
def test_hf_export_splits_chunked_text_before_merging(training, learned, text, ids):
    tokenizers = _hf()
    tok = bpe.train(training, vocab_size=256 + len(learned), mode="chunked")
    assert [tok.vocab[new] for _, _, new in tok.merges] == learned
    assert tok.encode(text) == ids
    hf = tokenizers.Tokenizer.from_str(to_hf_json(tok))
    for sample in [text, f"{text} {text}", training]:
        assert hf.encode(sample).ids == tok.encode(sample)


def test_hf_file_round_trips_through_a_path(tmp_path, tokenisers):
    tokenizers = _hf()
    path = write_hf(tokenisers["naive"], tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    text = "Naïve café 😀 <pad> and more\n"
    ours = tokenisers["naive"].encode(text, allowed_special="all")
    assert hf.encode(text).ids == ours
    assert hf.decode(ours, skip_special_tokens=False) == text


@pytest.mark.parametrize("name", TOKENISER_NAMES)
@PROPERTY
@given(text=TEXTS_WITH_SPECIALS)
def test_hf_encodes_like_us(name, text, tokenisers, hf_tokenisers):
    ours = tokenisers[name].encode(text, allowed_special="all")
    assert hf_tokenisers[name].encode(text).ids == ours


FRESH = settings(max_examples=60, deadline=None)
FRESHLY_TRAINED = {
    "training": st.lists(
        st.one_of(HARD_PIECES, st.text(KNOWN_CHARACTERS, max_size=4)), max_size=25
    ).map("".join),
    "mode": st.sampled_from(["naive", "chunked"]),
    "vocab_size": st.integers(257, 320),
    "texts": st.lists(TEXTS, min_size=1, max_size=3),
}


@FRESH
@given(**FRESHLY_TRAINED)
def test_trained_tokenisers_never_repeat_bytes(training, mode, vocab_size, texts):
    # Why: a token's bytes are a span whose ends stayed token boundaries until it was made; a
    # span evolves the same way wherever it stands while its ends hold, so every span with
    # those bytes is cut the same way at that step and merged by the same pair.
    tok = bpe.train(training, vocab_size=vocab_size, mode=mode, trainer="reference")
    assert duplicate_tokens(tok) == {}


@FRESH
@given(**FRESHLY_TRAINED)
def test_hf_encodes_like_any_freshly_trained_tokeniser(training, mode, vocab_size, texts):
    tokenizers = _hf()
    tok = bpe.train(training, vocab_size=vocab_size, mode=mode, trainer="reference")
    assume(not duplicate_tokens(tok))  # never filters (test above); the claim's precondition
    hf = tokenizers.Tokenizer.from_str(to_hf_json(tok))
    for text in [training, *texts]:
        assert hf.encode(text).ids == tok.encode(text)


@FRESH
@given(**FRESHLY_TRAINED)
def test_tiktoken_encodes_like_any_freshly_trained_tokeniser(training, mode, vocab_size, texts):
    # Trained merge lists never hit the rank rule's divergence (measured: docs/exports.md);
    # hand-made ones can, see test_tiktoken_rank_rule_can_cut_differently.
    _tiktoken()
    tok = bpe.train(training, vocab_size=vocab_size, mode=mode, trainer="reference")
    assert rank_rule_conflicts(tok) == []
    enc = to_tiktoken_encoding(tok)
    for text in [training, *texts]:
        assert enc.encode_ordinary(text) == tok.encode(text)


# Two merges make b"abc": (ab, c) -> 258 and (a, bc) -> 259. Our trainers never write such a list
# (test above), but a hand-made or imported one can. Text reaching 259: "abc", (b, c) ranks first.
DUPLICATED = Tokenizer(
    mode="naive", merges=[(98, 99, 256), (97, 98, 257), (257, 99, 258), (97, 256, 259)]
)


def test_duplicate_bytes_are_found_and_refused_when_strict():
    assert duplicate_tokens(DUPLICATED) == {b"abc": [258, 259]}
    assert canonical_ids(DUPLICATED) == {259: 258}
    assert "repeat the bytes" in export_warnings(DUPLICATED, target="hf")[0]
    with pytest.raises(ExportError, match="cannot be exported exactly"):
        to_hf_json(DUPLICATED, strict=True)


def test_duplicate_bytes_export_the_first_id_and_diverge_there():
    tokenizers = _hf()
    data = json.loads(to_hf_json(DUPLICATED))
    assert data["model"]["vocab"]["abc"] == 258 and 259 not in data["model"]["vocab"].values()
    hf = tokenizers.Tokenizer.from_str(json.dumps(data))
    assert DUPLICATED.encode("abc") == [259]
    assert hf.encode("abc").ids == [258]  # the documented divergence: same bytes, first id
    assert hf.encode("xabbc").ids == DUPLICATED.encode("xabbc")  # elsewhere still equal


def test_special_token_spelled_like_a_learned_token_is_reported():
    # A naive tokeniser that learned the bytes "<s>" and also has "<s>" as a special token.
    tok = Tokenizer(
        mode="naive", merges=[(60, 115, 256), (256, 62, 257)], special_tokens={"<s>": 258}
    )
    assert special_token_clashes(tok) == {"<s>"}
    assert any("spelled like ordinary tokens" in w for w in export_warnings(tok, target="hf"))
    with pytest.raises(ExportError):
        to_hf_json(tok, strict=True)


# ----- tiktoken --------------------------------------------------------------------------------
def test_rank_file_is_tiktokens_format(tmp_path, tokenisers, monkeypatch):
    _tiktoken()
    from tiktoken.load import load_tiktoken_bpe

    tok = tokenisers["chunked-gpt4"]
    ranks_path, sidecar_path = write_tiktoken(tok, tmp_path / "mine")
    assert (ranks_path.name, sidecar_path.name) == ("mine.tiktoken", "mine.tiktoken.json")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken caches local files by path
    assert load_tiktoken_bpe(str(ranks_path)) == mergeable_ranks(tok)
    assert rank_file_text(tok).splitlines()[97] == "YQ== 97"  # base64(b"a"), rank = id
    sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
    assert sidecar["pat_str"] == bpe.GPT4_PATTERN and sidecar["special_tokens"] == dict(
        tok.special_tokens
    )
    enc = load_tiktoken(ranks_path)
    text = "it's 2024 <|endoftext|> déjà vu"
    assert enc.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")
    assert enc.encode_ordinary(text) == tok.encode(text)


def test_naive_export_uses_a_whole_text_pattern(tokenisers):
    _tiktoken()
    enc = to_tiktoken_encoding(tokenisers["naive"])
    assert enc._pat_str == NAIVE_PATTERN
    text = "a\nb  c\r\n😀"
    assert enc.encode_ordinary(text) == tokenisers["naive"].encode(text)


@pytest.mark.parametrize("name", TOKENISER_NAMES)
@PROPERTY
@given(text=TEXTS)
def test_tiktoken_follows_the_rank_rule(name, text, tokenisers, tiktoken_encodings):
    tok = tokenisers[name]
    ranks = mergeable_ranks(tok)
    expected = [
        i for piece in _pieces(tok, text) for i in rank_rule_encode(ranks, piece.encode("utf-8"))
    ]
    assert tiktoken_encodings[name].encode_ordinary(text) == expected


@pytest.mark.parametrize("name", TOKENISER_NAMES)
@PROPERTY
@given(text=TEXTS_WITH_SPECIALS)
def test_tiktoken_matches_us_where_the_rank_rule_agrees(name, text, tokenisers, tiktoken_encodings):
    tok, enc = tokenisers[name], tiktoken_encodings[name]
    ranks = mergeable_ranks(tok)
    for piece in bpe.model._split_on_specials(text, tok.special_tokens):
        if piece[1] is not None:
            continue
        for chunk in _pieces(tok, piece[0]):
            ours = tok.encode(chunk)
            assume(rank_rule_encode(ranks, chunk.encode("utf-8")) == ours)
    assert enc.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")


def test_tiktoken_rank_rule_can_cut_differently():
    _tiktoken()
    # (b, c) is learned before (a, b), and (ab, c) after: we cut "abc" as a|bc, since (a, bc)
    # was never learned; tiktoken sees that "abc" is a token and takes it whole.
    tok = Tokenizer(
        mode="chunked", merges=[(98, 99, 256), (97, 98, 257), (257, 99, 258)], pattern=r"\S+|\s+"
    )
    enc = to_tiktoken_encoding(tok)
    assert tok.encode("abc") == [97, 256]
    assert enc.encode_ordinary("abc") == [258]
    # Without the whole-piece shortcut too: in "abcd" tiktoken joins bc, then a+bc = abc (258).
    assert tok.encode("abcd") == [97, 256, 100]
    assert enc.encode_ordinary("abcd") == [258, 100]
    assert rank_rule_conflicts(tok) == [258]
    assert any("rank of the joined bytes" in w for w in export_warnings(tok, target="tiktoken"))


def test_tiktoken_keeps_the_first_of_duplicate_ids():
    ranks = mergeable_ranks(DUPLICATED)
    assert ranks[b"abc"] == 258 and 259 not in ranks.values()
