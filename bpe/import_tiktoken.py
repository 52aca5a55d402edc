"""Import a tiktoken rank file (`base64(bytes) rank` per line) as a Tokenizer with its own ids.

A rank file holds the tokens only. The split pattern and the special tokens come from, in this
order: a preset named with `pattern=` (`gpt2`, `cl100k`, `o200k`: OpenAI's `pat_str`, plus that
encoding's special tokens when the file has that encoding's number of ranks), a regex given
with `pattern=`, or the JSON sidecar beside the file (our own export's `OUT.tiktoken.json`, or
the reference script's `NAME.tiktoken.json`; both have `pat_str` and `special_tokens`).

The result encodes by tiktoken's rule (`bpe.rank_rule`), ids are ranks, and its merges are
derived from the ranks for display.
"""

from __future__ import annotations

import binascii
import hashlib
import json
from typing import Any

from bpe.formats import TokenizerFileError
from bpe.model import ImportSource, Tokenizer
from bpe.patterns import (
    BUILT_IN_PATTERNS,
    CL100K_PAT_STR,
    O200K_PAT_STR,
    R50K_PAT_STR,
    check_pattern,
)
from bpe.rank_rule import derive_merges

# name -> (pat_str, special tokens, number of ranks in OpenAI's file)
PRESETS: dict[str, tuple[str, dict[str, int], int]] = {
    "gpt2": (R50K_PAT_STR, {"<|endoftext|>": 50256}, 50256),
    "cl100k": (
        CL100K_PAT_STR,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        100256,
    ),
    "o200k": (O200K_PAT_STR, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}, 199998),
}
PRESET_ALIASES = {"r50k": "gpt2", "r50k_base": "gpt2", "cl100k_base": "cl100k", "gpt4": "cl100k"}
PRESET_ALIASES |= {"o200k_base": "o200k", "gpt4o": "o200k"}


def quoted(data: bytes, limit: int = 60) -> str:
    r"""A line or token of a file as a reader sees it, for an error message: its text in
    quotes, bytes that are not UTF-8 and control characters as escapes (never Python's b'...').

    >>> print(quoted(b"not-base64! 1"), quoted(b"\xff\xfe ab\t"))
    'not-base64! 1' '\xff\xfe ab\u0009'
    """
    text = data[:limit].decode("utf-8", errors="backslashreplace")
    return "'" + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text) + "'"


def parse_rank_file(raw: bytes, *, source: str = "the rank file") -> dict[bytes, int]:
    """token bytes -> rank, naming the line at fault if anything is off."""
    ranks: dict[bytes, int] = {}
    seen_ranks: set[int] = set()
    # base64.b64decode(field, validate=True) is this call behind a Python wrapper that cost a
    # fifth of reading o200k_base's 200,000 lines.
    decode = binascii.a2b_base64
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError
            token = decode(fields[0], strict_mode=True)
            rank = int(fields[1])
        except (ValueError, binascii.Error):
            raise TokenizerFileError(
                f"{source}, line {number}: expected 'base64-token rank', got {quoted(line)}"
            ) from None
        if not token or rank < 0:
            raise TokenizerFileError(f"{source}, line {number}: empty token or negative rank")
        if token in ranks:
            shown = quoted(token, 40)
            raise TokenizerFileError(f"{source}, line {number}: token {shown} is repeated")
        if rank in seen_ranks:
            raise TokenizerFileError(f"{source}, line {number}: rank {rank} is repeated")
        ranks[token] = rank
        seen_ranks.add(rank)
    if not ranks:
        raise TokenizerFileError(f"{source} holds no tokens: is it a tiktoken rank file?")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise TokenizerFileError(
            f"{source} lacks {len(missing)} of the 256 single bytes (e.g. 0x{missing[0]:02x}); "
            "tiktoken's rule starts from single bytes, so every byte needs a rank"
        )
    return ranks


def parse_sidecar(raw: bytes | str, *, source: str = "the sidecar") -> dict[str, Any]:
    """`pat_str`, `special_tokens` and `name` from a tiktoken sidecar JSON, checked."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise TokenizerFileError(f"{source} is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("pat_str"), str):
        raise TokenizerFileError(
            f'{source} is not a tiktoken sidecar: it needs "pat_str" (the split regex)'
        )
    specials = data.get("special_tokens", {})
    if not isinstance(specials, dict) or not all(
        isinstance(k, str) and k and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in specials.items()
    ):
        raise TokenizerFileError(f'{source}: "special_tokens" must be {{"text": id >= 0}}')
    name = data.get("name")
    return {
        "pat_str": data["pat_str"],
        "special_tokens": dict(specials),
        "name": name if isinstance(name, str) else None,
    }


def check_given_pattern(
    pattern: str | None, sidecar: dict[str, Any] | None, *, filename: str
) -> str | None:
    """The split regex an import would use (`pattern`, a preset name or a regex, over the
    sidecar's `pat_str`), checked as every pattern entering the site is (`bpe.patterns`); a
    TokenizerFileError naming why if refused. Callers that queue the import for later (the web
    app) call it first, so a bad pattern is refused at once."""
    preset = PRESETS.get(PRESET_ALIASES.get(pattern, pattern)) if pattern else None
    pat_str: str | None = None
    if pattern and preset is not None:
        pat_str = preset[0]
    elif pattern:
        pat_str = pattern
    elif sidecar:
        pat_str = sidecar["pat_str"]
    if pat_str is not None and pat_str not in BUILT_IN_PATTERNS:
        try:
            check_pattern(pat_str)
        except ValueError as exc:
            raise TokenizerFileError(f"{filename}: {exc}") from None
    return pat_str


def from_tiktoken(
    raw: bytes,
    *,
    filename: str,
    pattern: str | None = None,
    sidecar: dict[str, Any] | None = None,
) -> Tokenizer:
    """A Tokenizer from a rank file's bytes; `sidecar` is what `parse_sidecar` returns.

    `pattern` is a preset name (see PRESETS) or a regex; it wins over the sidecar's pattern.
    """
    name = sidecar.get("name") if sidecar else None
    specials = dict(sidecar["special_tokens"]) if sidecar else {}
    preset = PRESETS.get(PRESET_ALIASES.get(pattern, pattern)) if pattern else None
    if pattern and preset is not None:
        name = name or PRESET_ALIASES.get(pattern, pattern)
    # before the rank file is read: a refused pattern costs nothing more
    pat_str = check_given_pattern(pattern, sidecar, filename=filename)
    ranks = parse_rank_file(raw, source=filename)
    if pat_str is None:
        raise TokenizerFileError(
            f"{filename} is a tiktoken rank file, which holds no split pattern: give the "
            f"pattern by name ({', '.join(PRESETS)}) or as a regex, or import it with its "
            "JSON sidecar"
        )
    if preset is not None and not specials and len(ranks) == preset[2]:
        specials = dict(preset[1])
    _check_specials(specials, ranks, filename)
    merges, _ = derive_merges(ranks)
    return Tokenizer(
        mode="chunked",
        merges=merges,
        special_tokens=specials,
        pattern=pat_str,
        rule="tiktoken",
        tokens={rank: token for token, rank in ranks.items()},
        source=ImportSource(
            format="tiktoken",
            filename=filename,
            sha256=hashlib.sha256(raw).hexdigest(),
            name=name,
        ),
    )


def _check_specials(specials: dict[str, int], ranks: dict[bytes, int], filename: str) -> None:
    taken = set(ranks.values())
    for text, token_id in specials.items():
        if token_id in taken:
            raise TokenizerFileError(
                f"{filename}: special token {text!r} has id {token_id}, which is already the "
                "rank of an ordinary token"
            )
    if len(set(specials.values())) != len(specials):
        raise TokenizerFileError(f"{filename}: two special tokens share an id")
