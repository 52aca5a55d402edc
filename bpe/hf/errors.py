"""The one error of the HF components: a part of a tokenizer.json that is not reproduced."""

from __future__ import annotations

from typing import Any


class Unsupported(Exception):
    """`part` (e.g. "the Precompiled normalizer") is not reproduced, for the reason `why`."""

    def __init__(self, part: str, why: str) -> None:
        super().__init__(f"{part} is not supported: {why}")
        self.part = part
        self.why = why


class Malformed(Exception):
    """A component's JSON that is not what `tokenizers` itself would read."""


def type_of(raw: Any) -> str:
    return str(raw.get("type", "untyped")) if isinstance(raw, dict) else type(raw).__name__


def pattern_regex(raw: Any, where: str) -> str:
    """The regex of a `{"String": s}` or `{"Regex": r}` pattern (a string pattern is literal)."""
    import regex

    if isinstance(raw, dict) and isinstance(raw.get("Regex"), str):
        return str(raw["Regex"])
    if isinstance(raw, dict) and isinstance(raw.get("String"), str):
        return str(regex.escape(raw["String"]))
    raise Malformed(f"{where} needs a String or Regex pattern")
