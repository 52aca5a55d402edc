"""HF pre-tokenizers: each cuts the words it is given into smaller words (and may rewrite them).

Supported: ByteLevel (add_prefix_space, use_regex), Split (String or Regex pattern, every
behavior, invert), Metaspace (replacement, prepend_scheme, split), Whitespace, WhitespaceSplit,
Punctuation, Digits (individual_digits), CharDelimiterSplit and Sequence.

A word is `(text, origin)`: `origin` counts the word's leading characters that stand for the
input's first character (`tokenizers` aligns every character to the original text, and a
prepended `▁` or space takes the alignment of the character it is put before). Metaspace's
`prepend_scheme="first"` prepends to the words with `origin > 0`. Empty words are dropped after
every step, as `tokenizers` drops them.

How a split keeps its pieces (`tokenizers`' SplitDelimiterBehavior), for the matches of a
pattern and the stretches between them:
- Removed: the stretches only; Isolated: matches and stretches, each its own word;
- MergedWithPrevious / MergedWithNext: a match joins the stretch before / after it;
- Contiguous: neighbouring matches form one word (as do neighbouring stretches).
`invert` swaps which pieces count as matches before the behavior applies.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import regex

from bpe.byte_level import bytes_to_unicode
from bpe.hf.errors import Malformed, Unsupported, pattern_regex, type_of
from bpe.patterns import BUILT_IN_PATTERNS, check_pattern, compile_pattern, finditer_bounded
from bpe.pretokenize import BYTE_LEVEL_PATTERN

Word = tuple[str, int]  # (text, how many leading characters stand for the input's first)
Span = tuple[int, int, bool]  # (start, end, is a match)
BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")

# Every byte as a Latin-1 character -> its byte-level character, for str.translate.
_BYTE_LEVEL_TABLE = dict(bytes_to_unicode())


def byte_level_chars(text: str) -> str:
    """How HF's ByteLevel spells a string: each UTF-8 byte as its alphabet character."""
    return text.encode("utf-8").decode("latin-1").translate(_BYTE_LEVEL_TABLE)


def find_spans(text: str, pattern: regex.Pattern[str]) -> list[Span]:
    """Matches and the stretches between them, covering `text`; empty matches are skipped."""
    spans: list[Span] = []
    previous = 0
    for match in finditer_bounded(pattern.pattern, text):  # a file's regex: time-limited
        start, end = match.span()
        if start == end:
            continue
        if start > previous:
            spans.append((previous, start, False))
        spans.append((start, end, True))
        previous = end
    if previous < len(text):
        spans.append((previous, len(text), False))
    return spans


def apply_behavior(spans: list[Span], behavior: str) -> list[tuple[int, int]]:
    """The (start, end) of the words a behavior keeps."""
    if behavior == "Removed":
        return [(s, e) for s, e, is_match in spans if not is_match]
    if behavior == "Isolated":
        return [(s, e) for s, e, _ in spans]
    kept: list[list[int]] = []
    if behavior == "MergedWithNext":
        previous_match = False
        for s, e, is_match in reversed(spans):
            if is_match and not previous_match and kept:
                kept[-1][0] = s
            else:
                kept.append([s, e])
            previous_match = is_match
        kept.reverse()
        return [(s, e) for s, e in kept]
    previous_match = False
    for s, e, is_match in spans:
        joins = (
            is_match and not previous_match
            if behavior == "MergedWithPrevious"
            else is_match == previous_match  # Contiguous
        )
        if joins and kept:
            kept[-1][1] = e
        else:
            kept.append([s, e])
        previous_match = is_match
    return [(s, e) for s, e in kept]


@dataclass(frozen=True)
class Splitter:
    """Cut by a pattern's matches with a behavior (Split, and the fixed ones built on it)."""

    pattern: regex.Pattern[str]
    behavior: str
    invert: bool = False

    def __call__(self, word: Word) -> list[Word]:
        text, origin = word
        if self._isolating is not None:
            return _isolated_words(self._isolating, text, origin)
        spans = find_spans(text, self.pattern)
        if self.invert:
            spans = [(s, e, not m) for s, e, m in spans]
        return [
            (text[s:e], max(0, min(origin, e) - s)) for s, e in apply_behavior(spans, self.behavior)
        ]

    @cached_property
    def _isolating(self) -> regex.Pattern[str] | None:
        """The pattern in one capturing group, when `split` by it gives this step's words: an
        Isolated, not inverted split by a built-in pattern (every alternative of each takes at
        least one character and none captures, so there is no empty match to skip and the
        pieces are exactly the matches and the stretches between them). Its matching runs in C
        instead of a Python step per match (Qwen 3 on English: ~3 words in 4 characters)."""
        pattern = self.pattern.pattern
        if self.behavior != "Isolated" or self.invert or pattern not in BUILT_IN_PATTERNS:
            return None
        grouped = compile_pattern(f"({pattern})")
        return grouped if grouped.groups == 1 else None


def _isolated_words(grouped: regex.Pattern[str], text: str, origin: int) -> list[Word]:
    words = list(zip(filter(None, grouped.split(text)), itertools.repeat(0)))
    start = 0
    for k, (piece, _) in enumerate(words):  # the words holding the input's first characters
        if start >= origin:
            break
        words[k] = (piece, min(origin, start + len(piece)) - start)
        start += len(piece)
    return words


@dataclass(frozen=True)
class ByteLevel:
    add_prefix_space: bool
    use_regex: bool

    def __call__(self, word: Word) -> list[Word]:
        text, origin = word
        if self.add_prefix_space and not text.startswith(" "):
            text = " " + text
            origin = origin + 1 if origin else 0
        pieces = [(text, origin)]
        if self.use_regex:
            pieces = _GPT2_SPLIT((text, origin))
        return [
            (byte_level_chars(piece), len(piece[:first].encode("utf-8"))) for piece, first in pieces
        ]


@dataclass(frozen=True)
class Metaspace:
    replacement: str
    prepend_scheme: str  # "always", "first" or "never"
    split: bool

    def __call__(self, word: Word) -> list[Word]:
        text, origin = word
        text = text.replace(" ", self.replacement)
        prepend = self.prepend_scheme == "always" or (self.prepend_scheme == "first" and origin)
        if prepend and not text.startswith(self.replacement):
            text = self.replacement + text
            origin = origin + 1 if origin else 0
        if not self.split:
            return [(text, origin)]
        return Splitter(_char_pattern(self.replacement), "MergedWithNext")((text, origin))


def _char_pattern(char: str) -> regex.Pattern[str]:
    return compile_pattern(regex.escape(char))


_GPT2_SPLIT = Splitter(compile_pattern(BYTE_LEVEL_PATTERN), "Isolated")
# `tokenizers`' Whitespace keeps runs of word characters and runs of other non-space ones.
_WHITESPACE = Splitter(compile_pattern(r"\w+|[^\w\s]+"), "Removed", invert=True)
_WHITESPACE_SPLIT = Splitter(compile_pattern(r"\p{White_Space}+"), "Removed")
# Rust's is_ascii_punctuation or Unicode's punctuation categories, one character per match.
_PUNCTUATION = r"[\p{P}\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]"
_DIGIT = r"\p{N}"  # Rust's char::is_numeric: Nd, Nl, No

PreTokenize = Callable[[Word], list[Word]]


@dataclass(frozen=True)
class PreTokenizerChain:
    """The steps of a pre-tokenizer (one, or a Sequence's), run in order over the words."""

    steps: tuple[PreTokenize, ...]

    def words(self, text: str, origin: int) -> list[str]:
        return [w for w, _ in self.run([(text, origin)])]

    def run(self, words: Iterable[Word]) -> list[Word]:
        current = [w for w in words if w[0]]
        for step in self.steps:
            current = [piece for w in current for piece in step(w) if piece[0]]
        return current


def _split(raw: dict[str, Any]) -> Splitter:
    behavior = raw.get("behavior")
    if behavior not in BEHAVIORS:
        raise Malformed(f"a Split pre-tokenizer's behavior must be one of {BEHAVIORS}")
    regex_text = pattern_regex(raw.get("pattern"), "a Split pre-tokenizer")
    try:  # a regex from a stranger's file: checked as every pattern entering the site is
        pattern = (
            compile_pattern(regex_text)
            if regex_text in BUILT_IN_PATTERNS
            else check_pattern(regex_text)
        )
    except ValueError as exc:
        raise Unsupported(f"the Split regex {regex_text!r:.60}", str(exc)) from None
    return Splitter(pattern, str(behavior), bool(raw.get("invert", False)))


def _metaspace(raw: dict[str, Any]) -> Metaspace:
    scheme = raw.get("prepend_scheme")
    if scheme is None:  # files from before prepend_scheme said add_prefix_space
        scheme = "always" if raw.get("add_prefix_space", True) else "never"
    if scheme not in ("always", "first", "never"):
        raise Malformed("Metaspace's prepend_scheme must be always, first or never")
    replacement = str(raw.get("replacement", "\u2581"))
    if len(replacement) != 1:
        raise Malformed("Metaspace's replacement must be one character")
    return Metaspace(replacement, str(scheme), bool(raw.get("split", True)))


def _steps(raw: Any) -> list[PreTokenize]:
    kind = type_of(raw)
    if kind == "Sequence":
        return [step for part in raw.get("pretokenizers") or [] for step in _steps(part)]
    if kind == "ByteLevel":
        return [
            ByteLevel(bool(raw.get("add_prefix_space", True)), bool(raw.get("use_regex", True)))
        ]
    if kind == "Split":
        return [_split(raw)]
    if kind == "Metaspace":
        return [_metaspace(raw)]
    if kind == "Whitespace":
        return [_WHITESPACE]
    if kind == "WhitespaceSplit":
        return [_WHITESPACE_SPLIT]
    if kind == "Punctuation":
        behavior = raw.get("behavior", "Isolated")
        if behavior not in BEHAVIORS:
            raise Malformed(f"a Punctuation pre-tokenizer's behavior must be one of {BEHAVIORS}")
        return [Splitter(compile_pattern(_PUNCTUATION), str(behavior))]
    if kind == "Digits":
        individual = bool(raw.get("individual_digits", False))
        return [Splitter(compile_pattern(_DIGIT), "Isolated" if individual else "Contiguous")]
    if kind == "CharDelimiterSplit":
        delimiter = raw.get("delimiter")
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise Malformed("CharDelimiterSplit's delimiter must be one character")
        return [Splitter(_char_pattern(delimiter), "Removed")]
    raise Unsupported(
        f"the {kind} pre-tokenizer",
        "imports take ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Punctuation, "
        "Digits, CharDelimiterSplit and Sequence",
    )


def build_pre_tokenizer(raw: Any) -> PreTokenizerChain | None:
    """The pre-tokenizer a file's `pre_tokenizer` JSON describes; None for none."""
    if raw is None:
        return None
    return PreTokenizerChain(tuple(_steps(raw)))
