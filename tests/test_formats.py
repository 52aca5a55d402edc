"""The project's own JSON file: exact round trips and clear errors for anything else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe.formats import TokenizerFileError, dumps, load, loads, save, to_dict
from tests.strategies import TEXTS


def trained(mode: str = "chunked", **options) -> bpe.Tokenizer:
    text = "the cat sat on the mat; the cat ate the rat. 中文中文 😀😀"
    return bpe.train(
        text,
        vocab_size=options.pop("vocab_size", 290 if mode != "words" else 60),
        mode=mode,
        trainer="reference",
        **options,
    )


def assert_same(a: bpe.Tokenizer, b: bpe.Tokenizer) -> None:
    assert to_dict(a) == to_dict(b)
    assert (a.mode, a.pattern, a.merges, a.special_tokens, a.alphabet) == (
        b.mode,
        b.pattern,
        b.merges,
        b.special_tokens,
        b.alphabet,
    )


@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
def test_save_and_load_round_trip(tmp_path, mode):
    tok = trained(mode, special_tokens=["<eot>"])
    path = tmp_path / "tok.json"
    save(tok, path)
    again = load(path)
    assert_same(tok, again)
    text = "the cat sat, 中文 😀"
    assert again.encode(text) == tok.encode(text)


def test_documented_keys_are_present():
    data = json.loads(dumps(trained("chunked", special_tokens=["<eot>"], vocab_size=280)))
    for key in (
        "format",
        "version",
        "mode",
        "pattern",
        "merges",
        "special_tokens",
        "alphabet",
        "training",
    ):
        assert key in data
    assert data["mode"] == "chunked" and isinstance(data["pattern"], str)
    assert all(len(m) == 3 for m in data["merges"])
    assert data["special_tokens"] == {"<eot>": 279}
    assert json.loads(dumps(trained("naive")))["pattern"] is None


@settings(max_examples=40, deadline=None)
@given(
    text=TEXTS,
    mode=st.sampled_from(["naive", "chunked", "words"]),
    specials=st.lists(st.text(min_size=1, max_size=5), max_size=3, unique=True),
)
def test_property_json_round_trip_is_exact(text, mode, specials):
    specials = [s for s in specials if not (mode == "words" and s in ("<unk>", "</w>"))]
    base = 256 if mode != "words" else len(set("".join(text.split()))) + 1
    tok = bpe.train(
        text,
        vocab_size=base + 1 + len(specials) + 12,
        mode=mode,
        special_tokens=specials,
        trainer="reference",
    )
    again = loads(dumps(tok))
    assert_same(tok, again)
    assert dumps(again) == dumps(tok)


def corrupt(change) -> str:
    data = to_dict(trained("chunked", special_tokens=["<eot>"]))
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xff\xfe not utf8", "not UTF-8"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"model": {}, "pre_tokenizer": null}', "HuggingFace tokenizer.json"),
        ('{"hello": 1}', "not a BPE Workbench tokeniser"),
        (corrupt(lambda d: d.update(version=99)), "unsupported version"),
        (corrupt(lambda d: d.update(mode="bytes")), "mode must be one of"),
        (corrupt(lambda d: d.update(pattern=None)), "needs its split pattern"),
        (corrupt(lambda d: d.update(pattern="(unclosed")), "not a valid regex"),
        (corrupt(lambda d: d.update(merges="nope")), "merges must be a list"),
        (corrupt(lambda d: d["merges"].append([1, 2])), "is not \\[left_id, right_id, new_id\\]"),
        (corrupt(lambda d: d["merges"][0].__setitem__(2, 999)), "should create id 256"),
        (corrupt(lambda d: d["merges"][0].__setitem__(0, 700)), "does not exist yet"),
        (
            corrupt(lambda d: d["merges"].append(d["merges"][0][:2] + [256 + len(d["merges"])])),
            "merged twice",
        ),
        (corrupt(lambda d: d.update(special_tokens={"<eot>": 5})), "should be"),
        (corrupt(lambda d: d.update(alphabet=["a"])), "alphabet must be null"),
        (corrupt(lambda d: d["training"].pop("merge_counts")), "training is incomplete"),
        (corrupt(lambda d: d["training"]["tokens_after"].pop()), "one entry per merge"),
    ],
)
def test_corrupt_or_foreign_files_get_a_clear_error(raw, message):
    with pytest.raises(TokenizerFileError, match=message):
        loads(raw)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerFileError, match="cannot read"):
        load(tmp_path / "absent.json")


def test_words_file_needs_alphabet_and_unk():
    data = to_dict(trained("words"))
    data["special_tokens"] = {}
    with pytest.raises(TokenizerFileError, match="<unk>"):
        loads(json.dumps(data))
    data = to_dict(trained("words"))
    data["alphabet"] = ["ab"]
    with pytest.raises(TokenizerFileError, match="alphabet"):
        loads(json.dumps(data))
