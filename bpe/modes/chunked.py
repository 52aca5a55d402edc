"""Chunked mode: the split pattern cuts text into chunks of bytes, and no merge crosses one.

Training counts each distinct chunk once, weighted by how often it occurs. Encoding looks each
chunk up in the chunk cache (or encodes it once); text whose new chunks hold most of its bytes
in multi-byte characters is cut as a whole, at chunk ends and where no token can sit across
(docs/algorithms.md, "Fast encoding paths").
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from bpe.modes.base import TrainingInput
from bpe.modes.byte_symbols import (
    ByteLevelMode,
    cheap_search,
    encode_chunks_joined,
    encode_in_pieces,
)
from bpe.patterns import finditer_bounded, split_chunks

if TYPE_CHECKING:
    from bpe.model import Tokenizer
    from bpe.training import Splitter

# Bytes of chunks new to the chunk cache per character of text from which `cut_whole` cuts
# the text whole, and the partial-token search steps per character it allows (`cheap_search`).
NEW_BYTES_PER_CHAR = 1.5
WHOLE_TEXT_SEARCH_STEPS = 6.0


class ChunkedMode(ByteLevelMode):
    name = "chunked"
    label = "Chunked (bytes, split by a regex)"
    description = "Bytes, cut first by a split pattern (GPT-4's by default): no merge crosses it."
    uses_pattern = True

    def split(self, text: str, pattern: str | None) -> list[str]:
        return split_chunks(text, pattern or "")

    def iter_split(self, text: str, pattern: str | None) -> Iterator[str]:
        matches = finditer_bounded(pattern or "", text)
        return (m.group() for m in matches if m.end() > m.start())

    def split_pattern(self, pattern: str | None) -> str | None:
        return pattern

    def spans(self, text: str, start: int, end: int, pattern: str | None) -> list[tuple[int, int]]:
        # On the slice, exactly as `split_chunks` (and so `Tokenizer.encode`) cuts it.
        return [
            (start + m.start(), start + m.end())
            for m in finditer_bounded(pattern or "", text[start:end])
            if m.end() > m.start()
        ]

    def training_input(self, text: str, pattern: str | None, splitter: Splitter) -> TrainingInput:
        return splitter.chunks(text, pattern or ""), None

    def encode_ordinary(self, tok: Tokenizer, text: str) -> list[int]:
        chunks = split_chunks(text, tok.pattern or "")
        if len(chunks) > 1 and cut_whole(tok, text, chunks):
            ends = list(itertools.accumulate(map(len, chunks)))
            if ends[-1] == len(text):
                return encode_in_pieces(tok, text, ends)
        return encode_chunks_joined(tok, chunks)

    def encode_chunks(self, tok: Tokenizer, text: str) -> list[list[int]]:
        # Imported chunked tokenisers cut by their own pre-tokenizer and rule: ask the rule.
        encode_piece = tok.rule_object.piece_encoder(tok)
        return [list(encode_piece(tok, piece)) for piece in tok.pieces(text)]


CHUNKED = ChunkedMode()


def cut_whole(tok: Tokenizer, text: str, chunks: list[str]) -> bool:
    """Whether to cut the whole text once, at chunk ends and where no token can sit across,
    and encode its pieces character by character (`encode_in_pieces`), rather than encode each
    chunk new to the chunk cache from its bytes: when those chunks hold most of the text's bytes
    in characters of three (Chinese, Japanese, Thai, Georgian, Ethiopic: unspaced text, or
    words that rarely repeat), and the search for partial tokens is cheap. Measured on the
    UDHR's script groups, each with a vocabulary of its own (docs/algorithms.md,
    "Fast encoding paths")."""
    least = NEW_BYTES_PER_CHAR * len(text)
    # The new chunks' bytes are at most the text's: mostly single-byte text (English, code)
    # stops here, without a second set of its chunks beside the chunk cache's.
    if len(text.encode("utf-8")) < least:
        return False
    new = set(chunks).difference(tok._chunk_cache)
    if len("".join(new).encode("utf-8")) < least:
        return False
    return cheap_search(tok, text, WHOLE_TEXT_SEARCH_STEPS)
