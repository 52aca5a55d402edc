"""An import of a tokenizer.json parses the file once.

gpt-oss's file is 27 MB and each parse ~0.5 s; it was parsed three times (the kind of file was
found in `import_path`, again in `import_bytes`, then the reader parsed it). The parses are
counted, not timed, as tests/test_import_linear.py counts its work: the same on a loaded machine.
"""

from __future__ import annotations

import json

import pytest

import bpe
from bpe.export_hf import to_hf_json
from bpe.importers import import_bytes, import_path
from tests.test_library import LOREM


class CountedLoads:
    """json.loads, counting the calls that parse a whole tokenizer.json."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.calls = 0
        self.real = json.loads

    def __call__(self, raw, *args, **kwargs):
        if len(raw) >= self.size:
            self.calls += 1
        return self.real(raw, *args, **kwargs)


@pytest.fixture
def hf_file(tmp_path):
    tok = bpe.train(LOREM, vocab_size=300, mode="chunked")
    path = tmp_path / "tokenizer.json"
    path.write_text(to_hf_json(tok), encoding="utf-8")
    return tok, path


def test_a_tokenizer_json_is_parsed_once(hf_file, monkeypatch):
    tok, path = hf_file
    counted = CountedLoads(path.stat().st_size)
    monkeypatch.setattr(json, "loads", counted)  # every module's json.loads is this one
    imported = import_path(path)
    assert counted.calls == 1
    assert imported.encode(LOREM) == tok.encode(LOREM)  # still the same tokeniser
    counted.calls = 0
    import_bytes(path.read_bytes(), filename="tokenizer.json")
    assert counted.calls == 1
