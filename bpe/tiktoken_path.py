"""The fast path: hand byte-level encoding to tiktoken when it is installed and gives our ids.

tiktoken knows no merge list: inside a piece it joins the adjacent pair whose joined bytes rank
lowest, and a piece that is a token is that token at once. Ranked by our ids, that gives exactly our
rule's ids (`bpe.reference.encode_reference`) for every text when every merged token `t` encodes,
alone, to `[t]` by our rule (then no two ids share bytes either). Why: take a state both rules have
reached, where our lowest learned pair present is `k`. tiktoken joins a pair `(x, y)` whose bytes
are some token `t <= k`. The span of `x y` has had token boundaries at both ends, so no merge
crossed them and it evolved as `bytes(t)` alone does, up to `k`; if `(x, y)` were not `t`'s own
merge (not learned at all: ids have distinct bytes), `bytes(t)` alone would stop at `[x, y]`, not
`[t]`. So tiktoken joins `t`'s learned pair, `t = k` (no learned pair below `k` is present), at the
leftmost place, which is where our left-to-right pass merges next; joins it makes rank above `k` by
the same argument. A piece that is a token `t` is `[t]` under both rules.

`self_encoding_merges` checks the condition in one walk per merge (`crosses_before`), and the
pieces must be the same: naive text is one piece; chunked text uses our own split regex, which
tiktoken's engine (fancy-regex) runs too. Its Unicode tables are older than the `regex`
module's, so text holding a character Python's own tables call unassigned but `regex` knows
(or a lone surrogate) stays on the pure path (`needs_pure_path`); custom patterns always do.
"""

from __future__ import annotations

import array
import functools
import itertools
import operator
import re
import unicodedata
from typing import TYPE_CHECKING

import regex

from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN, NAIVE_PATTERN
from bpe.stitch import crosses_before

if TYPE_CHECKING:  # tiktoken is optional: only TiktokenPath.build imports it
    import tiktoken

    from bpe.model import Tokenizer

# The split patterns tiktoken's regex engine runs as ours does (tests/test_tiktoken_path.py
# checks every code point); the naive pattern matches everything at once.
TRUSTED_PATTERNS = (GPT4_PATTERN, GPT2_PATTERN, NAIVE_PATTERN)


def self_encoding_merges(merges: list[tuple[int, int, int]]) -> bool:
    """True if every merged token's bytes encode, alone, to that token by our rule.

    A merge `(l, r) -> t` gives `[t]` from `t`'s bytes exactly when `l` and `r` do alone and
    no merge below `t` joins the end of `l`'s bytes to the start of `r`'s while they evolve.

    >>> self_encoding_merges([(97, 97, 256), (256, 97, 257)])
    True
    >>> self_encoding_merges([(98, 99, 256), (97, 98, 257), (257, 99, 258)])  # a|bc, not abc
    False
    """
    ranks = {(left, right): new for left, right, new in merges}
    parts = {new: (left, right) for left, right, new in merges}
    return not any(crosses_before(left, right, new, ranks, parts) for left, right, new in merges)


@functools.cache
def unknown_to_python() -> frozenset[str]:
    """Characters `regex` classifies but Python's (older) Unicode tables call unassigned, and
    lone surrogates. tiktoken's engine may classify the first differently; tiktoken replaces the
    second where we raise."""
    every = array.array("I", range(0x110000)).tobytes().decode("utf-32-le", "surrogatepass")
    found: set[str] = set(every[0xD800:0xE000])  # the surrogates
    # Only what `regex` calls assigned (private use aside) needs Python's opinion; in C loops.
    for run in regex.finditer(r"[^\p{Cn}\p{Co}\p{Cs}]+", every):
        chars = run.group()
        unknown = map(operator.eq, map(unicodedata.category, chars), itertools.repeat("Cn"))
        found.update(itertools.compress(chars, unknown))
    return frozenset(found)


# Past one character in this many above the BMP, the whole-text check beats the lookups: it
# costs about twice theirs per character, and they cost ~85 ns more per character found
# (benchmarks/encode_scripts.py on the UDHR: Adlam, Chakma, Grantha ~0.45 ms -> ~0.06 ms).
_DENSE_ABOVE_BMP = 10


@functools.cache
def _suspects() -> re.Pattern[str]:
    """A class holding every character of `unknown_to_python`: its characters in the Basic
    Multilingual Plane, and every character above it. `re` tests a class of BMP characters with
    one bitmap lookup, so a search costs a few ms on 2 MB of Chinese, where testing every
    character against the set took ~40 ms (beside tiktoken's ~250 ms); characters above the BMP
    are rare outside emoji, and only those found are looked up in the set."""
    codes = sorted(ord(char) for char in unknown_to_python() if char <= "\uffff")
    ranges = []
    for _, run in itertools.groupby(enumerate(codes), lambda pair: pair[1] - pair[0]):
        run_codes = [code for _, code in run]
        ranges.append(f"\\u{run_codes[0]:04x}-\\u{run_codes[-1]:04x}")
    return re.compile(f"[{''.join(ranges)}\\U00010000-\\U0010ffff]")


def needs_pure_path(text: str) -> bool:
    """True if tiktoken could split or read this text differently (see the module docstring).

    The class of `_suspects` finds every such character, and a BMP one it finds is one. From
    the first character above the BMP on, text dense in them (Adlam, Chakma...) is checked
    whole: once its whitespace is gone, printable text holds nothing Python calls unassigned
    and no surrogate. That is a few C passes, where looking up each of its characters found
    one by one cost more than tiktoken's encoding of a 20 kB text (docs/algorithms.md, "The
    fast path's check")."""
    if text.isascii():
        return False
    first = _suspects().search(text)
    if first is None:
        return False
    if first.group() <= "\uffff":
        return True
    rest = text[first.start() :]
    above_bmp = len(rest.encode("utf-16-le", "surrogatepass")) // 2 - len(rest)
    if above_bmp * _DENSE_ABOVE_BMP > len(rest) and "".join(rest.split()).isprintable():
        return False
    return not unknown_to_python().isdisjoint(_suspects().findall(rest))


class TiktokenPath:
    """A tiktoken Encoding with our ids as ranks, for a tokeniser that qualifies."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding

    @classmethod
    def build(cls, tok: Tokenizer) -> TiktokenPath | None:
        """The fast path for this tokeniser, or None: tiktoken missing, words mode, an imported
        tokeniser, a custom pattern, or a merge list where tiktoken's rule can differ."""
        if tok.rule_object.imported or not tok.mode_object.byte_level:
            return None
        pattern = tok.mode_object.split_pattern(tok.pattern)
        if pattern is None or pattern not in TRUSTED_PATTERNS:
            return None
        try:
            import tiktoken
        except ImportError:
            return None
        if not self_encoding_merges(tok.merges):
            return None
        vocab = tok.vocab
        ranks = {vocab[i]: i for i in range(256 + len(tok.merges))}
        # Special tokens are split off by Tokenizer.encode before this sees any text.
        encoding = tiktoken.Encoding(
            "bpe-workbench-fast-path", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
        )
        return cls(encoding)

    def encode(self, text: str) -> list[int] | None:
        """Our ids for ordinary text (no special tokens), or None if it must take the pure path."""
        if needs_pure_path(text):
            return None
        return self.encoding.encode_ordinary(text)

    def encode_batch(self, texts: list[str], num_threads: int) -> list[list[int]] | None:
        """`encode` for many texts on tiktoken's threads; None if any must take the pure path."""
        if any(map(needs_pure_path, texts)):
            return None
        return self.encoding.encode_ordinary_batch(texts, num_threads=num_threads)
