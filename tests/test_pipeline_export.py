"""Imports run through HF's whole pipeline (Qwen 3, DeepSeek-V3, Llama 2) export to a
`tokenizer.json` again: `bpe import` then `bpe export --format hf` writes a file that HF
`tokenizers` loads and runs exactly as the original file, on corpus slices and odd texts, with
and without the model's own special tokens, and decodes alike."""

from __future__ import annotations

import pytest

from tests.test_cli import bpe_cli
from tests.test_hf_models import ODD, model_path, samples

tokenizers = pytest.importorskip("tokenizers")

PIPELINE_MODELS = ("qwen3", "deepseek_v3", "llama2")


@pytest.mark.parametrize("name", PIPELINE_MODELS)
def test_bpe_export_writes_a_file_tokenizers_runs_as_the_original(tmp_path, name):
    original = model_path(name)
    saved, exported = tmp_path / "tok.json", tmp_path / "tokenizer.json"
    result = bpe_cli("import", str(original), "-o", str(saved))
    assert result.returncode == 0, result.stderr
    result = bpe_cli("export", "-t", str(saved), "--format", "hf", "-o", str(exported))
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr  # the file's own pipeline: nothing is approximated
    want = tokenizers.Tokenizer.from_file(str(original))
    got = tokenizers.Tokenizer.from_file(str(exported))
    texts = [text[:1500] for text in samples()] + ODD
    assert texts
    for text in texts:
        for add in (False, True):
            ids = want.encode(text, add_special_tokens=add).ids
            assert got.encode(text, add_special_tokens=add).ids == ids, (text[:60], add)
            assert got.decode(ids, skip_special_tokens=False) == want.decode(
                ids, skip_special_tokens=False
            )
    assert got.get_vocab(with_added_tokens=True) == want.get_vocab(with_added_tokens=True)
