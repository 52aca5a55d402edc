"""Split patterns for `chunked` training: the text is cut into chunks and no merge crosses one.

The patterns are compiled with the third-party `regex` module, which knows Unicode property
classes (`\\p{L}`) and possessive quantifiers that the standard `re` module lacks.
"""

from __future__ import annotations

import bisect
import itertools
import re
from functools import lru_cache

import regex

# GPT-2's pattern (OpenAI's `r50k_base`).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# GPT-4's pattern (OpenAI's `cl100k_base`), spelled with possessive quantifiers.
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
    r"""|\s*[\r\n]|\s+(?!\S)|\s+"""
)

# Naive tokenisers never split: one piece is the whole text between special tokens. Spelled as a
# pattern for peers that always split (tiktoken's `pat_str`, the exports).
NAIVE_PATTERN = r"[\s\S]+"

NAMED_PATTERNS: dict[str, str] = {"gpt4": GPT4_PATTERN, "gpt2": GPT2_PATTERN}  # name -> regex

# The same two patterns for text that is all ASCII, spelled for the standard `re` module, which
# splits such text ~2x faster than `regex`. On ASCII characters `regex` gives \p{L} = [A-Za-z],
# \p{N} = [0-9] and \s = [\t\n\v\f\r ] (tests/test_encoding.py checks all 128); `re`'s own \s
# would add \x1c-\x1f, so the classes are written out. Python 3.11's `re` has the possessive
# quantifiers, and both engines take the first alternative that matches, so on ASCII text the
# matches are the same (hypothesis-tested against `regex` there too).
_S = r"\t\n\x0b\x0c\r "
_ASCII_TWINS: dict[str, str] = {
    GPT4_PATTERN: (
        rf"""'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]+|[0-9]{{1,3}}"""
        rf"""| ?[^{_S}A-Za-z0-9]++[\r\n]*|[{_S}]*[\r\n]|[{_S}]+(?![^{_S}])|[{_S}]+"""
    ),
    GPT2_PATTERN: (
        rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^{_S}A-Za-z0-9]+"""
        rf"""|[{_S}]+(?![^{_S}])|[{_S}]+"""
    ),
}

# OpenAI's own `pat_str`s as tiktoken ships them (npm tiktoken 1.0.22): what imports of their
# rank files split with. Written out rather than reusing GPT4_PATTERN, which is an equivalent
# possessive spelling: an import must split with exactly the regex the encoding defines.
R50K_PAT_STR = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


def resolve_pattern(name_or_regex: str) -> str:
    """Return the regex for a pattern name (`gpt4`, `gpt2`) or check and return a custom regex.

    >>> resolve_pattern("gpt2") == GPT2_PATTERN
    True
    """
    if name_or_regex in NAMED_PATTERNS:
        return NAMED_PATTERNS[name_or_regex]
    if not name_or_regex:
        raise ValueError("the split pattern is empty; give 'gpt4', 'gpt2' or a regex")
    compile_pattern(name_or_regex)
    return name_or_regex


def pattern_name(pattern: str | None) -> str | None:
    """The short name of a known pattern, `custom` for any other regex, None for no pattern."""
    if pattern is None:
        return None
    for name, known in NAMED_PATTERNS.items():
        if pattern == known:
            return name
    return "custom"


@lru_cache(maxsize=32)
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile a split regex, turning the module's error into a ValueError that says what to fix."""
    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"the split pattern is not a valid regex: {exc}") from None
    return compiled


def split_chunks(text: str, pattern: str) -> list[str]:
    """Cut text into chunks with the pattern; characters no alternative matches are dropped.

    Dropping unmatched text is what tiktoken does too. Whole matches are taken (not groups), so a
    custom pattern with capturing groups still yields whole chunks; empty matches are skipped.
    """
    twin = _ascii_twin(pattern)
    if twin is not None and text.isascii():  # no empty matches, no groups: findall's list is it
        return twin.findall(text)
    if twin is not None and len(text.encode("utf-8")) - len(text) <= len(text) // 32:
        chunks = _split_by_stand_ins(text, twin)  # mostly ASCII: code, English with a few “”
        if chunks is not None:
            return chunks
    compiled = compile_pattern(pattern)
    if compiled.groups == 0:  # findall gives whole matches then, and is much faster
        return list(filter(None, compiled.findall(text)))
    return [m.group() for m in compiled.finditer(text) if m.end() > m.start()]


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# What the two patterns ask of a character, and a candidate ASCII stand-in for each kind.
_CLASSES = [regex.compile(c) for c in (r"\p{L}", r"\p{N}", r"\s", r"[\r\n ']", r"(?i:[sdmtlvre])")]
_CANDIDATES = "a0\t!"


@lru_cache(maxsize=65536)
def _stand_in(char: str) -> str:
    """An ASCII character in exactly the same classes as `char` (as `regex` decides them), or ""
    if none of the candidates is (a letter that matches s, d, m, t, l, v, r or e without case,
    such as U+017F)."""
    kinds = [bool(c.fullmatch(char)) for c in _CLASSES]
    for candidate in _CANDIDATES:
        if [bool(c.fullmatch(candidate)) for c in _CLASSES] == kinds:
            return candidate
    return ""


def _split_by_stand_ins(text: str, twin: re.Pattern[str]) -> list[str] | None:
    """Split with an ASCII twin a copy of text in which each other character is replaced by an
    ASCII one of the same classes, and cut the text where the copy was cut: both patterns see a
    character only through its classes. None if a character has no stand-in."""
    stand_ins = _NON_ASCII.sub(_stand_in_match, text)
    if len(stand_ins) != len(text):  # a character without a stand-in was dropped
        return None
    chunks = twin.findall(stand_ins)
    ends = list(itertools.accumulate(map(len, chunks)))
    for match in _NON_ASCII.finditer(text):  # the few chunks that hold a stand-in
        at = bisect.bisect_right(ends, match.start())
        chunks[at] = text[ends[at - 1] if at else 0 : ends[at]]
    return chunks


def _stand_in_match(match: re.Match[str]) -> str:
    return _stand_in(match.group())


@lru_cache(maxsize=8)
def _ascii_twin(pattern: str) -> re.Pattern[str] | None:
    """The `re` spelling of a known pattern for all-ASCII text, None for other patterns."""
    twin = _ASCII_TWINS.get(pattern)
    return None if twin is None else re.compile(twin)
