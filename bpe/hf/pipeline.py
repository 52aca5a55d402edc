"""One HF tokenizer as `tokenizers` runs it: added tokens, normalizer, pre-tokenizer, BPE model,
post-processor, and the decoder back (the components are this package's other modules).

`from_file` reads a whole `tokenizer.json`; `HfPipeline.to_json` / `from_saved` keep what a
saved tokeniser needs besides its tokens and merges (which `bpe.formats` stores as for every
import): the components' own JSON, the model's options, the added tokens with their flags, how
the vocabulary spells bytes, and the model's entries that are not ordinary tokens.

A vocabulary is spelled `byte_level` when every entry is in GPT-2's byte-level alphabet (the
ordinary tokens then hold the bytes they stand for) and `text` otherwise (SentencePiece-style
files such as Llama 2's: the tokens hold the UTF-8 of their text, `▁` and `<0xNN>` included).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from bpe.byte_level import byte_level_bytes, byte_level_string
from bpe.hf.added_tokens import AddedToken, AddedVocabulary, Segment
from bpe.hf.decoders import DecodeChain, build_decoder
from bpe.hf.errors import Malformed, Unsupported, type_of
from bpe.hf.model import BpeModel, ModelOptions, merge_table
from bpe.hf.normalizers import Normalizer, build_normalizer
from bpe.hf.post_processors import AddSpecial, build_post_processor
from bpe.hf.pre_tokenizers import PreTokenizerChain, Word, build_pre_tokenizer
from bpe.hf_rule import MergeMap
from bpe.patterns import compile_pattern

SPELLINGS = ("byte_level", "text")
_BYTE_TOKEN = compile_pattern("<0x([0-9A-F]{2})>")
COMPONENTS = ("normalizer", "pre_tokenizer", "decoder", "post_processor")


def text_token_display(data: bytes, *, byte_fallback: bool) -> bytes:
    """What a token of a `text`-spelled vocabulary stands for (`HfPipeline.display_bytes`).

    >>> text_token_display("\u2581the".encode(), byte_fallback=True)
    b' the'
    >>> [text_token_display(b"<0x0A>", byte_fallback=fallback) for fallback in (True, False)]
    [b'\\n', b'<0x0A>']
    """
    text = data.decode("utf-8", errors="replace")
    if byte_fallback and len(text) == 6:
        byte = _BYTE_TOKEN.fullmatch(text)
        if byte is not None:
            return bytes([int(byte.group(1), 16)])
    return text.replace("\u2581", " ").encode("utf-8")


@dataclass(frozen=True)
class WordTrace:
    """One word the model encodes (or an added token, taken whole), with its ids."""

    text: str
    ids: list[int]
    added_id: int | None = None


@dataclass(frozen=True)
class SegmentTrace:
    """A stretch's normalized text between normalized added tokens (or one such token),
    cut into words by the pre-tokenizer."""

    text: str
    token_id: int | None
    words: list[WordTrace]


@dataclass(frozen=True)
class StretchTrace:
    """Raw text between the added tokens matched before normalizing (or one of them), what
    the normalizer made of it, and its segments (`HfPipeline.trace`)."""

    raw: str
    token_id: int | None
    normalized: str
    segments: list[SegmentTrace]


@dataclass(frozen=True)
class FileParts:
    """What a tokenizer.json gives the tokeniser (`bpe.import_hf` builds it from these)."""

    pipeline: HfPipeline
    tokens: dict[int, bytes]  # id -> bytes (byte_level) or UTF-8 text (text), ordinary tokens
    merges: list[tuple[int, int, int]]  # (left, right, new) in the file's order
    added: dict[str, int]  # every added token's content -> id


class HfPipeline:
    def __init__(
        self,
        *,
        components: dict[str, Any],
        options: ModelOptions,
        spelling: str,
        vocab: dict[str, int],
        merges: MergeMap,
        added_tokens: list[AddedToken],
        model_extra: dict[str, int],
    ) -> None:
        self.components = {key: components.get(key) for key in COMPONENTS}
        self.options = options
        self.spelling = spelling
        self.model_extra = model_extra  # model entries kept out of the ordinary tokens
        self.added_tokens = added_tokens
        self.normalizer: Normalizer | None = build_normalizer(components.get("normalizer"))
        self.pre_tokenizer: PreTokenizerChain | None = build_pre_tokenizer(
            components.get("pre_tokenizer")
        )
        self.decoder: DecodeChain = build_decoder(components.get("decoder"))
        self.post_processor: AddSpecial = build_post_processor(components.get("post_processor"))
        self.model = BpeModel(vocab, merges, options)
        self.added = AddedVocabulary(added_tokens, self.normalizer)
        self._strings = {i: s for s, i in vocab.items()}
        # `tokenizers` spells a normalized added token by its normalized content when decoding.
        normalize = self.normalizer
        self._strings.update(
            {
                t.id: normalize(t.content) if t.normalized and normalize else t.content
                for t in added_tokens
            }
        )
        self._added_text = {t.content: t.id for t in added_tokens}
        self._special_ids = frozenset(t.id for t in added_tokens if t.special)

    # ----- encode ---------------------------------------------------------------------------
    def skipped(self, allowed: Collection[int]) -> frozenset[int]:
        """The special added tokens to treat as text: those not allowed."""
        return self._special_ids.difference(allowed)

    def encode(
        self,
        text: str,
        *,
        skip: Collection[int] = (),
        merges: MergeMap | None = None,
        add_special_tokens: bool = False,
    ) -> list[int]:
        """The ids `tokenizers` gives `text`, with the added tokens in `skip` left as text and
        only `merges` (the first k of the file's) when given."""
        out: list[int] = []
        for segment in self.added.segments(text, skip):
            stretch, token_id, origin = segment
            if token_id is not None:
                out.append(token_id)
            elif self.pre_tokenizer is None:
                out.extend(self._tokenize(stretch, merges))
            else:
                out.extend(self._segment_ids(stretch, origin, merges))
        return self.post_processor(out) if add_special_tokens else out

    def _segment_ids(self, stretch: str, origin: int, merges: MergeMap | None) -> list[int]:
        """`_segment_words`' words tokenized, each distinct word once. Each pre-tokenizer step
        and the model see one word (its text and origin) and nothing else, so each step runs
        once per distinct word of the step before and the model once per distinct final word;
        repeated words (most of a text's) cost a lookup in C instead of a Python call each."""
        assert self.pre_tokenizer is not None
        words: list[Word] = [(stretch, origin)]
        for step in self.pre_tokenizer.steps:
            cut = {word: [piece for piece in step(word) if piece[0]] for word in set(words)}
            words = list(itertools.chain.from_iterable(map(cut.__getitem__, words)))
        texts = list(map(operator.itemgetter(0), words))
        ids = {text: self._tokenize(text, merges) for text in set(texts)}
        return list(itertools.chain.from_iterable(map(ids.__getitem__, texts)))

    def _words(self, text: str, skip: Collection[int]) -> Iterable[tuple[str, int | None]]:
        for segment in self.added.segments(text, skip):
            yield from self._segment_words(segment)

    def _segment_words(self, segment: Segment) -> Iterable[tuple[str, int | None]]:
        text, token_id, origin = segment
        if token_id is not None:
            yield text, token_id
        elif self.pre_tokenizer is None:
            yield text, None
        else:
            for word in self.pre_tokenizer.words(text, origin):
                yield word, None

    def trace(
        self, text: str, *, skip: Collection[int] = (), merges: MergeMap | None = None
    ) -> list[StretchTrace]:
        """What `encode(text, skip=..., merges=...)` does, stage by stage: each stretch of raw
        text between the added tokens matched before normalizing, what the normalizer made of
        it, the normalized added tokens cut out of that, and each piece's words with their ids.
        The words' ids, in order, are exactly `encode`'s (the same steps, kept)."""
        out: list[StretchTrace] = []
        for stretch in self.added.stretches(text, skip):
            segments = []
            for segment in stretch.segments:
                words = [
                    WordTrace(word, [token_id] if token_id is not None else [], token_id)
                    for word, token_id in self._segment_words(segment)
                ]
                for word in words:
                    if word.added_id is None:
                        word.ids.extend(self._tokenize(word.text, merges))
                segments.append(SegmentTrace(segment[0], segment[1], words))
            out.append(StretchTrace(stretch.raw, stretch.token_id, stretch.normalized, segments))
        return out

    def _tokenize(self, word: str, merges: MergeMap | None) -> list[int]:
        if merges is None:
            return self.model.tokenize(word)
        return self.model.tokenize_with(word, merges, ignore_merges=False)

    def pieces(self, text: str) -> list[str]:
        """The words the model encodes one by one, and the added tokens' text between them."""
        return [word for word, _ in self._words(text, self._special_ids)]

    def encode_piece(self, piece: str) -> list[int]:
        """The ids of one of `pieces(text)`."""
        token_id = self._added_text.get(piece)
        if token_id is not None and token_id not in self._special_ids:
            return [token_id]
        return self.model.tokenize(piece)

    # ----- decode ---------------------------------------------------------------------------
    def token_string(self, token_id: int) -> str | None:
        """The token as `tokenizers` spells it (an added token's content), None if unknown."""
        return self._strings.get(token_id)

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        strings = []
        for token_id in ids:
            if skip_special_tokens and token_id in self._special_ids:
                continue
            found = self._strings.get(token_id)
            if found is None:
                raise KeyError(token_id)
            strings.append(found)
        return "".join(self.decoder(strings))

    def is_byte_token(self, data: bytes) -> bool:
        """Is a token of a `text`-spelled vocabulary a `<0xNN>` byte-fallback token?"""
        return (
            self.options.byte_fallback
            and len(data) == 6
            and _BYTE_TOKEN.fullmatch(data.decode("ascii", errors="replace")) is not None
        )

    def display_bytes(self, data: bytes) -> bytes:
        """What a token of a `text`-spelled vocabulary stands for in decoded text, for display:
        `▁` as a space and a `<0xNN>` byte-fallback token as its byte."""
        return text_token_display(data, byte_fallback=self.options.byte_fallback)

    # ----- saving -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            **self.components,
            "model": self.options.to_json(),
            "spelling": self.spelling,
            "model_extra": dict(self.model_extra),
            "added_tokens": [t.to_json() for t in self.added_tokens],
        }

    def to_file(self) -> dict[str, Any]:
        """A `tokenizer.json` that `tokenizers` runs exactly as this pipeline: the components'
        own JSON, the model's options, vocabulary and merges, the added tokens with their ids
        and flags. A pair the file listed twice is written once, at the later rank it kept."""
        spelled = {token_id: text for text, token_id in self.model.vocab.items()}
        ordered = sorted(self.model.merges.items(), key=lambda item: item[1][0])
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [t.to_json() for t in self.added_tokens],
            **self.components,
            "model": {
                **self.options.to_json(),
                "dropout": None,
                "vocab": dict(sorted(self.model.vocab.items(), key=lambda item: item[1])),
                "merges": [[spelled[left], spelled[right]] for (left, right), _ in ordered],
            },
        }

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Its components hold closures, which do not pickle: a worker process (`bpe.batch`)
        # rebuilds the pipeline from what a saved tokeniser keeps.
        return _rebuild, (self.to_json(), self.model.vocab, self.model.merges)

    @classmethod
    def from_saved(
        cls, saved: Any, tokens: dict[int, bytes], merges: list[tuple[int, int, int]]
    ) -> HfPipeline:
        """The pipeline a saved tokeniser's `hf_pipeline` key, tokens and merges describe."""
        if not isinstance(saved, dict) or saved.get("spelling") not in SPELLINGS:
            raise Malformed(f"hf_pipeline must be an object with a spelling in {SPELLINGS}")
        extra = saved.get("model_extra") or {}
        added_raw = saved.get("added_tokens") or []
        if not isinstance(extra, dict) or not isinstance(added_raw, list):
            raise Malformed("hf_pipeline's model_extra must be an object, added_tokens a list")
        spell = _speller(saved["spelling"])
        vocab = {spell(data): token_id for token_id, data in tokens.items()}
        vocab.update({str(text): int(token_id) for text, token_id in extra.items()})
        added = []
        for entry in added_raw:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
                raise Malformed("a saved added token needs its id")
            added.append(AddedToken.from_json(entry, entry["id"]))
        table = {(left, right): (rank, new) for rank, (left, right, new) in enumerate(merges)}
        return cls(
            components=saved,
            options=ModelOptions.from_json(saved.get("model") or {"type": "BPE"}),
            spelling=saved["spelling"],
            vocab=vocab,
            merges=table,
            added_tokens=added,
            model_extra={str(k): int(v) for k, v in extra.items()},
        )


def _rebuild(saved: dict[str, Any], vocab: dict[str, int], merges: MergeMap) -> HfPipeline:
    return HfPipeline(
        components=saved,
        options=ModelOptions.from_json(saved["model"]),
        spelling=saved["spelling"],
        vocab=vocab,
        merges=merges,
        added_tokens=[AddedToken.from_json(t, t["id"]) for t in saved["added_tokens"]],
        model_extra=saved["model_extra"],
    )


def _speller(spelling: str) -> Any:
    if spelling == "byte_level":
        return byte_level_string
    return lambda data: data.decode("utf-8")


def from_file(data: dict[str, Any]) -> FileParts:
    """A tokenizer.json's parsed JSON as a pipeline plus the tokeniser's tokens and merges."""
    for part in ("truncation", "padding"):
        if data.get(part) is not None:
            raise Unsupported(part, "it changes the ids of a text; set it to null")
    raw_model = data["model"]
    options = ModelOptions.from_json(raw_model)
    vocab = raw_model.get("vocab")
    if not isinstance(vocab, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vocab.values()
    ):
        raise Malformed("model.vocab must be an object {token: id >= 0}")
    if len(set(vocab.values())) != len(vocab):
        raise Malformed("two vocabulary entries share an id")
    pairs = _merge_pairs(raw_model.get("merges", []))
    table, triples = merge_table(pairs, vocab, options.continuing_subword_prefix)
    added = number_added_tokens(data.get("added_tokens") or [], vocab)
    added_ids = {t.content: t.id for t in added}
    spelling = "byte_level" if _byte_level_spelled(vocab, added_ids) else "text"
    tokens: dict[int, bytes] = {}
    extra: dict[str, int] = {}
    for text, token_id in vocab.items():
        data_bytes = byte_level_bytes(text) if spelling == "byte_level" else text.encode("utf-8")
        if data_bytes is None or not data_bytes:
            extra[text] = token_id
        elif text in added_ids and data_bytes != text.encode("utf-8"):
            extra[text] = token_id  # an added token spelled otherwise than its bytes
        else:
            tokens[token_id] = data_bytes
    for _, _, new in triples:
        if new not in tokens:
            raise Unsupported(f"the merge making {new}", "it makes a token held as an added one")
    pipeline = HfPipeline(
        components=data,
        options=options,
        spelling=spelling,
        vocab=dict(vocab),
        merges=table,
        added_tokens=added,
        model_extra=extra,
    )
    return FileParts(pipeline, tokens, triples, added_ids)


def _byte_level_spelled(vocab: dict[str, int], added: dict[str, int]) -> bool:
    return all(text in added or byte_level_bytes(text) is not None for text in vocab)


def _merge_pairs(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        raise Malformed("model.merges must be a list")
    pairs = []
    for k, entry in enumerate(raw):
        pair = entry.split(" ") if isinstance(entry, str) else entry
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        ):
            raise Malformed(f"merge {k} is not a pair: {entry!r:.60}")
        pairs.append((pair[0], pair[1]))
    return pairs


def number_added_tokens(raw: Any, vocab: dict[str, int]) -> list[AddedToken]:
    """The added tokens with the ids `tokenizers` gives them, which must be the file's ids.

    An added token takes the model's id when the model's vocabulary has its content, and
    otherwise the next id from the model's vocabulary size on; the written ids are only
    checked there (with a warning), so a file whose ids disagree is refused.
    """
    if not isinstance(raw, list):
        raise Malformed("added_tokens must be a list")
    model_size = len(vocab)
    model_ids = set(vocab.values())
    assigned: dict[str, int] = {}
    out: list[AddedToken] = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            raise Malformed("an added token needs its content")
        content = entry["content"]
        if not content or content in assigned:
            continue
        if content in vocab:
            token_id = vocab[content]
        elif not assigned:
            token_id = model_size
        else:
            highest = max(assigned.values())
            token_id = highest + 1 if highest >= model_size or model_size == 0 else model_size
        if content not in vocab and token_id in model_ids:
            raise Unsupported(
                f"the added token {content!r:.40}",
                f"tokenizers numbers it {token_id}, an id the model's vocabulary already uses",
            )
        if entry.get("id") != token_id:
            raise Unsupported(
                f"the id {entry.get('id')!r} of the added token {content!r:.40}",
                f"tokenizers ignores it and gives the token id {token_id}; write that id",
            )
        assigned[content] = token_id
        out.append(AddedToken.from_json(entry, token_id))
    return out


def describe(raw: Any) -> str:
    return type_of(raw)
