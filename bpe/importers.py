"""Import a foreign tokeniser file, whichever kind it is: a tiktoken rank file (with its JSON
sidecar or a named pattern) or a HuggingFace `tokenizer.json`.

`import_bytes` is for callers holding the file's bytes (the web app); `import_path` reads files
and finds a tiktoken file's sidecar beside it (`NAME.tiktoken` -> `NAME.tiktoken.json`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from bpe.formats import FORMAT_NAME, TokenizerFileError
from bpe.import_hf import UnsupportedTokenizer, from_hf_data
from bpe.import_tiktoken import PRESETS, from_tiktoken, parse_sidecar
from bpe.model import Tokenizer

__all__ = [
    "PRESETS",
    "TokenizerFileError",
    "UnsupportedTokenizer",
    "detect_format",
    "import_bytes",
    "import_path",
]

FileKind = Literal["tiktoken", "hf"]


def detect_format(raw: bytes, *, filename: str = "the file") -> FileKind:
    """ "hf" for a tokenizer.json, "tiktoken" for a rank file; a clear error for the JSON files
    that are neither (a sidecar, our own tokeniser file)."""
    return _sniff(raw, filename)[0]


def _starts_like_json(raw: bytes) -> bool:
    return raw.lstrip()[:1] in (b"{", b"[")


def _sniff(raw: bytes, filename: str) -> tuple[FileKind, Any]:
    """The kind of file, and for a tokenizer.json its parsed JSON (parsed once: gpt-oss's is
    27 MB, and each parse took ~0.5 s)."""
    if not _starts_like_json(raw):
        return "tiktoken", None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise TokenizerFileError(f"{filename} starts like JSON but is not valid JSON") from None
    if isinstance(data, dict) and data.get("format") == FORMAT_NAME:
        raise TokenizerFileError(
            f"{filename} is already a BPE Workbench tokeniser: use it as it is, no import needed"
        )
    if isinstance(data, dict) and "pat_str" in data:
        raise TokenizerFileError(
            f"{filename} is a tiktoken sidecar (pattern and special tokens); import the "
            ".tiktoken rank file it describes, with this file beside it"
        )
    if isinstance(data, dict) and "model" in data:
        return "hf", data
    raise TokenizerFileError(
        f"{filename} is JSON but neither a HuggingFace tokenizer.json nor a tiktoken sidecar"
    )


def import_bytes(
    raw: bytes,
    *,
    filename: str,
    sidecar: bytes | None = None,
    pattern: str | None = None,
) -> Tokenizer:
    """A Tokenizer from a file's bytes. `sidecar` and `pattern` apply to tiktoken files only."""
    kind, data = _sniff(raw, filename)
    if kind == "hf":
        if pattern:
            raise TokenizerFileError(
                f"{filename} is a tokenizer.json, which carries its own pre-tokenizer: "
                "give no pattern"
            )
        return from_hf_data(data, raw, filename=filename)
    meta = parse_sidecar(sidecar, source=f"the sidecar of {filename}") if sidecar else None
    return from_tiktoken(raw, filename=filename, pattern=pattern, sidecar=meta)


def import_path(
    path: str | os.PathLike[str],
    *,
    sidecar: str | os.PathLike[str] | None = None,
    pattern: str | None = None,
) -> Tokenizer:
    """Import a file; for a rank file without `sidecar`, `PATH.json` is used when it exists.

    Giving the sidecar itself (`NAME.tiktoken.json`) imports the rank file it sits beside.
    """
    given = Path(path)
    if given.name.endswith(".tiktoken.json") and sidecar is None:
        sidecar, given = given, given.with_name(given.name.removesuffix(".json"))
    raw = _read(given)
    side_raw = None
    if sidecar is not None:
        side_raw = _read(Path(sidecar))
    elif not _starts_like_json(raw):  # a rank file (JSON is checked by import_bytes)
        beside = given.with_name(given.name + ".json")
        if beside.is_file():
            side_raw = _read(beside)
    return import_bytes(raw, filename=given.name, sidecar=side_raw, pattern=pattern)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TokenizerFileError(f"cannot read {path}: {exc.strerror}") from None
