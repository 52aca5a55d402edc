"""The byte alphabet every byte-level mode shares (naive, chunked, and any mode added so).

Ids 0..255 are the single bytes; merge k gets id 256 + k. Pieces are encoded through the
tokeniser's chunk cache: one that is a whole token by one lookup, a short ASCII one by the
rescanning loop over its bytes, the rest cut where no token can sit across (`bpe.cuts`) and
each part looked up or encoded once (docs/algorithms.md, "Encoding").
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from bpe.encoder import SHORT_PIECE_BYTES, encode_ids, encode_joined, encode_pieces
from bpe.modes.base import CHUNK_CACHE_LIMIT, PieceEncoder, TrainingInput, TrainingMode
from bpe.stitch import word_ends

if TYPE_CHECKING:
    from bpe.model import Tokenizer
    from bpe.training import Splitter

# Above this many `str.find` steps per character (`bpe.cuts.CutTable.search_work`), looking
# for partial tokens costs more than stitching rough pieces: about one Python step per
# character is where the search's loop outgrows the stitcher's per-text work. Measured on the
# UDHR's scripts (benchmarks/encode_scripts.py): Chinese 0.03-1, Cyrillic, Japanese, Hangul,
# Devanagari, Thai 3-40 with vocabularies of their own.
SEARCH_STEPS_PER_CHAR = 1.0


class ByteLevelMode(TrainingMode):
    """A mode whose base symbols are the 256 bytes. A new byte-level mode needs only its name,
    labels and `split` (and `iter_split` / `split_pattern` where it can say them)."""

    byte_level = True

    def base_size(self, alphabet_size: int) -> int:
        return 256

    def base_description(self, alphabet_size: int) -> str:
        return "256 base ids (one per byte)"

    def base_vocab(self, alphabet: list[str] | None) -> dict[int, bytes]:
        return {i: bytes([i]) for i in range(256)}

    def base_symbols(self, tok: Tokenizer, piece: str) -> list[int]:
        data = piece.encode("utf-8", errors="surrogatepass")
        if tok.tokens is None:  # this project's own byte-level tokenisers: byte b is id b
            return list(data)
        byte_ids = tok.byte_ids
        return [byte_ids[b] for b in data]

    def training_input(self, text: str, pattern: str | None, splitter: Splitter) -> TrainingInput:
        return splitter.counted(self.iter_split(text, pattern)), None

    def encode_ordinary(self, tok: Tokenizer, text: str) -> list[int]:
        return encode_chunks_joined(tok, self.split(text, tok.pattern))

    def piece_encoder(self) -> PieceEncoder:
        return encode_chunk

    def decode_bytes(self, tok: Tokenizer, ids: Iterable[int]) -> bytes:
        vocab = tok.vocab
        try:
            return b"".join(vocab[i] for i in ids)
        except KeyError as exc:
            raise ValueError(tok._missing_id(exc.args[0])) from None

    def decode(self, tok: Tokenizer, ids: Iterable[int]) -> str:
        return self.decode_bytes(tok, ids).decode("utf-8", errors="replace")


def encode_chunks_joined(tok: Tokenizer, chunks: list[str]) -> list[int]:
    """The chunks' ids joined, each distinct new chunk encoded once and cached."""
    return encode_joined(
        tok._chunk_cache,
        chunks,
        functools.partial(encode_new_chunk, tok),
        CHUNK_CACHE_LIMIT,
        functools.partial(encode_new_chunks, tok),
    )


def encode_chunk(tok: Tokenizer, chunk: str) -> list[int]:
    """One chunk's ids, from the chunk cache or encoded and added to it."""
    cached = tok._chunk_cache.get(chunk)
    if cached is None:
        cached = encode_new_chunk(tok, chunk)
        if len(tok._chunk_cache) >= CHUNK_CACHE_LIMIT:
            tok._chunk_cache.clear()
        tok._chunk_cache[chunk] = cached
    return cached


def encode_new_chunk(tok: Tokenizer, chunk: str) -> list[int]:
    """One chunk's ids, not looked up in the cache."""
    token = tok._whole_tokens.get(chunk)
    if token is not None:
        return [token]
    # Short chunks (words, in most scripts) and ASCII ones are rarely cut: encoding them whole
    # is cheaper.
    data = chunk.encode("utf-8")
    if len(data) < SHORT_PIECE_BYTES or chunk.isascii():
        return encode_ids(list(data), tok.ranks)
    return encode_multibyte(tok, chunk)


def encode_new_chunks(tok: Tokenizer, new: set[str]) -> dict[str, list[int]]:
    """`encode_new_chunk` of each, most of them with no Python call of their own."""
    return encode_pieces(
        new, tok.ranks, tok._whole_tokens, functools.partial(encode_new_chunk, tok)
    )


def cheap_search(tok: Tokenizer, text: str, steps_per_char: float = SEARCH_STEPS_PER_CHAR) -> bool:
    """Whether finding the partial tokens in text (`bpe.cuts.CutTable.pieces`) costs less
    than stitching its rough pieces (`encode_multibyte`), or takes at most steps_per_char."""
    return tok._cuts.search_work(text) <= steps_per_char * len(text)


def encode_multibyte(tok: Tokenizer, text: str) -> list[int]:
    """Byte-level encoding of one naive text or one chunk, mostly multi-byte: cut exactly
    (`encode_in_pieces`) where partial tokens are few (Chinese, say), else cut at words and
    where no token of whole characters sits across, and stitched (`bpe.stitch`), which checks
    the cuts a partial token may cross (Japanese, Hangul, Devanagari, Cyrillic...)."""
    if cheap_search(tok, text):
        return encode_in_pieces(tok, text)
    pieces, exact = tok._cuts.rough_pieces(text, word_ends(text))
    return tok._stitcher.stitch(text, pieces, exact)


def encode_in_pieces(tok: Tokenizer, text: str, chunk_ends: Sequence[int] = ()) -> list[int]:
    """Byte-level encoding of text, cut where no token can sit across (`bpe.cuts`) and at
    `chunk_ends`, each piece looked up in (or added to) the chunk cache: the same ids as
    encoding it whole (or chunk by chunk)."""
    data = text.encode("utf-8")
    pieces, bytewise = tok._cuts.pieces(text, chunk_ends)  # bytewise: hold a partial token
    if len(pieces) == 1:
        if bytewise:
            return encode_ids(list(data), tok.ranks)
        return tok._characters.encode(text)
    characters, ranks, whole = tok._characters, tok.ranks, tok._whole_tokens

    def encode_many(new: set[str]) -> dict[str, list[int]]:
        # Most new pieces are one token or a few characters: the lookups, the characters'
        # ids and the calls of encode_ids run in C, with no Python frame of their own.
        table = {piece: [whole[piece]] for piece in whole.keys() & new}
        rest = new.difference(table)
        by_bytes = rest.intersection(bytewise)
        by_chars = list(rest.difference(by_bytes))
        char_ids = map(functools.partial(map, characters.__getitem__), by_chars)
        ids = map(list, map(itertools.chain.from_iterable, char_ids))
        table.update(zip(by_chars, map(encode_ids, ids, itertools.repeat(ranks)), strict=True))
        table.update((piece, encode_ids(list(piece.encode("utf-8")), ranks)) for piece in by_bytes)
        return table

    def encode(piece: str) -> list[int]:
        return encode_many({piece})[piece]

    return encode_joined(tok._chunk_cache, pieces, encode, CHUNK_CACHE_LIMIT, encode_many)
