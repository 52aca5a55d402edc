"""HF's added tokens: found in the text before anything else, each one becoming its own id.

Tokens with `normalized: false` are looked for in the raw text; the rest of the text is then
normalized, and the tokens with `normalized: true` (their content normalized the same way) are
looked for in it. At each place the longest token that starts there wins (leftmost first).
Flags, as `tokenizers` applies them to a match:
- `single_word`: the match counts only with no word character (`\\w`) right before or after it;
- `lstrip` / `rstrip`: the whitespace before / after the match is swallowed into the token;
- `special`: only matters for decoding (skipped on request) and for which tokens `encode`
  looks for (`bpe.Tokenizer.encode`'s `allowed_special`); other added tokens always match.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import regex

from bpe.hf.errors import Malformed
from bpe.patterns import compile_pattern

# (text, the added token's id or None, how many leading characters stand for the input's first
# one: `bpe.hf.pre_tokenizers`' `origin`)
Segment = tuple[str, int | None, int]

_WORD = compile_pattern(r"\w")
_SPACE = compile_pattern(r"\p{White_Space}")


@dataclass(frozen=True)
class AddedToken:
    content: str
    id: int
    special: bool = False
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    @classmethod
    def from_json(cls, raw: Any, token_id: int) -> AddedToken:
        if not isinstance(raw, dict) or not isinstance(raw.get("content"), str):
            raise Malformed("an added token needs its content")
        special = bool(raw.get("special", False))
        return cls(
            content=raw["content"],
            id=token_id,
            special=special,
            single_word=bool(raw.get("single_word", False)),
            lstrip=bool(raw.get("lstrip", False)),
            rstrip=bool(raw.get("rstrip", False)),
            normalized=bool(raw.get("normalized", not special)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "special": self.special,
            "single_word": self.single_word,
            "lstrip": self.lstrip,
            "rstrip": self.rstrip,
            "normalized": self.normalized,
        }


class _Trie:
    """The tokens of one kind (raw or normalized), longest first in one alternation."""

    def __init__(self, tokens: dict[str, AddedToken]) -> None:
        self.tokens = tokens
        ordered = sorted(tokens, key=lambda t: (-len(t), t))
        self.pattern = (
            # escaped literals only, matched in linear time: not a pattern from outside, so
            # not held to the bounds on those (DeepSeek-V3's 818 added tokens make 19,141
            # characters)
            regex.compile("|".join(regex.escape(t) for t in ordered)) if ordered else None
        )

    def split(self, text: str, origin: int, skip: Collection[int]) -> list[Segment]:
        if self.pattern is None or not text:
            return [(text, None, origin)]
        out: list[Segment] = []
        taken = 0  # where the text not yet given out starts
        for match in self.pattern.finditer(text):
            token = self.tokens[match.group()]
            if token.id in skip:
                continue
            start, stop = match.span()
            if token.single_word and (
                (start > 0 and _WORD.match(text, start - 1)) or _WORD.match(text, stop)
            ):
                continue
            # A match inside the whitespace the previous token's rstrip swallowed still counts
            # (`tokenizers` emits it), its text given out once.
            start = max(start, taken)
            if token.lstrip:
                while start > taken and _SPACE.match(text[start - 1]):
                    start -= 1
            if token.rstrip:
                while stop < len(text) and _SPACE.match(text[stop]):
                    stop += 1
            if start > taken:
                out.append((text[taken:start], None, max(0, min(origin, start) - taken)))
            out.append((text[start:stop], token.id, 0))
            taken = max(stop, taken)
        if taken < len(text):
            out.append((text[taken:], None, max(0, origin - taken)))
        return out


class AddedVocabulary:
    def __init__(
        self, tokens: list[AddedToken], normalize: Callable[[str], str] | None = None
    ) -> None:
        self.tokens = tokens
        self.normalize = normalize
        self.by_id = {t.id: t for t in tokens}
        raw: dict[str, AddedToken] = {}
        normed: dict[str, AddedToken] = {}
        for token in tokens:
            if token.normalized and normalize is not None:
                normed.setdefault(normalize(token.content), token)
            elif token.normalized:
                normed.setdefault(token.content, token)
            else:
                raw.setdefault(token.content, token)
        self._raw = _Trie(raw)
        self._normalized = _Trie(normed)

    def segments(self, text: str, skip: Collection[int] = ()) -> list[Segment]:
        """The text cut around added tokens (not those in `skip`), the rest normalized."""
        return [segment for stretch in self.stretches(text, skip) for segment in stretch.segments]

    def stretches(self, text: str, skip: Collection[int] = ()) -> list[Stretch]:
        """`segments`, kept by the stretch of raw text they come from (what "why this split?"
        shows: each stretch between the raw added tokens, then what the normalizer made of
        it, then the normalized added tokens found in that)."""
        out: list[Stretch] = []
        for piece, token_id, origin in self._raw.split(text, 1, skip):
            if token_id is not None:
                out.append(Stretch(piece, token_id, piece, [(piece, token_id, 0)]))
                continue
            normalize = self.normalize
            if normalize is None:
                normalized, first = piece, origin
            else:
                normalized = normalize(piece)
                # What the input's first character became (a prepended mark included).
                first = len(normalize(piece[:1])) if origin else 0
            found = self._normalized.split(normalized, first, skip)
            kept = [s for s in found if s[0] or s[1] is not None]
            if kept or piece:
                out.append(Stretch(piece, None, normalized, kept))
        return out


@dataclass(frozen=True)
class Stretch:
    """Raw text between the added tokens matched before normalizing (or one such token),
    what the normalizer made of it, and that cut around the normalized added tokens."""

    raw: str
    token_id: int | None  # a `normalized: false` added token, matched in the raw text
    normalized: str
    segments: list[Segment]
