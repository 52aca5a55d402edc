"""Naive mode: the whole text is one piece of bytes, so merges may cross anything.

Training sees the text's UTF-8 bytes as one sequence of weight 1. Encoding stitches the text
from cached parts (`bpe.stitch`), or, for mostly multi-byte text, cuts it where no token can
sit across (`bpe.cuts`); both give the ids of encoding it whole (docs/algorithms.md,
"Encoding").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from bpe.modes.base import MULTIBYTE_SHARE, PieceEncoder, TrainingInput, encode_as_text
from bpe.modes.byte_symbols import ByteLevelMode, encode_multibyte
from bpe.patterns import NAIVE_PATTERN

if TYPE_CHECKING:
    from bpe.model import Tokenizer
    from bpe.training import Splitter


class NaiveMode(ByteLevelMode):
    name = "naive"
    label = "Naive (bytes, no split)"
    description = "The whole text as one run of bytes: merges may cross spaces and punctuation."

    def split(self, text: str, pattern: str | None) -> list[str]:
        return [text] if text else []

    def iter_split(self, text: str, pattern: str | None) -> Iterator[str]:
        return iter([text] if text else [])

    def split_pattern(self, pattern: str | None) -> str | None:
        return NAIVE_PATTERN

    def spans(self, text: str, start: int, end: int, pattern: str | None) -> list[tuple[int, int]]:
        return [(start, end)]

    def training_input(self, text: str, pattern: str | None, splitter: Splitter) -> TrainingInput:
        return splitter.whole_text(text), None

    def encode_ordinary(self, tok: Tokenizer, text: str) -> list[int]:
        if len(text.encode("utf-8")) > MULTIBYTE_SHARE * len(text):
            return encode_multibyte(tok, text)  # cut where no token can sit across
        return tok._stitcher.encode(text)

    def piece_encoder(self) -> PieceEncoder:
        return encode_as_text  # the piece is a whole text

    def fast_path_suits(self, multibyte: bool) -> bool:
        # Multi-byte text stays pure: one long piece is slow in tiktoken, while our pieces
        # (words) repeat (benchmarks/encode_vs_peers.py: 2x faster on Chinese).
        return not multibyte


NAIVE = NaiveMode()
