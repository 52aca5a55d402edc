"""The tokeniser: merges in learned order plus special tokens; everything else is derived.

How ids are laid out and how text is cut and encoded depends on the tokeniser's mode
(`bpe.modes`: naive, chunked, words) and its encode rule (`bpe.rules`: merges, tiktoken, hf);
`Tokenizer` holds the state and asks those two objects, never branching on their names.
- Byte-level modes (`naive`, `chunked`): ids 0..255 are the single bytes; merge k (0-based)
  gets id 256 + k.
- `words`: ids 0..A-1 are the training text's distinct characters (sorted by code point), id A
  is the end-of-word symbol `</w>`, merge k gets id A + 1 + k (`bpe.modes.words`).
- Special tokens take the ids right after the last merge, in the order given, so they are always
  the last ids of the vocabulary.

Imported tokenisers (`bpe.importers`: tiktoken rank files, HF `tokenizer.json`) keep the file's
own ids instead: `tokens` holds every ordinary token's bytes by id (single bytes anywhere, holes
allowed), special tokens keep their ids, and `rule` says how encoding works: `"tiktoken"` (the
rank of the joined bytes, `bpe.rank_rule`), `"hf"` (the file's merge order, `bpe.hf_rule`) or
`"hf_pipeline"` (HF's whole pipeline, `bpe.hf`, held in `hf_pipeline`: its `tokens` are the
bytes of byte-level vocabularies, or the UTF-8 of a SentencePiece-style token's text, `▁` and
`<0xNN>` as written; see `bpe.hf.pipeline`).
Their `merges` are for display: the file's own (HF) or derived from the ranks (tiktoken). Code
that needs "is this id a merge, which rank" asks `merge_rank(id)`, never `id - base_size`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import regex

from bpe.cuts import CutTable
from bpe.encoder import CharacterEncoder
from bpe.modes import END_OF_WORD, UNKNOWN, TrainingMode, get_mode, mode_names
from bpe.modes.base import PieceEncoder
from bpe.patterns import BUILT_IN_PATTERNS, split_deadline
from bpe.pretokenize import PreTokenizer
from bpe.rules import EncodingRule, get_rule
from bpe.stitch import Stitcher, whole_tokens
from bpe.tiktoken_path import TiktokenPath

# Named in annotations only: `import bpe` (every training process, every `bpe` command) does
# not load the HF pipeline and the chat templates, which only imported tokenisers use.
if TYPE_CHECKING:
    from bpe.chat_types import ChatTemplate
    from bpe.hf.pipeline import HfPipeline, StretchTrace
    from bpe.hf_rule import MergeMap

__all__ = [
    "END_OF_WORD",
    "MODES",
    "UNKNOWN",
    "EncodeRule",
    "Engine",
    "ImportSource",
    "Mode",
    "Tokenizer",
    "TrainingStats",
]

MODES = mode_names()  # the built-in modes' names; `bpe.modes.mode_names()` adds registered ones
Mode = Literal["naive", "chunked", "words"]  # the built-in modes (`bpe.modes` may register more)
# merges: our own lowest-id-pair rule; tiktoken: lowest rank of the joined bytes; hf: the
# file's merge order (`bpe.rules`)
EncodeRule = Literal["merges", "tiktoken", "hf", "hf_pipeline"]
Engine = Literal["auto", "pure"]  # encode's choice: the tiktoken fast path where it applies, or not


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
    hf_pipeline: HfPipeline | None = None  # rule "hf_pipeline": HF's components (`bpe.hf`)
    # A model's chat template and BOS/EOS texts, from its tokenizer_config.json (`bpe.chat`).
    chat_template: ChatTemplate | None = None

    def __post_init__(self) -> None:
        self._chunk_cache: dict[str, list[int]] = {}
        # Imported rules: the parts long pieces are cut into, encoded without the whole-piece
        # shortcut, so apart from the pieces (`bpe.rules.base.ImportedRule.encode_new_pieces`).
        self._part_cache: dict[str, list[int]] = {}

    @cached_property
    def mode_object(self) -> TrainingMode:
        """The registered mode named by `mode` (`bpe.modes`): how text is cut and encoded."""
        return get_mode(self.mode)

    @cached_property
    def rule_object(self) -> EncodingRule:
        """The registered rule named by `rule` (`bpe.rules`): how a piece's merges apply."""
        return get_rule(self.rule)

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
        return self.mode_object.base_size(len(self.alphabet or []))

    @property
    def end_of_word_id(self) -> int | None:
        return self.mode_object.end_of_word_id(self.alphabet)

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
        """(left_id, right_id) -> new_id; the new id is also the merge's rank (our own rule,
        `bpe.rules.merges`, so meaningful for our own tokenisers only)."""
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
        table.update(self.mode_object.base_vocab(self.alphabet))
        for left, right, new in self.merges:
            table[new] = table[left] + table[right]
        for text, i in self.special_tokens.items():
            table[i] = text.encode("utf-8")
        return table

    @cached_property
    def _ends_word(self) -> frozenset[int]:
        return self.mode_object.word_ending_ids(self)

    def ends_word(self, token_id: int) -> bool:
        """True for words-mode tokens that end with `</w>`."""
        return token_id in self._ends_word

    def token_bytes(self, token_id: int) -> bytes:
        try:
            return self.vocab[token_id]
        except KeyError:
            raise ValueError(self._missing_id(token_id)) from None

    def display_bytes(self, token_id: int) -> bytes:
        """What a token stands for in decoded text, for display: its bytes, except in
        SentencePiece-style HF imports (Llama 2), whose `▁` is a space and whose `<0xNN>`
        tokens are that byte (`bpe.hf.pipeline`)."""
        data = self.token_bytes(token_id)
        pipeline = self.hf_pipeline
        if pipeline is None or pipeline.spelling == "byte_level" or self.is_special(token_id):
            return data
        return pipeline.display_bytes(data)

    def base_kind(self, token_id: int) -> str:
        """What a token that no merge makes stands for: a "byte", or a "character" (words mode,
        and the characters of SentencePiece-style HF imports, whose `<0xNN>` tokens are bytes)."""
        pipeline = self.hf_pipeline
        if pipeline is not None and pipeline.spelling != "byte_level":
            return "byte" if pipeline.is_byte_token(self.token_bytes(token_id)) else "character"
        return "byte" if self.mode_object.byte_level else "character"

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
        add_special_tokens: bool = False,
    ) -> list[int]:
        """Text -> ids. Special tokens are recognised only if allowed, otherwise they are text.
        `merge_limit=k` uses only the first k merges (see `bpe.stepwise`); None uses them all.
        `engine="auto"` hands long byte-level texts to tiktoken when it is installed and
        provably gives the same ids (`bpe.tiktoken_path`); `"pure"` always encodes in Python.
        `add_special_tokens=True` puts the model's own special tokens around the ids as HF's
        post-processor does (`<s>` first for Llama 2); tokenisers without one add nothing.
        HF imports' added tokens that are not special are always recognised, as in HF.

        >>> tok = Tokenizer(mode="naive", merges=[(97, 97, 256), (256, 97, 257), (257, 98, 258)])
        >>> tok.encode("abaaab")
        [97, 98, 258]
        >>> tok.encode("abaaab", merge_limit=1)
        [97, 98, 256, 97, 98]
        """
        if self.hf_pipeline is not None:
            return self._encode_pipeline(
                self.hf_pipeline, text, allowed_special, merge_limit, add_special_tokens
            )
        if not self._timed_splits:
            return self._encode(text, allowed_special, merge_limit, engine)
        with split_deadline(len(text)):  # one split time limit for all of the text's pieces
            return self._encode(text, allowed_special, merge_limit, engine)

    @cached_property
    def _timed_splits(self) -> bool:
        """Does encoding split with a pattern of the file's or the trainer's own (which runs
        under a time limit), not only with the built-in ones?"""
        patterns = [self.pattern] if self.pattern is not None else []
        if self.pre_tokenizer is not None:
            patterns += [step.pattern for step in self.pre_tokenizer.splits]
        return any(pattern not in BUILT_IN_PATTERNS for pattern in patterns)

    def _encode(
        self,
        text: str,
        allowed_special: Literal["all"] | Iterable[str],
        merge_limit: int | None,
        engine: Engine,
    ) -> list[int]:
        if merge_limit is not None and merge_limit < len(self.merges):
            return self.rule_object.encode_limited(self, text, merge_limit, allowed_special)
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

    def _encode_pipeline(
        self,
        pipeline: HfPipeline,
        text: str,
        allowed_special: Literal["all"] | Iterable[str],
        merge_limit: int | None,
        add_special_tokens: bool,
    ) -> list[int]:
        skip, merges = self._pipeline_options(pipeline, allowed_special, merge_limit)
        return pipeline.encode(
            text, skip=skip, merges=merges, add_special_tokens=add_special_tokens
        )

    def _pipeline_options(
        self,
        pipeline: HfPipeline,
        allowed_special: Literal["all"] | Iterable[str],
        merge_limit: int | None,
    ) -> tuple[frozenset[int], MergeMap | None]:
        """The added tokens an HF pipeline treats as text, and its first k merges (None: all)."""
        allowed = self._allowed_specials(allowed_special).values()
        merges = None
        if merge_limit is not None and merge_limit < len(self.merges):
            merges = {
                (left, right): (rank, new)
                for rank, (left, right, new) in enumerate(self.merges[: max(merge_limit, 0)])
            }
        return pipeline.skipped(allowed), merges

    def pipeline_trace(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Iterable[str] = (),
        merge_limit: int | None = None,
    ) -> list[StretchTrace]:
        """An `hf_pipeline` import's `encode`, stage by stage (`bpe.hf.pipeline.HfPipeline.trace`):
        the ids of its words, in order, are `encode(text, ...)`'s."""
        pipeline = self.hf_pipeline
        if pipeline is None:
            raise ValueError("only a tokeniser imported through HF's pipeline has its stages")
        skip, merges = self._pipeline_options(pipeline, allowed_special, merge_limit)
        return pipeline.trace(text, skip=skip, merges=merges)

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
        from bpe.batch import encode_batch  # its process pool's modules, only when asked

        return encode_batch(
            self, list(texts), allowed_special=allowed_special, engine=engine, workers=workers
        )

    @cached_property
    def fast_path(self) -> TiktokenPath | None:
        """The tiktoken fast path for this tokeniser, or None where it does not apply."""
        return TiktokenPath.build(self)

    def special_segments(
        self, text: str, allowed_special: Literal["all"] | Iterable[str]
    ) -> list[tuple[str, int | None]]:
        """(stretch, None) for ordinary text and (token, its id) for each allowed special token,
        in order, covering the text."""
        allowed = self._allowed_specials(allowed_special)
        return _split_on_specials(text, allowed) if allowed else [(text, None)]

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
        return self.rule_object.encode_ordinary(self, text, engine)

    def pieces(self, text: str) -> list[str]:
        """The pieces encoding works on separately (no merge crosses one): the split pattern's
        chunks, HF's pre-tokenized words, or the whole text in naive mode."""
        if self.hf_pipeline is not None:
            return self.hf_pipeline.pieces(text)
        if self.pre_tokenizer is not None:
            return self.pre_tokenizer.pieces(text)
        return self.mode_object.split(text, self.pattern)

    def iter_pieces(self, text: str) -> Iterator[str]:
        """`pieces`, lazily, for whole corpora (see `bpe.evaluate`)."""
        if self.hf_pipeline is not None:
            return iter(self.hf_pipeline.pieces(text))
        if self.pre_tokenizer is not None:
            return self.pre_tokenizer.iter_pieces(text)
        return self.mode_object.iter_split(text, self.pattern)

    def encode_piece(self, piece: str) -> list[int]:
        """The ids of one of `pieces(text)`; concatenated they are `encode(text)`."""
        return self._piece_encoder(self, piece)

    @cached_property
    def _piece_encoder(self) -> PieceEncoder:
        # Chosen once: `bpe.evaluate` calls encode_piece for every piece of a corpus.
        return self.rule_object.piece_encoder(self)

    def encode_chunks(self, text: str) -> list[list[int]]:
        """Chunked mode: the ids of each chunk separately (other modes: one list)."""
        return self.mode_object.encode_chunks(self, text)

    # The tables the encoders share, built on first use and kept with the tokeniser.
    @cached_property
    def _cuts(self) -> CutTable:
        vocab = self.vocab
        return CutTable(vocab[new] for _, _, new in self.merges)

    @cached_property
    def _vocab_cuts(self) -> CutTable:
        # Every token, not only the merges' (an imported file's tokens need not all come from
        # its merges, and tiktoken's rule joins any two parts whose bytes are a token).
        return CutTable(self.vocab.values())

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
        self._part_cache.clear()
        if self.hf_pipeline is not None:
            self.hf_pipeline.model.clear_cache()
        if "_stitcher" in self.__dict__:
            self._stitcher.clear()

    # ----- decode ----------------------------------------------------------------------------
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes of ids (words mode: each `</w>` becomes one space, see `decode`;
        SentencePiece-style HF imports: the UTF-8 of `decode`, which is what their decoder
        gives)."""
        if self.hf_pipeline is not None and self.hf_pipeline.spelling != "byte_level":
            return self.decode(ids).encode("utf-8")
        return self.mode_object.decode_bytes(self, ids)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; bytes that are not valid UTF-8 become U+FFFD.

        Words mode is lossy on whitespace by design: each word comes back followed by one space
        where its `</w>` was, the final space is dropped, so `"a  b\\n"` decodes as `"a b"`;
        `<unk>` and other special tokens decode to their own text. HF imports with a pipeline
        decode through the file's decoders, as `tokenizers` does with
        `skip_special_tokens=False`.
        """
        if self.hf_pipeline is not None:
            ids = list(ids)
            try:
                return self.hf_pipeline.decode(ids)
            except KeyError as exc:
                raise ValueError(self._missing_id(exc.args[0])) from None
        return self.mode_object.decode(self, ids)


def _split_on_specials(text: str, allowed: Mapping[str, int]) -> list[tuple[str, int | None]]:
    """Cut text around allowed special tokens, longest match first at each position."""
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
