"""The project's own JSON file: exact round trips and clear errors for anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe.formats import (
    TokenizerFileError,
    bulk_parts,
    dumps,
    from_parts,
    header_dict,
    join_parts,
    load,
    loads,
    save,
    to_dict,
)
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
        (corrupt(lambda d: d["merges"][0].__setitem__(0, True)), "integers"),
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


# ----- header and bulk: the file in the two parts a database keeps ---------------------------
SAVED = Path(__file__).parent / "saved_tokenizers"
SAVED_NAMES = ("naive", "chunked", "words", "tiktoken", "hf")  # words with a special, imports


@pytest.mark.parametrize("name", SAVED_NAMES)
def test_files_saved_before_the_header_split_load_and_save_byte_identically(name):
    # Written by `dumps` before to_dict was built from header_dict + bulk_parts: the key order
    # and every value must come out the same, or older files would be rewritten differently.
    raw = (SAVED / f"{name}.json").read_text(encoding="utf-8")
    tok = loads(raw)
    assert dumps(tok) == raw
    assert dumps(from_parts(header_dict(tok), **bulk_parts(tok))) == raw


@pytest.mark.parametrize("name", SAVED_NAMES)
def test_the_header_holds_no_bulk_and_the_parts_join_into_the_file(name):
    tok = loads((SAVED / f"{name}.json").read_text(encoding="utf-8"))
    header = header_dict(tok)
    assert "merges" not in header and "tokens" not in header
    assert header["training"] is None or set(header["training"]).isdisjoint(
        {"merge_counts", "tokens_after"}
    )
    assert json.dumps(join_parts(header, **bulk_parts(tok))) == json.dumps(to_dict(tok))


def test_parts_take_tuples_and_token_bytes_as_database_rows_give_them():
    tok = loads((SAVED / "tiktoken.json").read_text(encoding="utf-8"))
    again = from_parts(
        header_dict(tok),
        merges=[tuple(m) for m in tok.merges],
        tokens=[(i, data) for i, data in (tok.tokens or {}).items()],
    )
    assert dumps(again) == dumps(tok)


def _parts(name: str) -> tuple[dict, dict]:
    tok = loads((SAVED / f"{name}.json").read_text(encoding="utf-8"))
    return header_dict(tok), bulk_parts(tok)


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("chunked", lambda h, b: h.update(mode="bytes"), "mode must be one of"),
        ("chunked", lambda h, b: h.update(format="other"), "not a BPE Workbench tokeniser"),
        ("chunked", lambda h, b: h.update(pattern=None), "needs its split pattern"),
        ("chunked", lambda h, b: b["merges"][0].__setitem__(2, 999), "should create id 256"),
        ("chunked", lambda h, b: b.update(merge_counts=None), "training is incomplete"),
        ("chunked", lambda h, b: b["tokens_after"].pop(), "one entry per merge"),
        ("words", lambda h, b: h.update(alphabet=None), "needs its alphabet"),
        ("tiktoken", lambda h, b: h.update(rule="other"), "rule must be"),
        ("tiktoken", lambda h, b: b["tokens"].pop(0), "single bytes have no token"),
        ("hf", lambda h, b: b["merges"].append([1, 2, 3]), "do not make token"),
    ],
)
def test_corrupt_parts_get_the_corrupt_files_error(name, change, message):
    header, bulk = _parts(name)
    change(header, bulk)
    with pytest.raises(TokenizerFileError, match=f"^the stored row: .*{message}"):
        from_parts(header, **bulk, source="the stored row")


def test_a_header_that_is_not_an_object_is_refused_like_a_file():
    with pytest.raises(TokenizerFileError, match="expected a JSON object"):
        from_parts([1, 2], merges=[])


def _corrupt_tokens(change) -> str:
    data = json.loads((SAVED / "tiktoken.json").read_text(encoding="utf-8"))
    change(data["tokens"])
    return json.dumps(data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.__setitem__(3, [3]), "token entry 3 is not \\[id, hex bytes\\]"),
        (lambda t: t.__setitem__(3, "0361"), "token entry 3 is not"),
        (lambda t: t.__setitem__(3, [-1, "03"]), "token entry 3 is not"),
        (lambda t: t.__setitem__(3, [True, "03"]), "token entry 3 is not"),
        (lambda t: t.__setitem__(3, [3, 3]), "token entry 3 is not"),
        (lambda t: t.__setitem__(3, [3, "zz"]), "token 3 has bytes that are not hex"),
        (lambda t: t.__setitem__(3, [3, ""]), "token 3 is empty"),
        (lambda t: t.__setitem__(3, [2, "03"]), "token id 2 appears twice"),
    ],
)
def test_an_imported_files_broken_token_entry_is_named(change, message):
    with pytest.raises(TokenizerFileError, match=message):
        loads(_corrupt_tokens(change))
