"""The project's own tokeniser file: versioned JSON that round-trips exactly.

Documented top-level keys (a public contract: keys may be added, never renamed):
- `format`: always "bpe-workbench.tokenizer"; `version`: 1.
- `mode`: "naive", "chunked" or "words".
- `pattern`: the split regex (chunked mode), otherwise null.
- `merges`: a list of [left_id, right_id, new_id] in learned order.
- `special_tokens`: {token: id}.
- `alphabet`: words mode's characters in id order, otherwise null.
- `training`: how it was trained (trainer, vocab_size, min_frequency, initial_tokens,
  merge_counts, tokens_after, seconds), or null.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bpe.model import END_OF_WORD, MODES, UNKNOWN, Tokenizer, TrainingStats
from bpe.patterns import compile_pattern

FORMAT_NAME = "bpe-workbench.tokenizer"
FORMAT_VERSION = 1


class TokenizerFileError(ValueError):
    """A tokeniser file that is unreadable, foreign or inconsistent; the message says which."""


def to_dict(tok: Tokenizer) -> dict[str, Any]:
    training = None
    if tok.training is not None:
        t = tok.training
        training = {
            "trainer": t.trainer,
            "vocab_size": t.vocab_size,
            "min_frequency": t.min_frequency,
            "initial_tokens": t.initial_tokens,
            "merge_counts": list(t.merge_counts),
            "tokens_after": list(t.tokens_after),
            "seconds": t.seconds,
        }
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "mode": tok.mode,
        "pattern": tok.pattern,
        "merges": [[left, right, new] for left, right, new in tok.merges],
        "special_tokens": dict(tok.special_tokens),
        "alphabet": list(tok.alphabet) if tok.alphabet is not None else None,
        "training": training,
    }


def dumps(tok: Tokenizer) -> str:
    return json.dumps(to_dict(tok), ensure_ascii=False, separators=(",", ":"))


def save(tok: Tokenizer, path: str | os.PathLike[str]) -> None:
    """Write the tokeniser's JSON file (through a temporary file, so a crash leaves no half)."""
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(dumps(tok), encoding="utf-8")
    os.replace(temporary, target)


def load(path: str | os.PathLike[str]) -> Tokenizer:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TokenizerFileError(f"cannot read {path}: {exc.strerror}") from None
    return loads(raw, source=str(path))


def loads(raw: str | bytes, *, source: str = "the tokeniser file") -> Tokenizer:
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        raise TokenizerFileError(f"{source} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise TokenizerFileError(
            f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    return from_dict(data, source=source)


def from_dict(data: Any, *, source: str = "the tokeniser file") -> Tokenizer:
    """Build a Tokenizer from the JSON structure, checking every field it relies on."""

    def fail(problem: str) -> TokenizerFileError:
        return TokenizerFileError(f"{source}: {problem}")

    if not isinstance(data, dict):
        raise fail("expected a JSON object at the top level")
    if data.get("format") != FORMAT_NAME:
        if "model" in data and "pre_tokenizer" in data:
            raise fail("this is a HuggingFace tokenizer.json, not a BPE Workbench tokeniser")
        raise fail(f'not a BPE Workbench tokeniser (no "format": "{FORMAT_NAME}")')
    if data.get("version") != FORMAT_VERSION:
        raise fail(f"unsupported version {data.get('version')!r}; this library reads version 1")
    mode = data.get("mode")
    if mode not in MODES:
        raise fail(f"mode must be one of {', '.join(MODES)}, not {mode!r}")

    pattern = data.get("pattern")
    if mode == "chunked":
        if not isinstance(pattern, str) or not pattern:
            raise fail("a chunked tokeniser needs its split pattern (a string)")
        try:
            compile_pattern(pattern)
        except ValueError as exc:
            raise fail(str(exc)) from None
    elif pattern is not None:
        raise fail(f"pattern must be null in {mode} mode")

    alphabet = data.get("alphabet")
    if mode == "words":
        if not isinstance(alphabet, list) or not all(
            isinstance(c, str) and len(c) == 1 for c in alphabet
        ):
            raise fail("a words tokeniser needs its alphabet (a list of single characters)")
        if len(set(alphabet)) != len(alphabet):
            raise fail("the alphabet repeats a character")
        base = len(alphabet) + 1
    else:
        if alphabet is not None:
            raise fail(f"alphabet must be null in {mode} mode")
        base = 256

    merges = _check_merges(data.get("merges"), base, fail)
    specials = _check_specials(data.get("special_tokens"), base + len(merges), mode, fail)
    training = _check_training(data.get("training"), len(merges), fail)
    return Tokenizer(
        mode=mode,
        merges=merges,
        special_tokens=specials,
        pattern=pattern,
        alphabet=alphabet,
        training=training,
    )


# Builds the error that names the file and the problem (see load's `fail`).
_Fail = Callable[[str], TokenizerFileError]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_merges(raw: Any, base: int, fail: _Fail) -> list[tuple[int, int, int]]:
    if not isinstance(raw, list):
        raise fail("merges must be a list of [left_id, right_id, new_id]")
    merges: list[tuple[int, int, int]] = []
    for k, entry in enumerate(raw):
        if not (isinstance(entry, list) and len(entry) == 3 and all(map(_is_int, entry))):
            raise fail(f"merge {k} is not [left_id, right_id, new_id] integers: {entry!r}")
        left, right, new = entry
        if new != base + k:
            raise fail(f"merge {k} should create id {base + k}, not {new}")
        if not (0 <= left < new and 0 <= right < new):
            raise fail(f"merge {k} uses an id that does not exist yet: {entry!r}")
        merges.append((left, right, new))
    if len({(m[0], m[1]) for m in merges}) != len(merges):
        raise fail("the same pair is merged twice")
    return merges


def _check_specials(raw: Any, first_id: int, mode: str, fail: _Fail) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise fail("special_tokens must be an object {token: id}")
    specials: dict[str, int] = {}
    for i, (token, token_id) in enumerate(raw.items()):
        if not token or not _is_int(token_id):
            raise fail(f"special token {token!r} needs a non-empty name and an integer id")
        if token_id != first_id + i:
            raise fail(
                f"special token {token!r} has id {token_id}; special tokens take the ids right"
                f" after the last merge, so it should be {first_id + i}"
            )
        specials[token] = token_id
    if mode == "words" and UNKNOWN not in specials:
        raise fail(f"a words tokeniser needs the {UNKNOWN!r} special token")
    if END_OF_WORD in specials and mode == "words":
        raise fail(f"{END_OF_WORD!r} cannot be a special token in words mode")
    return specials


def _check_training(raw: Any, merge_count: int, fail: _Fail) -> TrainingStats | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise fail("training must be an object or null")
    try:
        stats = TrainingStats(
            trainer=str(raw["trainer"]),
            vocab_size=int(raw["vocab_size"]),
            min_frequency=int(raw["min_frequency"]),
            initial_tokens=int(raw["initial_tokens"]),
            merge_counts=[int(x) for x in raw["merge_counts"]],
            tokens_after=[int(x) for x in raw["tokens_after"]],
            seconds=None if raw.get("seconds") is None else float(raw["seconds"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise fail(f"training is incomplete or malformed ({exc!r})") from None
    if len(stats.merge_counts) != merge_count or len(stats.tokens_after) != merge_count:
        raise fail("training.merge_counts and training.tokens_after need one entry per merge")
    return stats
