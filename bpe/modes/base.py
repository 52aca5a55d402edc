"""What a training mode is: a pre-split of text plus an alphabet of base symbols.

A mode says how text is cut into pieces no merge crosses (`split`), what each piece starts as
before any merge (`base_symbols`: bytes, or characters and `</w>`), how the base of the
vocabulary is numbered, how training text becomes weighted id sequences, and how our own
merges encode and decode (docs/algorithms.md, "Training" and "Encoding"). Modes are stateless
singletons: every table a tokeniser derives (caches, cut tables) lives on the `Tokenizer` and
is handed in with it, so one mode object serves every tokeniser of its kind.

This module imports nothing of `bpe`: the `Tokenizer` and the trainer's `Splitter` are named
for annotations only, so the modes sit below both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from bpe.model import Tokenizer
    from bpe.training import Splitter

# Chunks are cached as encoded; past this many distinct chunks the cache starts over, which
# bounds memory on adversarial input while keeping the hit rate high on natural text.
CHUNK_CACHE_LIMIT = 200_000
# Above this many UTF-8 bytes per character, text counts as mostly multi-byte (Chinese, say),
# which the byte-level modes cut as a whole rather than chunk by chunk.
MULTIBYTE_SHARE = 1.5

# What training in a mode starts from: weighted id sequences (bytes stand for their byte ids)
# and, for modes with a character alphabet, that alphabet in id order.
Sequences = list[tuple[bytes, int]] | list[tuple[list[int], int]]
TrainingInput = tuple[Sequences, list[str] | None]
PieceEncoder = Callable[["Tokenizer", str], list[int]]  # (tokeniser, piece) -> its ids


class TrainingMode:
    """One way to train and encode. Subclass it (or `ByteLevelMode`), fill in the class
    attributes and `split`, and register an instance with `bpe.modes.register_mode`."""

    name: str = ""  # what `Tokenizer.mode` and the tokeniser file's "mode" key hold
    label: str = ""  # a human label, for the web app's train form
    description: str = ""  # one line saying what the mode does, for the same form
    # Byte-level modes start from the 256 bytes, so any text encodes: the exports and the
    # tiktoken fast path can apply to them (when `split_pattern` says how to cut).
    byte_level: bool = True
    uses_pattern: bool = False  # the tokeniser keeps a split regex (`Tokenizer.pattern`)
    uses_alphabet: bool = False  # the tokeniser keeps a character alphabet (`Tokenizer.alphabet`)
    # Special tokens every tokeniser of this mode has (added first when training), and names
    # that cannot be special tokens because they are symbols of the mode.
    required_special_tokens: tuple[str, ...] = ()
    reserved_tokens: ClassVar[Mapping[str, str]] = {}  # token -> what it is in the mode

    # ----- the pre-split ---------------------------------------------------------------------
    def split(self, text: str, pattern: str | None) -> list[str]:
        """The pieces text is encoded in separately (no merge crosses one), in order."""
        raise NotImplementedError(f"mode {self.name!r} does not say how it splits text")

    def iter_split(self, text: str, pattern: str | None) -> Iterator[str]:
        """`split`, lazily, for whole corpora; modes that can should not build the list."""
        return iter(self.split(text, pattern))

    def split_pattern(self, pattern: str | None) -> str | None:
        """A regex whose matches are exactly `split`'s pieces, for peers that split by regex
        (tiktoken, the exports); None when the mode cannot be said as one."""
        return None

    def spans(self, text: str, start: int, end: int, pattern: str | None) -> list[tuple[int, int]]:
        """(start, end) character offsets of the pieces of text[start:end]. Pieces are found in
        order in the text, so this works for any `split` that keeps its pieces' characters."""
        found: list[tuple[int, int]] = []
        at = start
        for piece in self.split(text[start:end], pattern):
            at = text.index(piece, at, end)
            found.append((at, at + len(piece)))
            at += len(piece)
        return found

    # ----- the symbols -----------------------------------------------------------------------
    def base_size(self, alphabet_size: int) -> int:
        """How many ids the base symbols take (the first merge gets this id)."""
        raise NotImplementedError

    def base_description(self, alphabet_size: int) -> str:
        """How many ids the base symbols take and what they are, for a refusal."""
        return f"{self.base_size(alphabet_size):,} base ids"

    def base_vocab(self, alphabet: list[str] | None) -> dict[int, bytes]:
        """id -> bytes of each base symbol."""
        raise NotImplementedError

    def base_symbols(self, tok: Tokenizer, piece: str) -> list[int]:
        """The ids a piece starts as, before any merge."""
        raise NotImplementedError

    def end_of_word_id(self, alphabet: list[str] | None) -> int | None:
        return None

    def word_ending_ids(self, tok: Tokenizer) -> frozenset[int]:
        """The ids of tokens that close a word (words mode's `</w>` and what ends with it)."""
        return frozenset()

    # ----- training --------------------------------------------------------------------------
    def training_input(self, text: str, pattern: str | None, splitter: Splitter) -> TrainingInput:
        """The weighted sequences training starts from (and the alphabet, if the mode has one);
        `splitter` holds the trainer's stop checks and its ways of cutting large texts."""
        raise NotImplementedError

    # ----- encode and decode with our own merges ----------------------------------------------
    def encode_ordinary(self, tok: Tokenizer, text: str) -> list[int]:
        """The ids of text holding no special token, by our own merges (no fast path)."""
        raise NotImplementedError

    def piece_encoder(self) -> PieceEncoder:
        """What encodes one of `split`'s pieces, called as `encoder(tok, piece)`: a function
        rather than a method, so `Tokenizer.encode_piece` costs one call per piece."""
        return encode_as_text

    def encode_chunks(self, tok: Tokenizer, text: str) -> list[list[int]]:
        """`Tokenizer.encode_chunks`: the ids of each chunk, or of the whole text as one."""
        return [tok._encode_ordinary(text)]

    def fast_path_suits(self, multibyte: bool) -> bool:
        """Whether long text should try the tiktoken fast path (when it applies at all)."""
        return True

    def decode_bytes(self, tok: Tokenizer, ids: Iterable[int]) -> bytes:
        raise NotImplementedError

    def decode(self, tok: Tokenizer, ids: Iterable[int]) -> str:
        raise NotImplementedError


def encode_as_text(tok: Tokenizer, piece: str) -> list[int]:
    """A piece encoded as a text of its own (naive pieces are whole texts; words split alike)."""
    return tok._encode_ordinary(piece)
