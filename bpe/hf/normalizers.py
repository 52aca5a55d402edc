"""HF normalizers: each turns a string into the string the rest of the pipeline sees.

Supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace (String or
Regex), Sequence (of these, also empty). `tokenizers` lowercases one character at a time, so a
final sigma is lowercased as any other (Python's `str.lower` of a whole string would not).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from bpe.hf.errors import Unsupported, pattern_regex, type_of
from bpe.patterns import check_pattern, compile_pattern

Normalize = Callable[[str], str]


@dataclass(frozen=True)
class Normalizer:
    kind: str
    apply: Normalize

    def __call__(self, text: str) -> str:
        return self.apply(text)


def _unicode(form: Literal["NFC", "NFD", "NFKC", "NFKD"]) -> Normalize:
    def apply(text: str) -> str:
        return unicodedata.normalize(form, text)

    return apply


def _lowercase(text: str) -> str:
    return text if text.islower() and text.isascii() else "".join(c.lower() for c in text)


def _strip(left: bool, right: bool) -> Normalize:
    # Rust's `char::is_whitespace` is the Unicode White_Space property.
    lead = compile_pattern(r"^\p{White_Space}+")
    trail = compile_pattern(r"\p{White_Space}+$")

    def apply(text: str) -> str:
        if left:
            text = lead.sub("", text)
        if right:
            text = trail.sub("", text)
        return text

    return apply


_MARKS = compile_pattern(r"\p{M}")


def _strip_accents(text: str) -> str:
    return _MARKS.sub("", text)


def _prepend(prefix: str) -> Normalize:
    def apply(text: str) -> str:
        return prefix + text if text else text

    return apply


def _replace(raw: dict[str, Any]) -> Normalize:
    regex_text = pattern_regex(raw.get("pattern"), "a Replace normalizer")
    try:  # a regex from a stranger's file: checked as every pattern entering the site is
        pattern = check_pattern(regex_text)
    except ValueError as exc:
        raise Unsupported(f"the Replace regex {regex_text!r:.60}", str(exc)) from None
    content = str(raw.get("content", ""))

    def apply(text: str) -> str:
        return pattern.sub(lambda _match: content, text)

    return apply


def _sequence(steps: list[Normalizer]) -> Normalize:
    def apply(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return apply


def build_normalizer(raw: Any) -> Normalizer | None:
    """The normalizer a file's `normalizer` JSON describes; None for none (or an empty
    Sequence, which changes nothing)."""
    if raw is None:
        return None
    kind = type_of(raw)
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return Normalizer(kind, _unicode(cast(Literal["NFC", "NFD", "NFKC", "NFKD"], kind)))
    if kind == "Lowercase":
        return Normalizer(kind, _lowercase)
    if kind == "Strip":
        return Normalizer(
            kind, _strip(bool(raw.get("strip_left", True)), bool(raw.get("strip_right", True)))
        )
    if kind == "StripAccents":
        return Normalizer(kind, _strip_accents)
    if kind == "Prepend":
        return Normalizer(kind, _prepend(str(raw.get("prepend", ""))))
    if kind == "Replace":
        return Normalizer(kind, _replace(raw))
    if kind == "Sequence":
        built = [build_normalizer(step) for step in raw.get("normalizers") or []]
        steps = [step for step in built if step is not None]
        if not steps:
            return None
        return steps[0] if len(steps) == 1 else Normalizer(kind, _sequence(steps))
    raise Unsupported(
        f"the {kind} normalizer",
        "imports take NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace "
        "and Sequence",
    )
