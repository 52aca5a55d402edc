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

This module also holds what both byte-level exports share: the mode check and the canonical ids.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any, Literal

from bpe.model import Tokenizer

ExportTarget = Literal["hf", "tiktoken"]
_TARGET_NAMES = {"hf": "HuggingFace tokenizer.json", "tiktoken": "tiktoken"}


class ExportError(ValueError):
    """A tokeniser this export cannot represent; the message says why and what to do."""


# ----- shared by both byte-level exports ---------------------------------------------------------
def check_exportable(tok: Tokenizer, *, target: ExportTarget) -> None:
    """Refuse modes the target cannot express: exports cover the byte-level modes only."""
    if tok.mode not in ("naive", "chunked"):
        raise ExportError(
            f"cannot export a {tok.mode!r} tokeniser to {_TARGET_NAMES[target]}: exports cover "
            "the byte-level modes only (naive, chunked); retrain with --mode chunked or naive"
        )


def duplicate_tokens(tok: Tokenizer) -> dict[bytes, list[int]]:
    """Byte strings that more than one id stands for, with those ids in ascending order.

    Special tokens are not counted: both exports keep them apart from the byte-level tokens.

    >>> tok = Tokenizer(mode="naive", merges=[(97, 98, 256), (98, 99, 257), (256, 99, 258),
    ...                                       (97, 257, 259)])
    >>> duplicate_tokens(tok)
    {b'abc': [258, 259]}
    """
    by_bytes: dict[bytes, list[int]] = {}  # bytes -> ids holding them
    vocab = tok.vocab
    for token_id in range(256 + len(tok.merges)):
        by_bytes.setdefault(vocab[token_id], []).append(token_id)
    return {b: ids for b, ids in by_bytes.items() if len(ids) > 1}


def canonical_ids(tok: Tokenizer) -> dict[int, int]:
    """id -> the first (lowest) id with the same bytes; only ids that differ are listed."""
    return {later: ids[0] for ids in duplicate_tokens(tok).values() for later in ids[1:]}


def canonical_merges(tok: Tokenizer) -> list[tuple[int, int, int]]:
    """The merges rewritten over canonical ids, in learned order.

    A merge whose rewritten pair repeats an earlier one is dropped (the earlier has the better
    rank, and a pair can only have one rank); it made the same bytes, so nothing else refers to
    an id the export does not have.
    """
    canon = canonical_ids(tok)
    seen: set[tuple[int, int]] = set()
    merges: list[tuple[int, int, int]] = []  # (left, right, new), canonical ids
    for left, right, new in tok.merges:
        pair = (canon.get(left, left), canon.get(right, right))
        if pair not in seen:
            seen.add(pair)
            merges.append((pair[0], pair[1], canon.get(new, new)))
    return merges


def export_warnings(tok: Tokenizer, *, target: ExportTarget) -> list[str]:
    """Plain-language lines on where the export will encode differently from us (none: [])."""
    check_exportable(tok, target=target)
    lines: list[str] = []
    groups = duplicate_tokens(tok)
    if groups:
        later = sum(len(ids) - 1 for ids in groups.values())
        example_bytes, example_ids = next(iter(groups.items()))
        lines.append(
            f"{later} token id(s) repeat the bytes of an earlier token (e.g. {example_ids} are all "
            f"{example_bytes!r}); {_TARGET_NAMES[target]} keeps one id per byte string, so the "
            "export uses the earliest and text we encode with a later one comes out differently"
        )
    if target == "hf":
        clashes = special_token_clashes(tok)
        if clashes:
            lines.append(
                f"special token(s) {sorted(clashes)} are spelled like ordinary tokens in HF's "
                "byte-level alphabet, so HF gives them the ordinary token's id"
            )
    if target == "tiktoken":
        from bpe.export_tiktoken import rank_rule_conflicts  # it imports this module

        conflicts = rank_rule_conflicts(tok)
        if conflicts:
            lines.append(
                f"{len(conflicts)} token(s) (e.g. id {conflicts[0]}) are cut differently by "
                "tiktoken's rule, which joins by the rank of the joined bytes rather than by "
                "learned pair, so text holding them can get other ids (see docs/exports.md)"
            )
    return lines


# ----- the HF file ---------------------------------------------------------------------------
@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table used by HF's ByteLevel components.

    Printable Latin-1 bytes stand for themselves; the other 68 (controls, space, 0x7f-0xa0,
    0xad) take the characters from U+0100 on, in byte order.

    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")]
    ('a', 'Ġ', 'Ċ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


def byte_level_string(data: bytes) -> str:
    """How HF's byte-level vocabulary spells a byte string."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in data)


def special_token_clashes(tok: Tokenizer) -> set[str]:
    """Special tokens whose text is also the byte-level spelling of an ordinary token.

    HF looks an added token up in the model's vocabulary by its text, so such a token would get
    the ordinary token's id (e.g. a naive tokeniser that learned the bytes `<|endoftext|>`).
    """
    spellings = {byte_level_string(tok.vocab[i]) for i in range(256 + len(tok.merges))}
    return {text for text in tok.special_tokens if text in spellings}


def to_hf_dict(tok: Tokenizer, *, strict: bool = False) -> dict[str, Any]:
    """The `tokenizer.json` structure; see `to_hf_json`."""
    check_exportable(tok, target="hf")
    if strict:
        problems = export_warnings(tok, target="hf")
        if problems:
            raise ExportError(
                "this tokeniser cannot be exported exactly: "
                + "; ".join(problems)
                + ". Export without strict to accept the difference."
            )
    canon = canonical_ids(tok)
    ordinary = range(256 + len(tok.merges))  # ids that are bytes or merges
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
    if tok.mode == "naive":
        return byte_level
    split = {
        "type": "Split",
        "pattern": {"Regex": tok.pattern},
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
