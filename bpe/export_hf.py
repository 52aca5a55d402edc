"""Export a byte-level tokeniser (`naive` or `chunked`) to a HuggingFace `tokenizer.json`.

The file describes the pipeline the `tokenizers` library runs, chosen so that
`tokenizers.Tokenizer.from_file(path).encode(text).ids == tok.encode(text, allowed_special="all")`:
- no normalizer (our encoder sees the raw text);
- pre-tokenizer, chunked: `Split(pattern, behavior="removed", invert=True)`, which keeps each
  match of our regex as its own piece and drops text no alternative matches, exactly as
  `bpe.patterns.split_chunks` does (for the GPT-2 and GPT-4 patterns nothing is dropped and this
  is the same as `behavior="isolated"`); then `ByteLevel(add_prefix_space=False,
  use_regex=False)`, which only maps bytes to GPT-2's printable characters. Naive: that
  `ByteLevel` alone, so the whole text (between special tokens) is one piece;
- model `BPE` over those characters: the vocabulary, the merges in learned order (HF's rank is
  the merge's index, lowest first, leftmost first on ties: the same order as our "lowest new id
  first, left to right"), `ignore_merges=false` (otherwise a piece that is itself in the
  vocabulary skips the merges and can come out as one token where we give several),
  `byte_fallback=false`, `dropout=null`, no unknown token (all 256 bytes are in the vocabulary);
- special tokens as `added_tokens` (`special=true`, `normalized=false`); HF always recognises
  them, leftmost-longest, as our `allowed_special="all"` does. They are also put in the model's
  vocabulary: `tokenizers` ignores the ids written in `added_tokens` and numbers added tokens
  after the model's vocabulary unless the model already knows the token.
- decoder `ByteLevel`; no post-processor (nothing is added around the ids).

What a vocabulary file cannot say: a merge list may give two ids the same bytes (merges
`(ab, c)` and `(a, bc)` both make `b"abc"`), but HF's vocabulary maps each string to one id (and
tiktoken's ranks each byte string to one rank). Our trainers never write such a list (a span's
cut depends only on its bytes while its ends are token boundaries, so the same bytes are always
made by the same pair; tests/test_exports.py checks it and docs/exports.md measures it), but a
hand-made or imported one can. The export then keeps the first-learned id of each group
(`canonical_ids`): the later ids never come out of HF, and text we encode with one of them gets
the earlier id there. `duplicate_tokens` lists the groups, `export_warnings` says it in words
(with a special token spelled like a learned byte-level token, the other thing HF cannot hold),
and `strict=True` refuses instead.

What both byte-level exports share (the mode check, the canonical ids, the warnings) lives in
`bpe.export_common`; the byte-level alphabet in `bpe.byte_level`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bpe.byte_level import byte_level_string
from bpe.export_common import (
    ExportError,
    canonical_ids,
    canonical_merges,
    check_exportable,
    export_warnings,
)
from bpe.model import Tokenizer
from bpe.patterns import NAIVE_PATTERN

__all__ = ["to_hf_dict", "to_hf_json", "write_hf"]


def to_hf_dict(tok: Tokenizer, *, strict: bool = False) -> dict[str, Any]:
    """The `tokenizer.json` structure; see `to_hf_json`."""
    check_exportable(tok, target="hf")
    if tok.hf_pipeline is not None:  # imported through HF's whole pipeline: write it back
        return tok.hf_pipeline.to_file()
    if strict:
        problems = export_warnings(tok, target="hf")
        if problems:
            raise ExportError(
                "this tokeniser cannot be exported exactly: "
                + "; ".join(problems)
                + ". Export without strict to accept the difference."
            )
    canon = canonical_ids(tok)
    ordinary = tok.ordinary_ids  # ids that are bytes or merges
    spell = {i: byte_level_string(tok.vocab[i]) for i in ordinary}  # id -> vocab string
    vocab = {spell[i]: i for i in ordinary if i not in canon}  # str -> id
    for text, token_id in tok.special_tokens.items():
        vocab.setdefault(text, token_id)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(text, i) for text, i in tok.special_tokens.items()],
        "normalizer": None,
        "pre_tokenizer": _pre_tokenizer(tok),
        "post_processor": None,
        "decoder": _byte_level(),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[spell[left], spell[right]] for left, right, _ in canonical_merges(tok)],
        },
    }


def to_hf_json(tok: Tokenizer, *, strict: bool = False) -> str:
    """The HuggingFace `tokenizer.json` text for a naive or chunked tokeniser.

    `tokenizers.Tokenizer.from_str(result).encode(text).ids` equals
    `tok.encode(text, allowed_special="all")`, except where two ids share their bytes (see
    `duplicate_tokens`; the export keeps the first) or a special token is spelled like an
    ordinary byte-level token (`special_token_clashes`). With `strict=True` those cases raise
    ExportError instead. Words-mode tokenisers raise ExportError (a ValueError).

    >>> tok = Tokenizer(mode="naive", merges=[(97, 97, 256)], special_tokens={"<eot>": 257})
    >>> data = json.loads(to_hf_json(tok))
    >>> data["model"]["merges"], data["added_tokens"][0]["id"]
    ([['a', 'a']], 257)
    """
    return json.dumps(to_hf_dict(tok, strict=strict), ensure_ascii=False, indent=2)


def write_hf(tok: Tokenizer, out_path: str | os.PathLike[str], *, strict: bool = False) -> Path:
    """Write `to_hf_json(tok)` to out_path (UTF-8) and return the path written."""
    target = Path(out_path)
    target.write_text(to_hf_json(tok, strict=strict), encoding="utf-8")
    return target


def _pre_tokenizer(tok: Tokenizer) -> dict[str, Any]:
    byte_level = _byte_level()
    mode = tok.mode_object
    pattern = mode.split_pattern(tok.pattern)
    if pattern == NAIVE_PATTERN and not mode.uses_pattern:
        return byte_level  # the whole text is one piece: nothing to split (naive mode)
    split = {
        "type": "Split",
        "pattern": {"Regex": pattern},
        "behavior": "Removed",
        "invert": True,
    }
    return {"type": "Sequence", "pretokenizers": [split, byte_level]}


def _byte_level() -> dict[str, Any]:
    return {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }


def _added_token(text: str, token_id: int) -> dict[str, Any]:
    return {
        "id": token_id,
        "content": text,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }
