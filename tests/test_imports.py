"""Importing HuggingFace tokenizer.json and tiktoken files: exact encoding, clear refusals.

HF: our own export of each byte-level mode, re-imported, encodes as the original; synthetic
tokenizer.json files (shuffled ids, shuffled merge order, extra whole-word tokens, with and
without ignore_merges, the pre-tokenizer variants) encode as the real `tokenizers` library
loading the same file; every unsupported part is refused with a message naming it.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe.byte_level import byte_level_string
from bpe.export_hf import to_hf_dict, to_hf_json
from bpe.export_tiktoken import write_tiktoken
from bpe.importers import TokenizerFileError, UnsupportedTokenizer, import_bytes, import_path
from tests.strategies import HARD_PIECES, TEXTS

hf = pytest.importorskip("tokenizers", reason="HF conformance needs the real `tokenizers`")

TRAIN_TEXT = (
    "the quick brown fox jumps over the lazy dog; the dog naps. 123 4567 89!\n"
    "Über straße café naïve — 東京 中文 😀😀 <eot> tabs\tand  spaces\n"
) * 4
WORDS = ["the", " the", "quick", " fox", "dog", " lazy", "123", "東京", "aaa", " naps."]


@pytest.fixture(scope="module")
def trained():
    return {
        mode: bpe.train(
            TRAIN_TEXT, vocab_size=330, mode=mode, trainer="reference", special_tokens=["<eot>"]
        )
        for mode in ("naive", "chunked")
    }


# ----- our export, re-imported ----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["naive", "chunked"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS)
def test_our_hf_export_reimported_encodes_identically(trained, mode, text):
    tok = trained[mode]
    again = import_bytes(to_hf_json(tok).encode(), filename="tokenizer.json")
    assert again.rule == "hf" and again.mode == mode
    for allowed in ((), "all"):
        assert again.encode(text, allowed_special=allowed) == tok.encode(
            text, allowed_special=allowed
        )
    assert again.decode(again.encode(text)) == tok.decode(tok.encode(text))


@pytest.mark.parametrize("mode", ["naive", "chunked"])
def test_our_tiktoken_export_reimported_encodes_identically(trained, mode, tmp_path):
    tok = trained[mode]
    ranks_path, _ = write_tiktoken(tok, tmp_path / "ours")
    again = import_path(ranks_path)  # finds ours.tiktoken.json beside it
    assert again.rule == "tiktoken" and again.special_tokens == tok.special_tokens
    text = TRAIN_TEXT + " unseen wörds 😀 <eot>"
    assert again.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")


@pytest.mark.parametrize("limit", [0, 1, 5, 40])
def test_first_k_merges_of_a_reimport_cut_as_ours(trained, tmp_path, limit):
    # The merge scrubber encodes with the first k merges: by HF's order and by tiktoken's ranks
    # that must give what our lowest-id rule (docs/algorithms.md, "Encoding") gives with the
    # same first k merges of our own tokeniser.
    tok = trained["chunked"]
    from_hf = import_bytes(to_hf_json(tok).encode(), filename="tokenizer.json")
    ranks_path, _ = write_tiktoken(tok, tmp_path / "ours")
    from_tiktoken = import_path(ranks_path)
    text = TRAIN_TEXT + " unseen wörds <eot>"
    for allowed in ((), "all"):
        ours = tok.encode(text, merge_limit=limit, allowed_special=allowed)
        assert from_hf.encode(text, merge_limit=limit, allowed_special=allowed) == ours
        assert from_tiktoken.encode(text, merge_limit=limit, allowed_special=allowed) == ours


# ----- synthetic files against the real `tokenizers` ---------------------------------------
def synthetic(base: dict, rng: random.Random, options: dict) -> dict:
    """A tokenizer.json from an export: ids shuffled, merges reordered, whole words added."""
    data = copy.deepcopy(base)
    model = data["model"]
    vocab = {text: i for text, i in model["vocab"].items() if i not in _special_ids(data)}
    for word in WORDS:
        vocab.setdefault(byte_level_string(word.encode()), len(vocab))
    order = list(vocab)
    rng.shuffle(order)
    model["vocab"] = {text: i for i, text in enumerate(order)}
    merges = list(model["merges"])
    if options["shuffle_merges"]:
        rng.shuffle(merges)
    model["merges"] = [" ".join(m) for m in merges] if options["string_merges"] else merges
    model["ignore_merges"] = options["ignore_merges"]
    data["added_tokens"] = [
        {**token, "id": len(model["vocab"]) + k} for k, token in enumerate(data["added_tokens"])
    ]
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": options["prefix"],
        "trim_offsets": False,
        "use_regex": options["use_regex"],
    }
    split = options["split"]
    if split is None:
        data["pre_tokenizer"] = byte_level
    else:
        behavior, invert, pattern = split
        step = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior}
        step["invert"] = invert
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [step, byte_level]}
    return data


def _special_ids(data: dict) -> set[int]:
    return {token["id"] for token in data["added_tokens"]}


OPTIONS = st.fixed_dictionaries(
    {
        "shuffle_merges": st.booleans(),
        "string_merges": st.booleans(),
        "ignore_merges": st.booleans(),
        "prefix": st.booleans(),
        "use_regex": st.booleans(),
        "split": st.sampled_from(
            [
                None,
                ("Isolated", False, bpe.GPT4_PATTERN),
                ("Removed", True, bpe.GPT2_PATTERN),
                ("Removed", False, r"\s+"),
                ("Isolated", True, r"\d+|[a-z]+"),
            ]
        ),
    }
)
HF_TEXTS = st.one_of(
    TEXTS,
    st.lists(st.one_of(st.sampled_from(WORDS + ["<eot>", " "]), HARD_PIECES), max_size=20).map(
        "".join
    ),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), options=OPTIONS, text=HF_TEXTS)
def test_synthetic_files_encode_like_tokenizers(trained, seed, options, text):
    rng = random.Random(seed)
    data = synthetic(to_hf_dict(trained[rng.choice(["naive", "chunked"])]), rng, options)
    raw = json.dumps(data)
    ours = import_bytes(raw.encode(), filename="synthetic.json")
    theirs = hf.Tokenizer.from_str(raw)
    ids = ours.encode(text, allowed_special="all")
    assert ids == theirs.encode(text, add_special_tokens=False).ids
    assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=False)


def test_ignore_merges_takes_a_whole_word_token(trained):
    # "zqx" is in the vocabulary but no merge makes it: only ignore_merges can return it.
    data = to_hf_dict(trained["chunked"])
    word_id = len(data["model"]["vocab"])
    data["model"]["vocab"]["zqx"] = word_id
    for flag, expected in ((True, [word_id]), (False, None)):
        data["model"]["ignore_merges"] = flag
        raw = json.dumps(data)
        ids = import_bytes(raw.encode(), filename="t.json").encode("zqx")
        assert ids == hf.Tokenizer.from_str(raw).encode("zqx").ids
        assert ids == expected if expected else len(ids) == 3


def test_stale_queue_entries_are_skipped_as_tokenizers_does(trained):
    # Merges (b, c), (a, b), (a, bc): in "abc", (b, c) goes first, so the queued (a, b) is stale
    # when it comes up; applying it anyway would give "ab" + nothing instead of "abc".
    data = to_hf_dict(trained["naive"])
    data["added_tokens"] = []
    vocab = {byte_level_string(bytes([b])): b for b in range(256)}
    for text in ("bc", "ab", "abc"):
        vocab[text] = len(vocab)
    data["model"]["vocab"] = vocab
    data["model"]["merges"] = [["b", "c"], ["a", "b"], ["a", "bc"]]
    raw = json.dumps(data)
    ids = import_bytes(raw.encode(), filename="t.json").encode("abcab")
    assert ids == hf.Tokenizer.from_str(raw).encode("abcab").ids == [vocab["abc"], vocab["ab"]]


# ----- refusals ---------------------------------------------------------------------------------
def _edit(path: str, value):
    def apply(data: dict) -> None:
        *parents, key = path.split(".")
        target = data
        for parent in parents:
            target = target[parent]
        target[key] = value

    return apply


def _edit_added(**flags):
    def apply(data: dict) -> None:
        data["added_tokens"][0].update(flags)

    return apply


def _drop_byte(data: dict) -> None:
    del data["model"]["vocab"][byte_level_string(b"\x00")]


def _foreign_entry(data: dict) -> None:
    data["model"]["vocab"]["▁hi"] = max(data["model"]["vocab"].values()) + 5


REFUSALS = [
    # Every part HF's pipeline has that bpe.hf does not reproduce, each named in the refusal.
    (_edit("normalizer", {"type": "Precompiled"}), "the Precompiled normalizer is not"),
    (_edit("normalizer", {"type": "BertNormalizer"}), "the BertNormalizer normalizer is not"),
    (
        _edit("normalizer", {"type": "Sequence", "normalizers": [{"type": "Nmt"}]}),
        "the Nmt normalizer is not supported",
    ),
    (_edit("model.type", "WordPiece"), "a WordPiece model is not supported"),
    (_edit("model.type", "Unigram"), "a Unigram model is not supported"),
    (_edit("model.type", "WordLevel"), "a WordLevel model is not supported"),
    (_edit("model.dropout", 0.1), "BPE dropout is not supported"),
    (_edit("pre_tokenizer", {"type": "BertPreTokenizer"}), "the BertPreTokenizer pre-tokenizer"),
    (
        _edit("pre_tokenizer", {"type": "Sequence", "pretokenizers": [{"type": "UnicodeScripts"}]}),
        "the UnicodeScripts pre-tokenizer is not supported",
    ),
    (_edit("decoder", {"type": "WordPiece"}), "the WordPiece decoder is not supported"),
    (_edit("decoder", {"type": "CTC"}), "the CTC decoder is not supported"),
    (_edit("post_processor", {"type": "Custom"}), "the Custom post-processor is not supported"),
    (_edit("truncation", {"max_length": 5}), "truncation is not supported"),
    (_edit("padding", {"length": 5}), "padding is not supported"),
    (_edit_added(id=3), "the id 3 of the added token '<eot>' is not supported"),
]


@pytest.mark.parametrize("change", [_drop_byte, _foreign_entry, _edit_added(lstrip=True)])
def test_files_beyond_plain_byte_level_take_the_whole_pipeline(trained, change):
    """Once refused, these now go through HF's pipeline (`bpe.hf`) with HF's own ids."""
    tokenizers = pytest.importorskip("tokenizers")
    data = to_hf_dict(trained["chunked"])
    change(data)
    raw = json.dumps(data)
    tok = import_bytes(raw.encode(), filename="f.json")
    assert tok.rule == "hf_pipeline"
    hf = tokenizers.Tokenizer.from_str(raw)
    for text in ("the cat sat <eot>  on the mat", " hi\x00 x\u00e9", ""):
        assert tok.encode(text, allowed_special="all") == hf.encode(text).ids


@pytest.mark.parametrize(("change", "message"), REFUSALS)
def test_each_unsupported_part_is_refused_by_name(trained, change, message):
    data = to_hf_dict(trained["chunked"])
    import_bytes(json.dumps(data).encode(), filename="ok.json")  # the unchanged file imports
    change(data)
    with pytest.raises(UnsupportedTokenizer) as caught:
        import_bytes(json.dumps(data).encode(), filename="bad.json")
    assert message in str(caught.value)
    assert str(caught.value).startswith("bad.json: ")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "starts like JSON but is not valid JSON"),
        (b'{"format": "bpe-workbench.tokenizer"}', "already a BPE Workbench tokeniser"),
        (b'{"pat_str": "x"}', "is a tiktoken sidecar"),
        (b'{"a": 1}', "neither a HuggingFace tokenizer.json nor a tiktoken sidecar"),
        (b"[" * 100_000, "starts like JSON but is not valid JSON"),
        (b"IQ== 0\nnot-base64! 1\n", "line 2: expected 'base64-token rank'"),
        (b"IQ== 0\nIg== 0\n", "line 2: rank 0 is repeated"),
        (b"IQ== 0\n", "lacks 255 of the 256 single bytes"),
    ],
)
def test_broken_files_get_a_clear_error(raw, message):
    with pytest.raises(TokenizerFileError) as caught:
        import_bytes(raw, filename="f", pattern="gpt2")
    assert message in str(caught.value)


def _all_bytes_rank_file() -> bytes:
    import base64

    return b"".join(b"%s %d\n" % (base64.b64encode(bytes([b])), b) for b in range(256))


def test_tiktoken_file_needs_a_pattern_and_sane_specials():
    raw = _all_bytes_rank_file()
    with pytest.raises(TokenizerFileError, match="holds no split pattern: give the pattern"):
        import_bytes(raw, filename="r.tiktoken")
    with pytest.raises(TokenizerFileError, match="already the rank of an ordinary token"):
        import_bytes(
            raw,
            filename="r.tiktoken",
            sidecar=b'{"pat_str": "\\\\w+", "special_tokens": {"<x>": 5}}',
        )
    with pytest.raises(TokenizerFileError, match="not a valid regex"):
        import_bytes(raw, filename="r.tiktoken", pattern="(")
    tok = import_bytes(raw, filename="r.tiktoken", pattern="cl100k")
    assert tok.pattern == bpe.patterns.CL100K_PAT_STR
    assert tok.special_tokens == {}  # 256 ranks: not OpenAI's file, so not its special tokens


tiktoken = pytest.importorskip("tiktoken", reason="rank-rule conformance needs the real tiktoken")
EXTRA_TOKENS = st.lists(st.text("abc ", min_size=2, max_size=6), max_size=40, unique=True)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=EXTRA_TOKENS, seed=st.integers(0, 2**32), data=st.data())
def test_random_rank_tables_encode_like_tiktoken(extra, seed, data):
    # Tokens no pair of lower-ranked parts makes are common here: only the whole-piece rule
    # can produce them, and the joining loop must skip them otherwise, as tiktoken does.
    import base64

    rng = random.Random(seed)
    tokens = [bytes([b]) for b in range(256)] + [t.encode() for t in extra]
    rng.shuffle(tokens)
    raw = b"".join(b"%s %d\n" % (base64.b64encode(t), rank) for rank, t in enumerate(tokens))
    pattern = r" ?[a-d]+| +"
    ours = import_bytes(raw, filename="r.tiktoken", pattern=pattern)
    encoding = tiktoken.Encoding(
        "random", pat_str=pattern, mergeable_ranks={t: i for i, t in enumerate(tokens)},
        special_tokens={},
    )  # fmt: skip
    pieces = st.sampled_from(extra) if extra else st.just("ab")
    text = data.draw(st.lists(st.one_of(pieces, st.text("abc d", max_size=5)), max_size=12))
    text = "".join(text)
    assert ours.encode(text) == encoding.encode_ordinary(text)
    for left, right, new in ours.merges:
        assert ours.token_bytes(left) + ours.token_bytes(right) == ours.token_bytes(new)


# ----- the command line --------------------------------------------------------------------
def bpe_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bpe", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_import_then_encode_and_eval(trained, tmp_path):
    source = tmp_path / "tokenizer.json"
    source.write_text(to_hf_json(trained["chunked"]), encoding="utf-8")
    out = tmp_path / "imported.json"
    result = bpe_cli("import", str(source), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "imported tokenizer.json (hf)" in result.stderr
    data = json.loads(out.read_text())
    assert data["rule"] == "hf" and data["source"]["filename"] == "tokenizer.json"
    doc = tmp_path / "doc.txt"
    doc.write_text("the lazy fox naps", encoding="utf-8")
    encoded = bpe_cli("encode", "-t", str(out), str(doc))
    assert encoded.stdout.split() == [str(i) for i in trained["chunked"].encode(doc.read_text())]
    figures = bpe_cli("eval", "-t", str(out), str(doc), "--json")
    assert figures.returncode == 0, figures.stderr
    assert json.loads(figures.stdout)["tokens"] == len(encoded.stdout.split())


def test_cli_import_refusal_is_one_line(trained, tmp_path):
    data = to_hf_dict(trained["chunked"])
    data["normalizer"] = {"type": "Precompiled"}
    source = tmp_path / "tokenizer.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    result = bpe_cli("import", str(source), "-o", str(tmp_path / "x.json"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "bpe: tokenizer.json: the Precompiled normalizer is not supported: imports take NFC, NFD, "
        "NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace and Sequence"
    ]
    assert not (tmp_path / "x.json").exists()


def test_own_tokenisers_keep_their_file_keys(trained):
    keys = set(bpe.to_dict(trained["chunked"]))
    assert keys == {
        "format", "version", "mode", "pattern", "merges", "special_tokens", "alphabet", "training"
    }  # fmt: skip
