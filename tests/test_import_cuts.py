"""Imported tokenisers cut their long multi-byte pieces where no token can sit across
(`bpe.rules.base.ImportedRule.encode_new_pieces`) and give exactly the ids of the library the
file came from: the real tiktoken for rank files, the real `tokenizers` for tokenizer.json.

The vocabularies are drawn at random over the bytes of one script's words, so they hold tokens
of whole characters, tokens of a character and part of the next (partial tokens), and tokens
no pair of lower-ranked parts makes (only the whole-piece shortcut gives those).
"""

from __future__ import annotations

import base64
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe.export_hf import to_hf_dict
from bpe.importers import import_bytes
from bpe.long_pieces import CUT_FROM_BYTES
from bpe.patterns import CL100K_PAT_STR
from tests.strategies import SCRIPT_WORDS
from tests.test_encode_scripts import PICKS, SCRIPTS, script_texts
from tests.test_encoding import random_merges

tiktoken = pytest.importorskip("tiktoken", reason="rank-rule conformance needs the real tiktoken")
tokenizers = pytest.importorskip("tokenizers", reason="HF-rule conformance needs tokenizers")


def random_rank_tokens(script: str, seed: int) -> list[bytes]:
    """Every byte, and slices of the script's words at any byte offsets, in a random order."""
    rng = random.Random(seed)
    data = " ".join(SCRIPT_WORDS[script]).encode()
    extra = {data[i : i + rng.randint(2, 9)] for i in rng.choices(range(len(data) - 1), k=60)}
    tokens = [bytes([b]) for b in range(256)] + sorted(extra)
    rng.shuffle(tokens)
    return tokens


def both_imports(tokens: list[bytes]) -> tuple[bpe.Tokenizer, tiktoken.Encoding]:
    """Our import of a rank file of these tokens (rank = place) split by cl100k's pattern, and
    tiktoken's Encoding of the same ranks."""
    raw = b"".join(b"%s %d\n" % (base64.b64encode(t), rank) for rank, t in enumerate(tokens))
    ours = import_bytes(raw, filename="r.tiktoken", pattern=CL100K_PAT_STR)
    ranks = {t: i for i, t in enumerate(tokens)}
    theirs = tiktoken.Encoding(
        "r", pat_str=CL100K_PAT_STR, mergeable_ranks=ranks, special_tokens={}
    )
    return ours, theirs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=SCRIPTS, seed=st.integers(0, 2**32), data=st.data())
def test_property_rank_files_cut_long_pieces_and_encode_like_tiktoken(script, seed, data):
    tokens = random_rank_tokens(script, seed)
    ours, encoding = both_imports(tokens)
    for text in data.draw(st.lists(script_texts(script), min_size=1, max_size=3)):
        assert ours.encode(text, engine="pure") == encoding.encode_ordinary(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=SCRIPTS, picks=PICKS, ignore_merges=st.booleans(), data=st.data())
def test_property_hf_files_cut_long_pieces_and_encode_like_tokenizers(
    script, picks, ignore_merges, data
):
    alphabet = ("".join(SCRIPT_WORDS[script]) + " ,").encode()
    merges = random_merges(picks, alphabet)
    trained = bpe.Tokenizer(mode="chunked", merges=merges, pattern=bpe.GPT4_PATTERN)
    file = to_hf_dict(trained)
    file["model"]["ignore_merges"] = ignore_merges  # Llama 3's: a piece that is a token
    raw = json.dumps(file)
    ours = import_bytes(raw.encode(), filename="tokenizer.json")
    assert ours.rule == "hf"
    theirs = tokenizers.Tokenizer.from_str(raw)
    for text in data.draw(st.lists(script_texts(script), min_size=1, max_size=3)):
        assert ours.encode(text, engine="pure") == theirs.encode(text).ids


def test_long_pieces_are_cut_and_their_parts_remembered_apart_from_pieces():
    # ranks: every byte, then 人 and 人人 whole, then 人 with the lead byte of the next.
    person = "人".encode()
    tokens = [bytes([b]) for b in range(256)] + [person[:2], person, person * 2, person + b"\xe4"]
    ours, encoding = both_imports(tokens)
    text = "人人生" * 3  # one piece of 27 bytes, cut before and after each 生
    assert len(text.encode()) >= CUT_FROM_BYTES
    ids = ours.encode(text, engine="pure")
    assert ids == encoding.encode_ordinary(text)
    # 人 and the lead byte E4 of the next make 人|人 uncut; 人|生 (E7...) is cut. 人人 is a
    # token, so a piece of it alone is that token at once; as a part it is joined by the loop,
    # and remembered only among the parts.
    assert set(ours._part_cache) == {"人人", "生"}
    assert ours._chunk_cache == {text: ids}
    assert ours.encode("人人", engine="pure") == [tokens.index(person * 2)]
