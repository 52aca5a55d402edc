"""Words mode: whitespace-separated words of characters, each closed by the symbol `</w>`.

Ids 0..A-1 are the training text's distinct characters (the alphabet, sorted by code point), id
A is `</w>`, merge k gets id A + 1 + k. Sorting the alphabet by code point makes the tie rule
(smallest (left_id, right_id)) deterministic and independent of the order words were seen in.
Characters never seen in training encode as `<unk>`, a special token every words tokeniser has.
Decoding is lossy on whitespace by design: each `</w>` comes back as one space
(docs/algorithms.md, "Words mode").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, ClassVar

import regex

from bpe.encoder import encode_ids
from bpe.modes.base import CHUNK_CACHE_LIMIT, TrainingInput, TrainingMode

if TYPE_CHECKING:
    from bpe.model import Tokenizer
    from bpe.training import Splitter

END_OF_WORD = "</w>"
UNKNOWN = "<unk>"
_WORD = regex.compile(r"[^\s\x1c-\x1f\x85]+")  # what str.split() calls a word, found lazily


class WordsMode(TrainingMode):
    name = "words"
    label = "Words (characters, end-of-word marker)"
    description = "Characters of whitespace-separated words, each ending in </w>; lossy on spaces."
    byte_level = False
    uses_alphabet = True
    required_special_tokens = (UNKNOWN,)
    reserved_tokens: ClassVar[Mapping[str, str]] = {
        END_OF_WORD: "the mark at the end of every word"
    }

    def split(self, text: str, pattern: str | None) -> list[str]:
        return text.split()

    def iter_split(self, text: str, pattern: str | None) -> Iterator[str]:
        return (m.group() for m in _WORD.finditer(text))

    def spans(self, text: str, start: int, end: int, pattern: str | None) -> list[tuple[int, int]]:
        spans = []  # runs of non-whitespace, exactly what str.split() keeps
        i = start
        while i < end:
            while i < end and text[i].isspace():
                i += 1
            j = i
            while j < end and not text[j].isspace():
                j += 1
            if j > i:
                spans.append((i, j))
            i = j
        return spans

    def base_size(self, alphabet_size: int) -> int:
        return alphabet_size + 1

    def base_description(self, alphabet_size: int) -> str:
        base = self.base_size(alphabet_size)
        return f"{base:,} base ids (the text's {alphabet_size:,} distinct characters and </w>)"

    def base_vocab(self, alphabet: list[str] | None) -> dict[int, bytes]:
        table = {i: char.encode("utf-8") for i, char in enumerate(alphabet or [])}
        table[len(alphabet or [])] = b""  # `</w>` adds no bytes: `ends_word` says where a word ends
        return table

    def base_symbols(self, tok: Tokenizer, piece: str) -> list[int]:
        char_ids = {c: i for i, c in enumerate(tok.alphabet or [])}
        unknown = tok.special_tokens.get(UNKNOWN, -1)
        return [char_ids.get(c, unknown) for c in piece] + [tok.base_size - 1]

    def end_of_word_id(self, alphabet: list[str] | None) -> int | None:
        return len(alphabet or [])

    def word_ending_ids(self, tok: Tokenizer) -> frozenset[int]:
        ending = {tok.base_size - 1}
        for _, right, new in tok.merges:
            if right in ending:
                ending.add(new)
        return frozenset(ending)

    def training_input(self, text: str, pattern: str | None, splitter: Splitter) -> TrainingInput:
        alphabet, sequences = splitter.words(text)
        return sequences, alphabet

    def encode_ordinary(self, tok: Tokenizer, text: str) -> list[int]:
        unknown = tok.special_tokens[UNKNOWN]
        char_to_id = tok._char_to_id
        end = tok.base_size - 1
        cache = tok._chunk_cache
        out: list[int] = []
        for word in text.split():
            cached = cache.get(word)
            if cached is None:
                ids = [char_to_id.get(char, unknown) for char in word] + [end]
                cached = encode_ids(ids, tok.ranks)
                if len(cache) >= CHUNK_CACHE_LIMIT:
                    cache.clear()
                cache[word] = cached
            out.extend(cached)
        return out

    def decode_bytes(self, tok: Tokenizer, ids: Iterable[int]) -> bytes:
        return self.decode(tok, ids).encode("utf-8")

    def decode(self, tok: Tokenizer, ids: Iterable[int]) -> str:
        parts: list[str] = []
        specials = tok._id_to_special
        for token_id in ids:
            if token_id in specials:
                parts.append(specials[token_id])
                continue
            parts.append(tok.token_bytes(token_id).decode("utf-8", errors="replace"))
            if tok.ends_word(token_id):
                parts.append(" ")
        text = "".join(parts)
        return text.removesuffix(" ")


WORDS = WordsMode()
