"""The tokeniser: merges in learned order plus special tokens; everything else is derived.

Ids, by mode:
- `naive` and `chunked`: ids 0..255 are the single bytes; merge k (0-based) gets id 256 + k.
- `words`: ids 0..A-1 are the training text's distinct characters (the alphabet, sorted by code
  point), id A is the end-of-word symbol `</w>`, merge k gets id A + 1 + k. Sorting the alphabet
  by code point makes the tie rule (smallest (left_id, right_id)) deterministic and independent
  of the order words were seen in.
- Special tokens take the ids right after the last merge, in the order given, so they are always
  the last ids of the vocabulary.

Imported tokenisers (`bpe.importers`: tiktoken rank files, HF `tokenizer.json`) keep the file's
own ids instead: `tokens` holds every ordinary token's bytes by id (single bytes anywhere, holes
allowed), special tokens keep their ids, and `rule` says how encoding works: `"tiktoken"` (the
rank of the joined bytes, `bpe.rank_rule`) or `"hf"` (the file's merge order, `bpe.hf_rule`).
Their `merges` are for display: the file's own (HF) or derived from the ranks (tiktoken). Code
that needs "is this id a merge, which rank" asks `merge_rank(id)`, never `id - base_size`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import regex

from bpe import hf_rule, rank_rule
from bpe.cuts import CutTable
from bpe.encoder import CharacterEncoder, encode_ids, encode_joined, encode_pieces
from bpe.patterns import compile_pattern, split_chunks
from bpe.pretokenize import PreTokenizer
from bpe.stitch import Stitcher, whole_tokens
from bpe.tiktoken_path import TiktokenPath

MODES = ("naive", "chunked", "words")
Mode = Literal["naive", "chunked", "words"]
RULES = ("merges", "tiktoken", "hf")
# merges: seed 002 (our own); tiktoken: lowest rank of the joined bytes; hf: the file's merge order
EncodeRule = Literal["merges", "tiktoken", "hf"]
Engine = Literal["auto", "pure"]  # encode's choice: the tiktoken fast path where it applies, or not
END_OF_WORD = "</w>"
UNKNOWN = "<unk>"
# Chunks are cached as encoded; past this many distinct chunks the cache starts over, which
# bounds memory on adversarial input while keeping the hit rate high on natural text.
_CHUNK_CACHE_LIMIT = 200_000
# From this length on, `encode` tries the tiktoken fast path (building it costs ~0.1 s, once).
_FAST_PATH_MIN_CHARS = 2_000
# Above this many UTF-8 bytes per character, chunked text is cut as a whole (see _encode_ordinary).
_MULTIBYTE_SHARE = 1.5
_WORD = regex.compile(r"[^\s\x1c-\x1f\x85]+")  # what str.split() calls a word, found lazily


@dataclass
class TrainingStats:
    """How a tokeniser was trained, kept with it so pages can plot the compression curve."""

    trainer: str
    vocab_size: int  # as requested; the real vocabulary can be smaller if pairs ran out
    min_frequency: int
    initial_tokens: int  # tokens in the training data before any merge
    merge_counts: list[int]  # merge k's pair count when it was learned
    tokens_after: list[int]  # total tokens after merge k
    seconds: float | None = None


@dataclass(frozen=True)
class ImportSource:
    """Where an imported tokeniser came from."""

    format: Literal["tiktoken", "hf"]
    filename: str  # the file's name as given, for display
    sha256: str  # of the file's bytes (the rank file, for tiktoken)
    name: str | None = None  # the encoding's own name, when the file says (e.g. cl100k_base)


@dataclass(eq=False)
class Tokenizer:
    mode: Mode
    merges: list[tuple[int, int, int]]  # (left_id, right_id, new_id) in learned order
    special_tokens: dict[str, int] = field(default_factory=dict)  # token text -> id
    pattern: str | None = None  # the split regex, chunked mode only
    alphabet: list[str] | None = None  # words mode only: id -> character
    training: TrainingStats | None = None
    # ----- imported tokenisers only (defaults: trained here) -----
    rule: EncodeRule = "merges"
    tokens: dict[int, bytes] | None = None  # id -> bytes of every ordinary (non-special) token
    pre_tokenizer: PreTokenizer | None = None  # HF imports: how text is cut before merging
    ignore_merges: bool = False  # HF: a piece that is a token is that token, merges skipped
    source: ImportSource | None = None

    def __post_init__(self) -> None:
        self._chunk_cache: dict[str, list[int]] = {}

    # ----- sizes and ids -------------------------------------------------------------------
    @property
    def imported(self) -> bool:
        return self.tokens is not None

    @property
    def base_size(self) -> int:
        """How many ordinary tokens are not made by a merge: 256 bytes, or the alphabet plus
        `</w>`; for our own tokenisers these are exactly the ids below `base_size`."""
        if self.tokens is not None:
            return len(self.tokens) - len(self._merge_ranks)
        if self.mode == "words":
            return len(self.alphabet or []) + 1
        return 256

    @property
    def end_of_word_id(self) -> int | None:
        return len(self.alphabet or []) if self.mode == "words" else None

    @property
    def vocab_size(self) -> int:
        """How many ids exist (special tokens included)."""
        if self.tokens is not None:
            return len(self.vocab)
        return self.base_size + len(self.merges) + len(self.special_tokens)

    @cached_property
    def id_limit(self) -> int:
        """One more than the largest id (tiktoken's `n_vocab`); equals `vocab_size` unless the
        ids have holes, as imported files may (cl100k_base has no id 100256)."""
        return max(self.vocab, default=-1) + 1

    def has_id(self, token_id: int) -> bool:
        return token_id in self.vocab

    @cached_property
    def ordinary_ids(self) -> list[int]:
        """Every id that is not only a special token, ascending: bytes, merges, other tokens."""
        if self.tokens is not None:
            return sorted(self.tokens)
        return list(range(self.base_size + len(self.merges)))

    @cached_property
    def ranks(self) -> dict[tuple[int, int], int]:
        """(left_id, right_id) -> new_id; the new id is also the merge's rank (seed 002's rule,
        so meaningful for our own tokenisers only)."""
        return {(left, right): new for left, right, new in self.merges}

    @cached_property
    def _merge_ranks(self) -> dict[int, int]:
        """new_id -> the rank (0-based position in `merges`) of the first merge making it."""
        found: dict[int, int] = {}
        for rank, (_, _, new) in enumerate(self.merges):
            found.setdefault(new, rank)
        return found

    def is_special(self, token_id: int) -> bool:
        return token_id in self._id_to_special

    def merge_rank(self, token_id: int) -> int | None:
        """The rank of the merge that makes this id, None for base tokens and special tokens."""
        if self.tokens is None:
            rank = token_id - self.base_size
            return rank if 0 <= rank < len(self.merges) else None
        if token_id in self._id_to_special and token_id not in self.tokens:
            return None
        return self._merge_ranks.get(token_id)

    @cached_property
    def byte_ids(self) -> list[int]:
        """byte value -> the id of that single byte (0..255 for our byte-level tokenisers)."""
        if self.tokens is None:
            return list(range(256))
        by_bytes = self.mergeable_ranks
        return [by_bytes[bytes([b])] for b in range(256)]

    @cached_property
    def mergeable_ranks(self) -> dict[bytes, int]:
        """Ordinary token bytes -> id (imported tokenisers, where each byte string has one id)."""
        return {data: token_id for token_id, data in sorted((self.tokens or {}).items())}

    @cached_property
    def _hf_merges(self) -> dict[tuple[int, int], tuple[int, int]]:
        # Built like `tokenizers`' merge map: a pair listed twice keeps its later rank.
        return {(left, right): (rank, new) for rank, (left, right, new) in enumerate(self.merges)}

    @cached_property
    def _id_to_special(self) -> dict[int, str]:
        return {i: s for s, i in self.special_tokens.items()}

    @cached_property
    def _char_to_id(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.alphabet or [])}

    @cached_property
    def vocab(self) -> dict[int, bytes]:
        """id -> the bytes it stands for (special tokens: their UTF-8 text).

        In words mode the bytes are the token's characters; `</w>` adds no bytes, use
        `ends_word(id)` to know whether a token closes a word.
        """
        table: dict[int, bytes] = {}
        if self.tokens is not None:
            table.update(self.tokens)
            for text, i in self.special_tokens.items():
                table[i] = text.encode("utf-8")
            return table
        if self.mode == "words":
            for i, char in enumerate(self.alphabet or []):
                table[i] = char.encode("utf-8")
            table[self.base_size - 1] = b""
        else:
            for i in range(256):
                table[i] = bytes([i])
        for left, right, new in self.merges:
            table[new] = table[left] + table[right]
        for text, i in self.special_tokens.items():
            table[i] = text.encode("utf-8")
        return table

    @cached_property
    def _ends_word(self) -> frozenset[int]:
        if self.mode != "words":
            return frozenset()
        ending = {self.base_size - 1}
        for _, right, new in self.merges:
            if right in ending:
                ending.add(new)
        return frozenset(ending)

    def ends_word(self, token_id: int) -> bool:
        """True for words-mode tokens that end with `</w>`."""
        return token_id in self._ends_word

    def token_bytes(self, token_id: int) -> bytes:
        try:
            return self.vocab[token_id]
        except KeyError:
            raise ValueError(self._missing_id(token_id)) from None

    def _missing_id(self, token_id: object) -> str:
        if self.id_limit == self.vocab_size:
            return f"token id {token_id} is not in this vocabulary (ids run 0..{self.id_limit - 1})"
        return (
            f"token id {token_id} is not in this vocabulary (ids run 0..{self.id_limit - 1},"
            f" with {self.id_limit - self.vocab_size} unused ids in between)"
        )

    def id_to_token(self, token_id: int) -> str:
        """A readable form of one token: specials as-is, `</w>` spelled out, bad UTF-8 replaced."""
        if token_id in self._id_to_special:
            return self._id_to_special[token_id]
        text = self.token_bytes(token_id).decode("utf-8", errors="replace")
        return text + END_OF_WORD if self.ends_word(token_id) else text

    def token_to_id(self, token: str) -> int | None:
        if token in self.special_tokens:
            return self.special_tokens[token]
        return self._token_index.get(token)

    @cached_property
    def _token_index(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for token_id in self.ordinary_ids:
            index.setdefault(self.id_to_token(token_id), token_id)
        return index

    # ----- encode ----------------------------------------------------------------------------
    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Iterable[str] = (),
        merge_limit: int | None = None,
        engine: Engine = "auto",
    ) -> list[int]:
        """Text -> ids. Special tokens are recognised only if allowed, otherwise they are text.
        `merge_limit=k` uses only the first k merges (see `bpe.stepwise`); None uses them all.
        `engine="auto"` hands long byte-level texts to tiktoken when it is installed and
        provably gives the same ids (`bpe.tiktoken_path`); `"pure"` always encodes in Python.

        >>> tok = Tokenizer(mode="naive", merges=[(97, 97, 256), (256, 97, 257), (257, 98, 258)])
        >>> tok.encode("abaaab")
        [97, 98, 258]
        >>> tok.encode("abaaab", merge_limit=1)
        [97, 98, 256, 97, 98]
        """
        if merge_limit is not None and merge_limit < len(self.merges) and self.rule != "merges":
            return self._encode_limited(text, max(merge_limit, 0), allowed_special)
        if merge_limit is not None and merge_limit < len(self.merges):
            from bpe.stepwise import encode_with_merges  # it builds on this module

            return encode_with_merges(
                self, text, merge_limit=merge_limit, allowed_special=allowed_special
            )
        allowed = self._allowed_specials(allowed_special)
        if not allowed:
            return self._encode_ordinary(text, engine)
        out: list[int] = []
        for piece, special_id in _split_on_specials(text, allowed):
            if special_id is None:
                out.extend(self._encode_ordinary(piece, engine))
            else:
                out.append(special_id)
        return out

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        allowed_special: Literal["all"] | Iterable[str] = (),
        engine: Engine = "auto",
        workers: int | None = None,
    ) -> list[list[int]]:
        """`encode` for many texts, on every core (`workers`: default all): tiktoken's threads on
        the fast path, else worker processes once the batch is large enough to pay for them."""
        from bpe.batch import encode_batch  # processes and threads live there

        return encode_batch(
            self, list(texts), allowed_special=allowed_special, engine=engine, workers=workers
        )

    @cached_property
    def fast_path(self) -> TiktokenPath | None:
        """The tiktoken fast path for this tokeniser, or None where it does not apply."""
        return TiktokenPath.build(self)

    def _encode_limited(
        self, text: str, merge_limit: int, allowed_special: Literal["all"] | Iterable[str]
    ) -> list[int]:
        """Imported tokenisers with their first k merges only, by their own rule: tiktoken's
        joins limited to tokens ranked below merge k's token (no whole-piece shortcut beyond
        it), HF's merge list cut after k."""
        limited = self._limited(merge_limit) if self.rule == "hf" else {}
        allowed = self._allowed_specials(allowed_special)
        out: list[int] = []
        pieces = _split_on_specials(text, allowed) if allowed else [(text, None)]
        for segment, special_id in pieces:
            if special_id is not None:
                out.append(special_id)
                continue
            for piece in self.pieces(segment):
                data = piece.encode("utf-8")
                if self.rule == "tiktoken":
                    bound = self.merges[merge_limit][2]
                    token = self.mergeable_ranks.get(data)
                    if token is not None and token < bound:
                        out.append(token)
                    else:
                        parts = rank_rule.split_piece(data, self.mergeable_ranks, max_rank=bound)
                        out.extend(self.mergeable_ranks[part] for part in parts)
                else:
                    out.extend(hf_rule.merge_word([self.byte_ids[b] for b in data], limited))
        return out

    def _limited(self, merge_limit: int) -> dict[tuple[int, int], tuple[int, int]]:
        return {
            (left, right): (rank, new)
            for rank, (left, right, new) in enumerate(self.merges[:merge_limit])
        }

    def _allowed_specials(self, allowed_special: Literal["all"] | Iterable[str]) -> dict[str, int]:
        if allowed_special == "all":
            return dict(self.special_tokens)
        allowed: dict[str, int] = {}
        for token in allowed_special:
            if token not in self.special_tokens:
                raise ValueError(f"{token!r} is not a special token of this tokeniser")
            allowed[token] = self.special_tokens[token]
        return allowed

    def _encode_ordinary(self, text: str, engine: Engine = "auto") -> list[int]:
        if engine == "auto" and len(text) >= _FAST_PATH_MIN_CHARS and self.rule == "merges":
            # Naive multi-byte text stays pure: one long piece is slow in tiktoken, while our
            # pieces (words) repeat (benchmarks/encode_vs_peers.py: 2x faster on Chinese).
            multibyte = len(text.encode("utf-8")) > _MULTIBYTE_SHARE * len(text)
            fast = None if self.mode == "naive" and multibyte else self.fast_path
            ids = fast.encode(text) if fast is not None else None
            if ids is not None:
                return ids
        if self.rule != "merges":
            out: list[int] = []
            for piece in self.pieces(text):
                out.extend(self._encode_imported_piece(piece))
            return out
        if self.mode == "naive":
            if len(text.encode("utf-8")) > _MULTIBYTE_SHARE * len(text):
                return self._encode_in_pieces(text)  # Chinese, say: few spaces, many safe cuts
            return self._stitcher.encode(text)
        if self.mode == "chunked":
            chunks = split_chunks(text, self.pattern or "")
            if len(text.encode("utf-8")) > _MULTIBYTE_SHARE * len(text) and len(chunks) > 1:
                # Mostly multi-byte text (Chinese, say): chunks are long and rarely repeat, so
                # cut the whole text once, at chunk ends and where no token can sit across.
                ends = list(itertools.accumulate(map(len, chunks)))
                if ends[-1] == len(text):
                    return self._encode_in_pieces(text, ends)
            return encode_joined(
                self._chunk_cache,
                chunks,
                self._encode_new_chunk,
                _CHUNK_CACHE_LIMIT,
                self._encode_new_chunks,
            )
        return self._encode_words(text)

    def _look_up(self, pieces: list[str], encode: Callable[[str], list[int]]) -> list[int]:
        """The joined ids of pieces, the new ones encoded by `encode` (once each) and cached."""
        return encode_joined(self._chunk_cache, pieces, encode, _CHUNK_CACHE_LIMIT)

    def pieces(self, text: str) -> list[str]:
        """The pieces encoding works on separately (no merge crosses one): the split pattern's
        chunks, HF's pre-tokenized words, or the whole text in naive mode."""
        if self.pre_tokenizer is not None:
            return self.pre_tokenizer.pieces(text)
        if self.mode == "chunked":
            return split_chunks(text, self.pattern or "")
        if self.mode == "words":
            return text.split()
        return [text] if text else []

    def iter_pieces(self, text: str) -> Iterator[str]:
        """`pieces`, lazily, for whole corpora (see `bpe.evaluate`)."""
        if self.pre_tokenizer is not None:
            return self.pre_tokenizer.iter_pieces(text)
        if self.mode == "chunked":
            compiled = compile_pattern(self.pattern or "")
            return (m.group() for m in compiled.finditer(text) if m.end() > m.start())
        if self.mode == "words":
            return (m.group() for m in _WORD.finditer(text))
        return iter([text] if text else [])

    def encode_piece(self, piece: str) -> list[int]:
        """The ids of one of `pieces(text)`; concatenated they are `encode(text)`."""
        if self.rule != "merges":
            return self._encode_imported_piece(piece)
        if self.mode == "chunked":
            return self._encode_chunk(piece)
        return self._encode_ordinary(piece)

    def encode_chunks(self, text: str) -> list[list[int]]:
        """Chunked mode: the ids of each chunk separately (other modes: one list)."""
        if self.rule != "merges":
            if self.mode != "chunked":
                return [self._encode_ordinary(text)]
            return [list(self._encode_imported_piece(piece)) for piece in self.pieces(text)]
        if self.mode != "chunked":
            return [self._encode_ordinary(text)]
        return [list(self._encode_chunk(chunk)) for chunk in split_chunks(text, self.pattern or "")]

    def _encode_imported_piece(self, piece: str) -> list[int]:
        cached = self._chunk_cache.get(piece)
        if cached is None:
            data = piece.encode("utf-8")
            if self.rule == "tiktoken":
                cached = rank_rule.encode_piece(data, self.mergeable_ranks)
            else:
                whole = self.mergeable_ranks.get(data) if self.ignore_merges else None
                if whole is not None:
                    cached = [whole]
                else:
                    byte_ids = self.byte_ids
                    cached = hf_rule.merge_word([byte_ids[b] for b in data], self._hf_merges)
            if len(self._chunk_cache) >= _CHUNK_CACHE_LIMIT:
                self._chunk_cache.clear()
            self._chunk_cache[piece] = cached
        return cached

    def _encode_new_chunk(self, chunk: str) -> list[int]:
        """One chunk's ids, not looked up in the cache."""
        token = self._whole_tokens.get(chunk)
        if token is not None:
            return [token]
        # ASCII chunks are short and rarely cut: encoding them whole is cheaper.
        if chunk.isascii():
            return encode_ids(list(chunk.encode("ascii")), self.ranks)
        return self._encode_in_pieces(chunk)

    def _encode_new_chunks(self, new: set[str]) -> dict[str, list[int]]:
        """`_encode_new_chunk` of each, most of them with no Python call of their own."""
        return encode_pieces(new, self.ranks, self._whole_tokens, self._encode_new_chunk)

    def _encode_chunk(self, chunk: str) -> list[int]:
        cached = self._chunk_cache.get(chunk)
        if cached is None:
            cached = self._encode_new_chunk(chunk)
            if len(self._chunk_cache) >= _CHUNK_CACHE_LIMIT:
                self._chunk_cache.clear()
            self._chunk_cache[chunk] = cached
        return cached

    @cached_property
    def _cuts(self) -> CutTable:
        vocab = self.vocab
        return CutTable(vocab[new] for _, _, new in self.merges)

    @cached_property
    def _characters(self) -> CharacterEncoder:
        return CharacterEncoder(self.ranks)

    @cached_property
    def _whole_tokens(self) -> dict[str, int]:
        return whole_tokens(self.ranks, self.vocab)

    @cached_property
    def _stitcher(self) -> Stitcher:
        return Stitcher(self.ranks, self.vocab, self._chunk_cache, self._whole_tokens)

    def clear_caches(self) -> None:
        """Forget every encoding remembered so far (pieces, chunks, token pairs): the next
        encode starts cold, as benchmarks want. Nothing changes but speed."""
        self._chunk_cache.clear()
        if "_stitcher" in self.__dict__:
            self._stitcher.clear()

    def _encode_in_pieces(self, text: str, chunk_ends: Sequence[int] = ()) -> list[int]:
        """Byte-level encoding of text, cut where no token can sit across (`bpe.cuts`) and at
        `chunk_ends`, each piece looked up in (or added to) the chunk cache: the same ids as
        encoding it whole (or chunk by chunk)."""
        data = text.encode("utf-8")
        pieces, bytewise = self._cuts.pieces(text, chunk_ends)  # bytewise: hold a partial token
        if len(pieces) == 1:
            if bytewise:
                return encode_ids(list(data), self.ranks)
            return self._characters.encode(text)
        characters, ranks, whole = self._characters, self.ranks, self._whole_tokens

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
            table.update(
                (piece, encode_ids(list(piece.encode("utf-8")), ranks)) for piece in by_bytes
            )
            return table

        def encode(piece: str) -> list[int]:
            return encode_many({piece})[piece]

        return encode_joined(self._chunk_cache, pieces, encode, _CHUNK_CACHE_LIMIT, encode_many)

    def _encode_words(self, text: str) -> list[int]:
        unknown = self.special_tokens[UNKNOWN]
        char_to_id = self._char_to_id
        end = self.base_size - 1
        out: list[int] = []
        for word in text.split():
            cached = self._chunk_cache.get(word)
            if cached is None:
                ids = [char_to_id.get(char, unknown) for char in word] + [end]
                cached = encode_ids(ids, self.ranks)
                if len(self._chunk_cache) >= _CHUNK_CACHE_LIMIT:
                    self._chunk_cache.clear()
                self._chunk_cache[word] = cached
            out.extend(cached)
        return out

    # ----- decode ----------------------------------------------------------------------------
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes of ids (words mode: each `</w>` becomes one space, see `decode`)."""
        if self.mode == "words":
            return self.decode(ids).encode("utf-8")
        vocab = self.vocab
        try:
            return b"".join(vocab[i] for i in ids)
        except KeyError as exc:
            raise ValueError(self._missing_id(exc.args[0])) from None

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; bytes that are not valid UTF-8 become U+FFFD.

        Words mode is lossy on whitespace by design: each word comes back followed by one space
        where its `</w>` was, the final space is dropped, so `"a  b\\n"` decodes as `"a b"`;
        `<unk>` and other special tokens decode to their own text.
        """
        if self.mode != "words":
            return self.decode_bytes(ids).decode("utf-8", errors="replace")
        parts: list[str] = []
        for token_id in ids:
            if token_id in self._id_to_special:
                parts.append(self._id_to_special[token_id])
                continue
            parts.append(self.token_bytes(token_id).decode("utf-8", errors="replace"))
            if self.ends_word(token_id):
                parts.append(" ")
        text = "".join(parts)
        return text.removesuffix(" ")


def _split_on_specials(text: str, allowed: Mapping[str, int]) -> list[tuple[str, int | None]]:
    """Cut text around allowed special tokens, longest match first at each position."""
    import regex

    alternatives = "|".join(regex.escape(s) for s in sorted(allowed, key=len, reverse=True))
    pieces: list[tuple[str, int | None]] = []
    start = 0
    for match in regex.finditer(alternatives, text):
        if match.start() > start:
            pieces.append((text[start : match.start()], None))
        pieces.append((match.group(), allowed[match.group()]))
        start = match.end()
    if start < len(text):
        pieces.append((text[start:], None))
    return pieces
