"""HF's BPE model on one pre-tokenized word: characters to ids, then the file's merges.

Each character is looked up in the vocabulary, spelled with `continuing_subword_prefix` when it
is not the word's first and with `end_of_word_suffix` when it is its last. A character that is
not there becomes its UTF-8 bytes as `<0xNN>` tokens with `byte_fallback` (when every one of
them exists), else the `unk_token` (one per character, or one per run with `fuse_unk`), else it
is dropped, exactly as `tokenizers` does. The merges then run as `bpe.hf_rule.merge_word` runs
them. With `ignore_merges` a word that is itself in the vocabulary is that token at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import regex

from bpe.hf.errors import Malformed, Unsupported
from bpe.hf_rule import MergeMap, merge_word
from bpe.patterns import compile_pattern

CACHE_LIMIT = 100_000  # words remembered per model before the cache starts again


@dataclass(frozen=True)
class ModelOptions:
    """The BPE model's settings other than its vocabulary and merges, as the file names them."""

    unk_token: str | None = None
    byte_fallback: bool = False
    fuse_unk: bool = False
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None
    ignore_merges: bool = False

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ModelOptions:
        kind = raw.get("type", "BPE" if "merges" in raw else None)
        if kind != "BPE":
            raise Unsupported(f"a {kind or 'untyped'} model", "imports take BPE models only")
        if raw.get("dropout") not in (None, 0, 0.0):
            raise Unsupported("BPE dropout", "it makes encoding random")
        for key in ("unk_token", "continuing_subword_prefix", "end_of_word_suffix"):
            if raw.get(key) is not None and not isinstance(raw.get(key), str):
                raise Malformed(f"model.{key} must be a string or null")
        return cls(
            unk_token=raw.get("unk_token"),
            byte_fallback=bool(raw.get("byte_fallback", False)),
            fuse_unk=bool(raw.get("fuse_unk", False)),
            continuing_subword_prefix=raw.get("continuing_subword_prefix"),
            end_of_word_suffix=raw.get("end_of_word_suffix"),
            ignore_merges=bool(raw.get("ignore_merges", False)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "BPE",
            "unk_token": self.unk_token,
            "byte_fallback": self.byte_fallback,
            "fuse_unk": self.fuse_unk,
            "continuing_subword_prefix": self.continuing_subword_prefix,
            "end_of_word_suffix": self.end_of_word_suffix,
            "ignore_merges": self.ignore_merges,
        }


@dataclass(eq=False)
class BpeModel:
    vocab: dict[str, int]  # the model's token text -> id
    merges: MergeMap  # (left_id, right_id) -> (rank, new_id)
    options: ModelOptions
    _cache: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unk = self.options.unk_token
        self._unk_id = None if unk is None else self.vocab.get(unk)
        if unk is not None and self._unk_id is None:
            raise Unsupported(
                f"the unk_token {unk!r:.40}, which is not in the model's vocabulary",
                "tokenizers fails on every text with an unknown character",
            )
        self._byte_ids = None
        if self.options.byte_fallback:
            found = [self.vocab.get(f"<0x{b:02X}>") for b in range(256)]
            self._byte_ids = found
        self._plain = not (
            self.options.continuing_subword_prefix or self.options.end_of_word_suffix
        )
        self._boundary = (
            _word_boundary(self.vocab) if self._plain and not self.options.ignore_merges else None
        )

    def _pieces(self, word: str) -> list[str]:
        # With no pre-tokenizer (Llama 2) a whole text is one word. Where `▁` only ever opens
        # a token (alone or in a leading run), no merge joins a character to a `▁` after it,
        # so the word's stretches from each run of `▁` on encode alone, and each is
        # remembered like a word.
        boundary = self._boundary
        if boundary is None or len(word) < 64:
            return [word]
        return boundary.findall(word)

    def clear_cache(self) -> None:
        self._cache.clear()

    def tokenize(self, word: str) -> list[int]:
        pieces = self._pieces(word)
        if len(pieces) == 1:
            return self._tokenize_one(word)
        out: list[int] = []
        for piece in pieces:
            out.extend(self._tokenize_one(piece))
        return out

    def _tokenize_one(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is None:
            cached = self.tokenize_with(word, self.merges, ignore_merges=self.options.ignore_merges)
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[word] = cached
        return cached

    def tokenize_with(self, word: str, merges: MergeMap, *, ignore_merges: bool) -> list[int]:
        """The word's ids under `merges` (the model's, or the first k of them)."""
        if not word:
            return []
        if ignore_merges:
            whole = self.vocab.get(word)
            if whole is not None:
                return [whole]
        return merge_word(self.symbols(word), merges)

    def symbols(self, word: str) -> list[int]:
        """The ids of the word's characters before any merge."""
        vocab = self.vocab
        if self._plain:
            ids = [vocab.get(c) for c in word]
            if None not in ids:
                return ids  # type: ignore[return-value]
        prefix = self.options.continuing_subword_prefix or ""
        suffix = self.options.end_of_word_suffix or ""
        out: list[int] = []
        # An unknown character's unk waits until a known character (or the end) comes, so a
        # run of them can fuse; byte-fallback ids do not flush it, as in `tokenizers`.
        pending_unk = False
        last = len(word) - 1
        for k, char in enumerate(word):
            text = (prefix if k else "") + char + (suffix if k == last else "")
            found = vocab.get(text)
            if found is not None:
                if pending_unk:
                    out.append(self._unk_id)  # type: ignore[arg-type]
                    pending_unk = False
                out.append(found)
                continue
            if self._byte_ids is not None:
                fallback = [self._byte_ids[b] for b in text.encode("utf-8")]
                if None not in fallback:
                    out.extend(fallback)  # type: ignore[arg-type]
                    continue
            if self._unk_id is None:
                continue
            if pending_unk and not self.options.fuse_unk:
                out.append(self._unk_id)
            pending_unk = True
        if pending_unk:
            out.append(self._unk_id)  # type: ignore[arg-type]
        return out


def _word_boundary(vocab: dict[str, int]) -> regex.Pattern[str] | None:
    """The stretches a word may be cut into when every `▁` in the vocabulary is in a token's
    leading run of them (SentencePiece's word starts), else None."""
    mark = "\u2581"
    if mark not in vocab or any(mark in token.lstrip(mark) for token in vocab):
        return None
    return compile_pattern(f"{mark}*[^{mark}]+|{mark}+")


def merge_table(
    merges: list[tuple[str, str]], vocab: dict[str, int], prefix: str | None
) -> tuple[dict[tuple[int, int], tuple[int, int]], list[tuple[int, int, int]]]:
    """The merge map `tokenizers` builds from the file's pairs, and the pairs as id triples.

    A merge makes `left + right` with the continuing-subword prefix's length cut off the
    right part's front, as `tokenizers` makes it; a pair listed twice keeps its later rank.
    """
    cut = len((prefix or "").encode("utf-8"))
    table: dict[tuple[int, int], tuple[int, int]] = {}
    triples: list[tuple[int, int, int]] = []
    for rank, (left, right) in enumerate(merges):
        made = left + right.encode("utf-8")[cut:].decode("utf-8", errors="strict")
        ids = (vocab.get(left), vocab.get(right), vocab.get(made))
        if None in ids:
            raise Malformed(
                f"merge {rank} ({left!r:.30}, {right!r:.30}) uses or makes a token that is not "
                "in the vocabulary"
            )
        a, b, new = ids
        table[(a, b)] = (rank, new)  # type: ignore[index,assignment]
        triples.append((a, b, new))  # type: ignore[arg-type]
    return table, triples
