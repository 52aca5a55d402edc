"""Evaluation figures equal a direct computation on a small text, for every kind of tokeniser."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import bpe
from bpe.evaluate import EvaluationCancelled, count_words, evaluate
from bpe.export_hf import to_hf_json
from bpe.export_tiktoken import rank_file_text
from bpe.importers import import_bytes

TEXT = "The cat sat on the mat.\nThe cat ate 12345 rats! Ünïcödé 東京 😀\t end\n" * 3
OTHER = "A dog, a log, a frog; cats and rats and mats. 東京 again\n"


def tokenisers() -> dict[str, bpe.Tokenizer]:
    toks = {
        mode: bpe.train(
            TEXT, vocab_size=290, mode=mode, trainer="reference", special_tokens=["<s>"]
        )
        for mode in ("naive", "chunked", "words")
    }
    toks["hf"] = import_bytes(to_hf_json(toks["chunked"]).encode(), filename="tokenizer.json")
    toks["tiktoken"] = import_bytes(
        rank_file_text(toks["chunked"]).encode(), filename="r.tiktoken", pattern="gpt2"
    )
    return toks


TOKENISERS = tokenisers()


def direct(tok: bpe.Tokenizer, texts: list[str]) -> dict:
    """The figures computed the plain way, from whole encodes."""
    ids = [i for text in texts for i in tok.encode(text)]
    joined = "".join(texts)
    special = set(tok.special_tokens.values())  # words mode's <unk>, HF's added tokens
    ordinary = [i for i in range(tok.id_limit) if tok.has_id(i) and i in set(tok.ordinary_ids)]
    ordinary = [i for i in ordinary if i not in special]
    used = set(ids) & set(ordinary)
    return {
        "tokens": len(ids),
        "bytes_per_token": len(joined.encode()) / len(ids),
        "chars_per_token": len(joined) / len(ids),
        "tokens_per_word": len(ids) / sum(len(t.split()) for t in texts),
        "never_used": [i for i in ordinary if i not in used],
        "used": len(used),
        "vocab_share": len(used) / len(ordinary),
        "longest_length": max(len(tok.token_bytes(i)) for i in used),
    }


@pytest.mark.parametrize("kind", sorted(TOKENISERS))
def test_figures_match_a_direct_computation(kind):
    tok = TOKENISERS[kind]
    texts = [TEXT, OTHER]
    result = evaluate(tok, texts)
    expected = direct(tok, texts)
    assert result.tokens == expected["tokens"]
    assert result.bytes_per_token == pytest.approx(expected["bytes_per_token"])
    assert result.chars_per_token == pytest.approx(expected["chars_per_token"])
    assert result.tokens_per_word == pytest.approx(expected["tokens_per_word"])
    assert result.never_used == expected["never_used"]  # exact, in id order
    assert result.used == expected["used"]
    assert result.vocab_share == pytest.approx(expected["vocab_share"])
    assert len(tok.token_bytes(result.longest[0][0])) == expected["longest_length"]
    counts = [tok.encode(TEXT).count(i) + tok.encode(OTHER).count(i) for i, _ in result.longest]
    assert [count for _, count in result.longest] == counts
    assert result.seconds >= 0


def test_never_used_lists_what_a_new_text_misses():
    tok = TOKENISERS["chunked"]
    result = evaluate(tok, ["cat"])
    assert set(result.never_used) == set(tok.ordinary_ids) - set(tok.encode("cat"))
    assert tok.special_tokens["<s>"] not in result.never_used  # specials are not counted


def test_progress_and_stop():
    tok = TOKENISERS["tiktoken"]
    seen = []
    evaluate(tok, [TEXT * 200], progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(TEXT) * 200, len(TEXT) * 200)
    assert all(done <= total for done, total in seen)
    with pytest.raises(EvaluationCancelled):
        evaluate(tok, [TEXT * 200], should_stop=lambda: True)


def test_count_words_equals_split():
    text = "a  b\u3000c\x1cd\u0085e\n\nf " + "x" * 50 + " y"
    for block in (1, 3, 7, 1 << 20):
        assert count_words(text, block=block) == len(text.split())


def test_cli_eval_prints_the_figures(tmp_path):
    tok_path = tmp_path / "tok.json"
    bpe.save(TOKENISERS["chunked"], tok_path)
    doc = tmp_path / "doc.txt"
    doc.write_text(OTHER, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "bpe", "eval", "-t", str(tok_path), str(doc), "--show", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    expected = evaluate(TOKENISERS["chunked"], [OTHER])
    assert f"tokens: {expected.tokens}\n" in run.stdout
    assert f"bytes per token: {expected.bytes_per_token:.3f}\n" in run.stdout
    assert f"never used: {len(expected.never_used)} tokens:\n" in run.stdout
    assert f"... and {len(expected.never_used) - 2} more" in run.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "bpe", "eval", "-t", str(tok_path), str(doc), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(as_json.stdout)["never_used"] == expected.never_used


def test_a_special_token_an_imported_vocabulary_also_lists_is_not_unused_vocabulary():
    """HF files list added tokens in the model's vocabulary too ("<|end|>" is spelled in the
    byte-level alphabet): evaluate still counts it as special, not as a token never used."""
    import json

    from bpe.byte_level import byte_level_string
    from bpe.import_hf import from_hf_json

    vocab = {byte_level_string(bytes([b])): b for b in range(256)}
    vocab[byte_level_string(b"ab")] = 256
    vocab["<|end|>"] = 257
    added = {"id": 257, "content": "<|end|>", "special": True, "single_word": False}
    added |= {"lstrip": False, "rstrip": False, "normalized": False}
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"], "ignore_merges": False},
    }
    tok = from_hf_json(json.dumps(document), filename="tiny.json")
    assert 257 in tok.special_tokens.values()
    figures = bpe.evaluate.evaluate(tok, ["ab ab"])
    assert 257 not in figures.never_used and 256 not in figures.never_used
    assert figures.vocab_size == 257  # the 256 bytes and "ab"


# ----- fertility: per word only where words are spaced ------------------------------------------
CHINESE = "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。\n"
THAI = "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกันในเกียรติศักด[เกียรติศักดิ์]และสิทธิ\n"


@pytest.mark.parametrize(("text", "script"), [(CHINESE, "Han"), (THAI, "Thai")])
def test_unspaced_scripts_give_tokens_per_character(text, script):
    tok = TOKENISERS["naive"]
    result = evaluate(tok, [text])
    assert (result.script, result.spaced, result.tokens_per_word) == (script, False, None)
    # Split on whitespace this text is one or two "words": the old figure was the whole count.
    assert result.fertility == ("tokens/char", len(tok.encode(text)) / len(text))
    assert result.to_dict()["tokens_per_char"] == pytest.approx(len(tok.encode(text)) / len(text))


def test_spaced_text_keeps_tokens_per_word():
    result = evaluate(TOKENISERS["naive"], [TEXT])
    assert (result.script, result.spaced) == ("Latin", True)
    assert result.fertility == ("tokens/word", result.tokens / len(TEXT.split()))


def test_cli_eval_labels_the_fertility(tmp_path):
    tok_path = tmp_path / "tok.json"
    bpe.save(TOKENISERS["naive"], tok_path)
    doc = tmp_path / "zh.txt"
    doc.write_text(CHINESE, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "bpe", "eval", "-t", str(tok_path), str(doc)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    expected = len(TOKENISERS["naive"].encode(CHINESE)) / len(CHINESE)
    assert f"tokens per char: {expected:.3f}\n" in run.stdout
    assert "tokens per word" not in run.stdout
