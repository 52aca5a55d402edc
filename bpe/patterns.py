"""Split patterns for `chunked` training: the text is cut into chunks and no merge crosses one.

The patterns are compiled with the third-party `regex` module, which knows Unicode property
classes (`\\p{L}`) and possessive quantifiers that the standard `re` module lacks.

A pattern comes from whoever trains or imports a tokeniser, so it is bounded three ways:
- `check_pattern_size` before anything compiles it: its length, each repetition count, and the
  repetitions' nested weight (`regex` writes `a{2000000}` out in full when it compiles, about
  250 bytes a repetition: `a{1000000000}` would take tens of gigabytes);
- `check_pattern` where a pattern enters (training, imports): the size check, then the pattern
  run under a time limit on texts made to make a backtracking engine blow up (`_probes`);
- every split of a pattern other than the built-in ones runs under a time limit
  (`split_seconds`: a base plus a budget per character, one budget for all the splits of one
  text), and `PatternTimeout` says so when it runs out.
"""

from __future__ import annotations

import bisect
import itertools
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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

# The Split regexes of the model files the site fetches (docs/imports.md) beyond OpenAI's (Llama
# 3 splits with CL100K_PAT_STR, gpt-oss with O200K_PAT_STR), exactly as their tokenizer.json
# files spell them: Qwen 3's is cl100k's with single digits; DeepSeek-V3 splits three times,
# digits in threes, runs of CJK and kana, then words, punctuation and spaces. The characters
# `\r` and `\n` inside DeepSeek's third are the real ones, as in its file.
QWEN3_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
DEEPSEEK_V3_PAT_STRS = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
    "|[^\r\n"
    r"\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+"
    "[\r\n]*|\\s*[\r\n]+|"
    r"\s+(?!\S)|\s+",
)

# The patterns this library ships, HF's ByteLevel split (R50K_PAT_STR again) and the fetched
# models' splits: they run in time linear in the text (tests/test_patterns_bounded.py holds
# them to the probe check), so their splits skip the time limit, which costs `regex` about half
# a microsecond a match (Qwen 3 on 300,000 characters of English: 84 ms of splitting against
# 29 ms untimed). A stranger's file that carries one of them exactly is as safe: the bound is
# a property of the regex, not of the file.
BUILT_IN_PATTERNS = frozenset(
    {GPT4_PATTERN, GPT2_PATTERN, NAIVE_PATTERN, R50K_PAT_STR, CL100K_PAT_STR, O200K_PAT_STR}
    | {QWEN3_PAT_STR, *DEEPSEEK_V3_PAT_STRS}
)

# ----- bounds on a pattern ----------------------------------------------------------------------
MAX_PATTERN_CHARS = 2_000  # the longest pattern OpenAI or a HF model we know ships is 274
MAX_REPEAT = 1_000  # the largest count in a `{m,n}` repetition
# The repetitions' nested weight: each character, class or escape weighs 1, a group what it
# holds, a `{m,n}` repetition max(m, n) times its atom. `regex` compiles about 250 bytes per
# unit (`(?:a{1000}){100}`, weight 100,000, took 39 MB), so this keeps a compile under ~5 MB.
MAX_PATTERN_WEIGHT = 10_000
# Every split of a text by a pattern other than the built-in ones: at most this many seconds of
# CPU time (what `regex` counts; on a loaded machine the wall-clock time is longer).
SPLIT_BASE_SECONDS = 1.0
SPLIT_SECONDS_PER_CHAR = 5e-6  # 25x what the GPT-4 pattern needs; 1,000 s for 200 MB
# The probe check at entry: each probe text, and all of them together.
PROBE_REPEATS = 1_024
PROBE_SECONDS = 0.1
PROBE_TOTAL_SECONDS = 1.0


class PatternError(ValueError):
    """A split pattern that this library will not run: refused, or out of time on a text."""


class PatternRefused(PatternError):
    """A pattern over a bound (length, repetition count, nested repetitions, time on probes)."""


class PatternTimeout(PatternError):
    """A split ran past its time limit (`split_seconds`): the pattern backtracks on this text."""

    def __init__(self, limit: float, n_chars: int) -> None:
        super().__init__(
            f"the split pattern took longer than its limit of {limit:.2f} s on {n_chars:,}"
            f" characters of text ({SPLIT_BASE_SECONDS:g} s + {SPLIT_SECONDS_PER_CHAR * 1e6:g}"
            " microseconds a character): it backtracks too much on this text. Rewrite it"
            " without nested or overlapping repetitions; a possessive `++` or an atomic group"
            " `(?>...)` stops the backtracking"
        )
        self.limit = limit
        self.n_chars = n_chars


def split_seconds(n_chars: int) -> float:
    """The time a split of n_chars characters of text may take.

    >>> split_seconds(0), split_seconds(200_000)
    (1.0, 2.0)
    """
    return SPLIT_BASE_SECONDS + SPLIT_SECONDS_PER_CHAR * n_chars


def check_pattern_size(pattern: str) -> None:
    """PatternRefused if the pattern is too long, repeats anything more than MAX_REPEAT times,
    or nests repetitions past MAX_PATTERN_WEIGHT: what makes `regex.compile` itself take
    memory and time. Nothing is compiled, so any text may be checked.

    >>> check_pattern_size(r"\\p{N}{1,3}")
    >>> check_pattern_size("a{2000000}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bpe.patterns.PatternRefused: the split pattern repeats something 2,000,000 times; ...
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternRefused(
            f"the split pattern is {len(pattern):,} characters long; at most"
            f" {MAX_PATTERN_CHARS:,} are allowed"
        )
    counts = _brace_numbers(pattern)
    if counts and max(counts) > MAX_REPEAT:
        raise PatternRefused(
            f"the split pattern repeats something {max(counts):,} times; at most"
            f" {MAX_REPEAT:,} are allowed"
        )
    if _LAYOUT_FLAGS.search(pattern):
        # Verbose mode's comments and version 1's nested sets change where groups and sets
        # end, so the structure is not read: every count is taken to nest inside every other.
        weight = len(pattern)
        for count in counts:
            weight *= max(count, 1)
    else:
        weight = _weight(pattern)
    if weight > MAX_PATTERN_WEIGHT:
        raise PatternRefused(
            f"the split pattern's repetitions nest too deep: written out it would be about"
            f" {weight:,} items long, and at most {MAX_PATTERN_WEIGHT:,} are allowed"
        )


def check_pattern(pattern: str) -> regex.Pattern[str]:
    """The check for a pattern that enters from outside (the train form, the API, a tiktoken
    sidecar, a tokenizer.json's Split): `check_pattern_size`, compiled, then run on probe texts
    under a time limit. Returns the compiled pattern; PatternRefused (a ValueError) says why not.

    The probes repeat the pattern's own characters and a few of each kind (letters, digits,
    spaces, punctuation) ~1,000 times, ending in a character that fails most patterns: that
    finds exponential backtracking such as `(a|a)+$` or `(\\w+\\s?)+$` and the worse polynomial
    kinds, in well under a second. It cannot prove a pattern fast on every text (a blow-up
    that needs text the probes do not hold passes); the time limit on every split is what
    bounds those.
    """
    compiled = compile_pattern(pattern)
    started = time.thread_time()
    for probe in _probes(pattern):
        left = PROBE_TOTAL_SECONDS - (time.thread_time() - started)
        try:
            if left <= 0:
                raise TimeoutError
            for _ in compiled.finditer(probe, timeout=min(PROBE_SECONDS, left)):
                pass
        except TimeoutError:
            shown = probe[:12] + ("..." if len(probe) > 12 else "")
            raise PatternRefused(
                f"the split pattern takes too long on some texts (more than"
                f" {min(PROBE_SECONDS, max(left, 0)):.2f} s on {len(probe):,} characters like"
                f" {shown!r}): it backtracks. Rewrite it without nested or overlapping"
                " repetitions; a possessive `++` or an atomic group `(?>...)` stops the"
                " backtracking"
            ) from None
    return compiled


def check_stored_pattern(pattern: str) -> None:
    """For a pattern read back from storage or a saved file: a ValueError if the regex does
    not compile. One over the size bounds (saved before they existed) is not compiled at all,
    so the tokeniser still loads and its pages show; its encode refuses with the reason."""
    try:
        check_pattern_size(pattern)
    except PatternRefused:
        return
    compile_pattern(pattern)


# Inline flags that turn on verbose mode or choose a version (V1 nests sets): `(?x)`, `(?iV1:`.
_LAYOUT_FLAGS = re.compile(r"\(\?[a-zA-Z0-9^-]*[xV]")
_NUMBER = re.compile(r"\d+")  # any decimal digits, not only ASCII: the bound must not be dodged
_QUANTIFIER = re.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")
_POSIX_CLASS = re.compile(r"\[:\^?[A-Za-z_]+:\]")
_INLINE_FLAGS = re.compile(r"\(\?[a-zA-Z0-9^-]+\)")
_GROUP_OPENING = re.compile(r"\(\?(?:P?<\w+>|<[=!]|[=!>|:]|[a-zA-Z0-9^-]+:)")


def _brace_numbers(pattern: str) -> list[int]:
    """Every number between an unescaped `{` and the next brace, wherever it is (a set, a
    property name, a fuzzy constraint): a superset of the repetition counts that needs no
    parse, so no way of spelling a count escapes it."""
    numbers: list[int] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            end = len(pattern)
            for brace in "{}":
                found = pattern.find(brace, i + 1)
                if found != -1:
                    end = min(end, found)
            numbers.extend(int(n) for n in _NUMBER.findall(pattern, i + 1, end))
        i += 1
    return numbers


def _weight(pattern: str) -> int:
    """The pattern's size with its repetitions written out (see MAX_PATTERN_WEIGHT): a scan
    of groups, sets, escapes and `{m,n}`, alternatives added up (an over-estimate)."""
    frames = [[0, 0]]  # per open group: [weight so far, weight of the last atom]

    def atom(weight: int) -> None:
        frames[-1][0] += weight
        frames[-1][1] = weight

    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i = _escape_end(pattern, i)
            atom(1)
        elif ch == "[":
            i = _set_end(pattern, i)
            atom(1)
        elif ch == "(" and pattern.startswith("(?#", i):
            close = pattern.find(")", i)
            i = len(pattern) if close == -1 else close + 1
        elif ch == "(" and (flags := _INLINE_FLAGS.match(pattern, i)):
            i = flags.end()  # `(?i)`: no group, nothing to match
        elif ch == "(":
            frames.append([0, 0])
            opening = _GROUP_OPENING.match(pattern, i)  # `(?:`, `(?P<name>`, `(?<=` ...
            i = opening.end() if opening else i + 1
        elif ch == ")" and len(frames) > 1:
            atom(max(frames.pop()[0], 1))
            i += 1
        elif ch == "{" and (quantifier := _QUANTIFIER.match(pattern, i)):
            count = max(int(n) for n in (quantifier[1] or "1", quantifier[2] or "1"))
            frame = frames[-1]
            frame[0] += frame[1] * (max(count, 1) - 1)
            frame[1] *= max(count, 1)
            i = quantifier.end()
        elif ch == "|":
            frames[-1][1] = 0
            i += 1
        elif ch in "*+?":
            i += 1
        else:
            atom(1)
            i += 1
    while len(frames) > 1:  # unclosed: `regex` will refuse it, weigh it all the same
        atom(max(frames.pop()[0], 1))
    return frames[0][0]


def _escape_end(pattern: str, i: int) -> int:
    """Where the escape at i ends: `\\p{...}`, `\\P{...}` and `\\N{...}` run to their brace."""
    if pattern[i + 1 : i + 2] in ("p", "P", "N") and pattern[i + 2 : i + 3] == "{":
        close = pattern.find("}", i + 3)
        return len(pattern) if close == -1 else close + 1
    return i + 2


def _set_end(pattern: str, i: int) -> int:
    """Where the set `[...]` at i ends: a `]` first (or after `^`) is a member, escapes and
    POSIX classes (`[:alpha:]`) are skipped."""
    j = i + 1
    if pattern[j : j + 1] == "^":
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    while j < len(pattern):
        if pattern[j] == "\\":
            j += 2
        elif posix := _POSIX_CLASS.match(pattern, j):
            j = posix.end()
        elif pattern[j] == "]":
            return j + 1
        else:
            j += 1
    return j


# A few characters of each kind the classes ask about, to repeat in probes beside the
# pattern's own literal characters.
_PROBE_KINDS = " a1\n\t'!.-_Aé中"
_PROBE_TAILS = ("", "\x00", "!")
_META = set("\\^$.|?*+()[]{}")


def _probes(pattern: str) -> Iterator[str]:
    """Texts to run a pattern on at entry: each character (and each adjacent pair of them) of
    the pattern, and of _PROBE_KINDS, repeated, then a tail that may fail the match."""
    own = [ch for ch in dict.fromkeys(pattern) if ch not in _META][:48]
    pairs = list(dict.fromkeys(a + b for a, b in itertools.pairwise(own) if a != b))[:16]
    runs = list(dict.fromkeys([*own, *_PROBE_KINDS, *pairs]))
    for run in runs:
        body = run * (PROBE_REPEATS // len(run))
        for tail in _PROBE_TAILS:
            yield body + tail


# ----- splits under a time limit ----------------------------------------------------------------
# When set: (deadline on time.thread_time, the limit, the characters) for every split inside
# one `split_deadline`, so that a text cut into many segments shares one budget. Time is CPU
# time, as `regex` counts its `timeout=` (the process's CPU time, all threads together).
_DEADLINE: ContextVar[tuple[float, float, int] | None] = ContextVar("split_deadline", default=None)


@contextmanager
def split_deadline(n_chars: int) -> Iterator[None]:
    """Every split inside shares one limit, `split_seconds(n_chars)` (the outermost wins):
    `Tokenizer.encode` holds one over all the segments and pre-tokenizer steps of its text."""
    if _DEADLINE.get() is not None:
        yield
        return
    limit = split_seconds(n_chars)
    token = _DEADLINE.set((time.thread_time() + limit, limit, n_chars))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _timeout(pattern: str, n_chars: int) -> float | None:
    """The `timeout=` for one split: None for a built-in pattern, else what is left of the
    current deadline, or the split's own limit outside one."""
    if pattern in BUILT_IN_PATTERNS:
        return None
    current = _DEADLINE.get()
    if current is None:
        return split_seconds(n_chars)
    deadline, limit, total = current
    left = deadline - time.thread_time()
    if left <= 0:
        raise PatternTimeout(limit, total)
    return left


def _timed_out(pattern: str, n_chars: int) -> PatternTimeout:
    current = _DEADLINE.get()
    if current is None:
        return PatternTimeout(split_seconds(n_chars), n_chars)
    return PatternTimeout(current[1], current[2])


def finditer_bounded(
    pattern: str, text: str, pos: int = 0, endpos: int | None = None
) -> Iterator[regex.Match[str]]:
    """`compile_pattern(pattern).finditer(text)` under the split time limit (PatternTimeout)."""
    if not text:
        return iter(())
    compiled = compile_pattern(pattern)
    timeout = _timeout(pattern, len(text))
    end = len(text) if endpos is None else endpos
    if timeout is None:
        return compiled.finditer(text, pos, end)
    return _raise_timeout(compiled.finditer(text, pos, end, timeout=timeout), pattern, len(text))


def _raise_timeout(
    matches: Iterator[regex.Match[str]], pattern: str, n_chars: int
) -> Iterator[regex.Match[str]]:
    try:
        yield from matches
    except TimeoutError:
        raise _timed_out(pattern, n_chars) from None


def findall_bounded(pattern: str, text: str) -> list[str]:
    """`compile_pattern(pattern).findall(text)` under the split time limit (PatternTimeout)."""
    if not text:
        return []
    compiled = compile_pattern(pattern)
    try:
        return compiled.findall(text, timeout=_timeout(pattern, len(text)))
    except TimeoutError:
        raise _timed_out(pattern, len(text)) from None


def resolve_pattern(name_or_regex: str) -> str:
    """Return the regex for a pattern name (`gpt4`, `gpt2`) or check and return a custom regex.

    >>> resolve_pattern("gpt2") == GPT2_PATTERN
    True
    """
    if name_or_regex in NAMED_PATTERNS:
        return NAMED_PATTERNS[name_or_regex]
    if not name_or_regex:
        raise ValueError("the split pattern is empty; give 'gpt4', 'gpt2' or a regex")
    if name_or_regex not in BUILT_IN_PATTERNS:
        check_pattern(name_or_regex)
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
    """Compile a split regex, turning the module's error into a ValueError that says what to fix.
    A pattern over the size bounds is refused before `regex` sees it (`check_pattern_size`)."""
    check_pattern_size(pattern)
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
    if not text:
        return []
    twin = _ascii_twin(pattern)
    if twin is not None and text.isascii():  # no empty matches, no groups: findall's list is it
        return twin.findall(text)
    if twin is not None and len(text.encode("utf-8")) - len(text) <= len(text) // 32:
        chunks = _split_by_stand_ins(text, twin)  # mostly ASCII: code, English with a few “”
        if chunks is not None:
            return chunks
    if compile_pattern(pattern).groups == 0:  # findall gives whole matches then, much faster
        return list(filter(None, findall_bounded(pattern, text)))
    return [m.group() for m in finditer_bounded(pattern, text) if m.end() > m.start()]


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
