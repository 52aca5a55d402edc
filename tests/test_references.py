"""Imported GPT-2, GPT-4 (cl100k_base) and GPT-4o (o200k_base) encode exactly as tiktoken does.

The reference rank files are built by ../shared/reference-tokenizers/make_reference_tokenizers.sh
(see tests/reference_files.py). For each, our import is compared with a `tiktoken.Encoding`
built from the same file and the same sidecar: on seeded samples of every corpus, and on
hypothesis strings. Those use characters Python's own Unicode tables know (Unicode 14 on
Python 3.11), which leaves out everything newer than Unicode 16: the `regex` module and
tiktoken's Rust regex engine may class characters newer than their tables differently.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe.importers import import_path
from tests.reference_files import NAMES, corpus_samples, read_ranks, reference_dir
from tests.strategies import HARD_PIECES, KNOWN_CHARACTERS, TEXTS

tiktoken = pytest.importorskip("tiktoken", reason="conformance needs the real tiktoken")

HELLO = {"gpt2": [31373, 995], "cl100k_base": [15339, 1917], "o200k_base": [24912, 2375]}
_imported: dict[str, tuple[bpe.Tokenizer, object]] = {}


def pair(name: str):
    """(our import, tiktoken's Encoding) of one reference, built once per session."""
    if name not in _imported:
        directory = reference_dir()
        meta = json.loads((directory / f"{name}.tiktoken.json").read_text(encoding="utf-8"))
        encoding = tiktoken.Encoding(
            name,
            pat_str=meta["pat_str"],
            mergeable_ranks=read_ranks(directory / f"{name}.tiktoken"),
            special_tokens=meta["special_tokens"],
        )
        _imported[name] = (import_path(directory / f"{name}.tiktoken"), encoding)
    return _imported[name]


SPECIAL_TEXTS = st.lists(
    st.one_of(
        HARD_PIECES,
        st.text(KNOWN_CHARACTERS, max_size=4),
        st.sampled_from(["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|endoftext|"]),
    ),
    max_size=12,
).map("".join)


@pytest.mark.parametrize("name", NAMES)
def test_import_keeps_the_files_ids(name):
    tok, encoding = pair(name)
    assert tok.encode("hello world") == HELLO[name]
    assert tok.id_limit == encoding.n_vocab
    assert tok.special_tokens == encoding._special_tokens
    assert tok.byte_ids != list(range(256))  # single bytes are scattered, id 0 is "!"
    assert tok.token_bytes(0) == b"!"
    assert tok.source.format == "tiktoken" and len(tok.source.sha256) == 64


@pytest.mark.parametrize("name", NAMES)
def test_corpus_samples_encode_like_tiktoken(name):
    tok, encoding = pair(name)
    for corpus, text in corpus_samples(3, 6_000, seed=hash(name) % 1000):
        ours = tok.encode(text)
        assert ours == encoding.encode_ordinary(text), corpus
        assert tok.decode(ours) == text


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_larger_corpus_samples_encode_like_tiktoken(name):
    tok, encoding = pair(name)
    for corpus, text in corpus_samples(4, 100_000, seed=7):
        assert tok.encode(text) == encoding.encode_ordinary(text), corpus


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS)
def test_hypothesis_strings_encode_like_tiktoken(name, text):
    tok, encoding = pair(name)
    ours = tok.encode(text)
    assert ours == encoding.encode_ordinary(text)
    assert tok.decode(ours) == text
    assert tok.decode_bytes(ours) == encoding.decode_bytes(ours)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=SPECIAL_TEXTS, data=st.data())
def test_special_tokens_behave_like_allowed_special(name, text, data):
    tok, encoding = pair(name)
    assert tok.encode(text, allowed_special="all") == encoding.encode(text, allowed_special="all")
    subset = data.draw(st.sets(st.sampled_from(sorted(tok.special_tokens))))
    assert tok.encode(text, allowed_special=subset) == encoding.encode(
        text, allowed_special=subset, disallowed_special=()
    )
    assert tok.encode(text) == encoding.encode(text, disallowed_special=())


def test_long_piece_takes_the_heap_path_and_still_agrees():
    tok, encoding = pair("o200k_base")
    text = "ab" * 3000 + " " + "x" * 700 + "東京" * 400
    assert tok.encode(text) == encoding.encode_ordinary(text)


def test_derived_merges_rebuild_every_token():
    tok, _ = pair("cl100k_base")
    # Every multi-byte token of the real file has a derived pair (none are orphans), each pair's
    # parts rank below it, and their bytes make it.
    multi = [i for i in tok.ordinary_ids if len(tok.token_bytes(i)) > 1]
    assert len(tok.merges) == len(multi) == 100256 - 256
    for left, right, new in tok.merges[:2000] + tok.merges[-2000:]:
        assert left < new and right < new
        assert tok.token_bytes(left) + tok.token_bytes(right) == tok.token_bytes(new)
    assert [m[2] for m in tok.merges] == sorted(m[2] for m in tok.merges)


def test_saved_import_round_trips(tmp_path):
    tok, encoding = pair("gpt2")
    path = tmp_path / "gpt2.json"
    bpe.save(tok, path)
    again = bpe.load(path)
    text = "Hello there, GPT-2! 1234567 ünïcödé 😀"
    assert again.encode(text) == encoding.encode_ordinary(text)
    assert again.merges == tok.merges and again.special_tokens == tok.special_tokens
    assert again.source == tok.source and again.rule == "tiktoken"
