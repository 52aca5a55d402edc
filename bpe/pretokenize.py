"""HuggingFace's pre-tokenizer chain for byte-level BPE: `Split` steps, then `ByteLevel`.

Imported `tokenizer.json` files cut text this way before the merges run:
- each `Split(pattern, behavior)` cuts every piece further. `Isolated` keeps matches and the
  text between them as separate pieces (`keep="all"`); `Removed` drops the matches and keeps
  the gaps (`keep="gaps"`), or with `invert=true` keeps the matches and drops the gaps
  (`keep="matches"`, which is what tiktoken and our own chunked mode do);
- then `ByteLevel`: with `add_prefix_space` a space is put before every piece that does not
  start with one; with `use_regex` each piece is cut again by GPT-2's pattern (isolated).
Empty pieces are dropped at every step, as `tokenizers` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from bpe.patterns import finditer_bounded, split_deadline

Keep = Literal["matches", "all", "gaps"]
KEEPS = ("matches", "all", "gaps")
# The pattern HF's ByteLevel pre-tokenizer splits with when `use_regex` is true (GPT-2's).
BYTE_LEVEL_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


@dataclass(frozen=True)
class SplitStep:
    pattern: str
    keep: Keep = "matches"

    def cut(self, text: str) -> list[str]:
        """The step's pieces of one piece of text.

        >>> SplitStep(r"\\d+", "all").cut("ab12cd"), SplitStep(r"\\d+", "gaps").cut("ab12cd")
        (['ab', '12', 'cd'], ['ab', 'cd'])
        """
        return list(self.iter_cut(text))

    def iter_cut(self, text: str) -> Iterator[str]:
        start = 0
        keep_gaps = self.keep != "matches"
        keep_matches = self.keep != "gaps"
        for match in finditer_bounded(self.pattern, text):
            if match.end() == match.start():
                continue
            if keep_gaps and match.start() > start:
                yield text[start : match.start()]
            if keep_matches:
                yield match.group()
            start = match.end()
        if keep_gaps and start < len(text):
            yield text[start:]


@dataclass(frozen=True)
class PreTokenizer:
    splits: tuple[SplitStep, ...] = ()
    add_prefix_space: bool = False
    use_regex: bool = False  # ByteLevel's own GPT-2 split, after the prefix space

    def pieces(self, text: str) -> list[str]:
        """The pieces the merges run on, in order.

        >>> PreTokenizer(add_prefix_space=True, use_regex=True).pieces("hi there")
        [' hi', ' there']
        """
        with split_deadline(len(text)):  # one time limit for all the steps' splits
            return list(self.iter_pieces(text))

    def iter_pieces(self, text: str) -> Iterator[str]:
        """`pieces`, lazily: a whole corpus goes through without a list of all its pieces.
        Each split has its own time limit (`bpe.patterns.split_seconds`), which counts the
        caller's own time between pieces too (as `regex` does)."""
        pieces: Iterable[str] = [text] if text else []
        for step in self.splits:
            pieces = _cut_all(step, pieces)
        if self.add_prefix_space:
            pieces = (piece if piece.startswith(" ") else " " + piece for piece in pieces)
        if self.use_regex:
            pieces = _cut_all(SplitStep(BYTE_LEVEL_PATTERN, "all"), pieces)
        return iter(pieces)

    def to_dict(self) -> dict[str, Any]:
        return {
            "splits": [{"pattern": s.pattern, "keep": s.keep} for s in self.splits],
            "add_prefix_space": self.add_prefix_space,
            "use_regex": self.use_regex,
        }


def _cut_all(step: SplitStep, pieces: Iterable[str]) -> Iterator[str]:
    for piece in pieces:
        yield from step.iter_cut(piece)
