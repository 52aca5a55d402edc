"""What an encode rule is: how the merges inside one piece are applied.

Our own tokenisers apply the learned pair with the lowest id (`merges`); imported ones keep the
rule of the file they came from (`tiktoken`: the rank of the joined bytes; `hf`: the file's merge
order). A rule is a stateless singleton like a mode: the tables it reads (chunk cache, rank maps)
live on the `Tokenizer` it is handed (docs/algorithms.md, "Encoding").
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar, Literal

from bpe.encoder import encode_joined
from bpe.long_pieces import encode_cut, worth_cutting
from bpe.modes.base import CHUNK_CACHE_LIMIT, PieceEncoder

if TYPE_CHECKING:
    from bpe.model import Engine, Tokenizer

BytesEncoder = Callable[[bytes], list[int]]  # one piece's UTF-8 bytes -> its ids
# (left_id, right_id) -> (rank, new id) of the join it makes, None if it makes none
JoinLookup = Callable[[tuple[int, int]], tuple[int, int] | None]


class EncodingRule:
    """One way to encode a piece. Subclass it, set `name`, and register an instance with
    `bpe.rules.register_rule`."""

    name: str = ""  # what `Tokenizer.rule` and the tokeniser file's "rule" key hold
    imported: bool = False  # the rule of tokenisers imported from another library's file
    # The exports (`bpe.export_common.ExportTarget`) whose files carry this rule exactly.
    export_targets: ClassVar[frozenset[str]] = frozenset()
    # Imported rules whose files cut text with a split pattern (tiktoken's `pat_str`) rather
    # than a pre-tokenizer of their own (HF's): a chunked import needs that pattern.
    cuts_by_pattern: bool = False
    # Imported rules whose export writes the file's own pipeline back (HF's whole pipeline):
    # no mode or split pattern of ours is needed to say how the text is cut.
    exports_own_pipeline: bool = False

    def encode_ordinary(self, tok: Tokenizer, text: str, engine: Engine) -> list[int]:
        """The ids of text holding no special token."""
        raise NotImplementedError

    def piece_encoder(self, tok: Tokenizer) -> PieceEncoder:
        """What encodes one of `tok.pieces(text)`, called as `encoder(tok, piece)`."""
        raise NotImplementedError

    def encode_limited(
        self,
        tok: Tokenizer,
        text: str,
        merge_limit: int,
        allowed_special: Literal["all"] | Iterable[str],
    ) -> list[int]:
        """`tok.encode(text)` with only the first `merge_limit` merges (fewer than all)."""
        raise NotImplementedError

    # ----- the replay of one piece, a join at a time (`bpe.stepwise.replay_joins`) -----------
    def whole_piece_token(self, tok: Tokenizer, token: int, merge_limit: int | None) -> int | None:
        """`token` if a piece whose bytes are that token is taken whole before any join (with
        `merge_limit` merges only, when not None), else None: with `ignore_merges` and all the
        merges only, as `tokenizers` does."""
        return token if tok.ignore_merges and merge_limit is None else None

    def join_lookup(self, tok: Tokenizer, limit: int) -> JoinLookup:
        """The join a pair makes under the first `limit` merges: by the pair's place in the
        merge list (as `tokenizers` ranks them)."""
        return _merge_order(tok, limit).get


class ImportedRule(EncodingRule):
    """A rule of tokenisers imported from a file: pieces from the file's own pre-tokenisation
    (`Tokenizer.pieces`), each encoded once and cached; subclasses encode one piece's bytes."""

    imported = True

    def encode_ordinary(self, tok: Tokenizer, text: str, engine: Engine) -> list[int]:
        return encode_joined(
            tok._chunk_cache,
            tok.pieces(text),
            functools.partial(self.encode_one_new_piece, tok),
            CHUNK_CACHE_LIMIT,
            functools.partial(self.encode_new_pieces, tok),
        )

    def encode_one_new_piece(self, tok: Tokenizer, piece: str) -> list[int]:
        return self.encode_new_pieces(tok, {piece})[piece]

    def encode_new_pieces(self, tok: Tokenizer, new: set[str]) -> dict[str, list[int]]:
        """Each new piece's ids. A piece that is a token is that token (where the rule says
        so); a long mostly multi-byte one (a run of Chinese between punctuation, say) is cut
        and its parts joined apart (`bpe.long_pieces`); the rest by the rule."""
        table: dict[str, list[int]] = {}
        long: list[str] = []
        for piece in new:
            data = piece.encode("utf-8")
            token = self.piece_token(tok, data)
            if token is not None:
                table[piece] = [token]
            elif worth_cutting(data, piece):
                long.append(piece)
            else:
                table[piece] = self.encode_joins(tok, data)
        if long:

            def join_part(part: str) -> list[int]:
                return self.encode_joins(tok, part.encode("utf-8"))

            encoded = encode_cut(
                tok._vocab_cuts, long, join_part, tok._part_cache, CHUNK_CACHE_LIMIT
            )
            table.update(zip(long, encoded, strict=True))
        return table

    def piece_encoder(self, tok: Tokenizer) -> PieceEncoder:
        return self.encode_piece

    def encode_piece(self, tok: Tokenizer, piece: str) -> list[int]:
        cache = tok._chunk_cache
        cached = cache.get(piece)
        if cached is None:
            cached = self.encode_new_piece(tok, piece.encode("utf-8"))
            if len(cache) >= CHUNK_CACHE_LIMIT:
                cache.clear()
            cache[piece] = cached
        return cached

    def encode_new_piece(self, tok: Tokenizer, data: bytes) -> list[int]:
        """One piece's ids by the rule, not looked up in the cache."""
        token = self.piece_token(tok, data)
        return [token] if token is not None else self.encode_joins(tok, data)

    def piece_token(self, tok: Tokenizer, data: bytes) -> int | None:
        """The token a piece of these bytes is at once, before any join, or None."""
        raise NotImplementedError

    def encode_joins(self, tok: Tokenizer, data: bytes) -> list[int]:
        """The ids the rule's joins leave of these bytes, without the whole-piece shortcut."""
        raise NotImplementedError

    def limited_encoder(self, tok: Tokenizer, merge_limit: int) -> BytesEncoder:
        """What encodes one piece's bytes with only the first `merge_limit` merges."""
        raise NotImplementedError

    def encode_limited(
        self,
        tok: Tokenizer,
        text: str,
        merge_limit: int,
        allowed_special: Literal["all"] | Iterable[str],
    ) -> list[int]:
        encode = self.limited_encoder(tok, max(merge_limit, 0))
        out: list[int] = []
        for segment, special_id in tok.special_segments(text, allowed_special):
            if special_id is not None:
                out.append(special_id)
                continue
            for piece in tok.pieces(segment):
                out.extend(encode(piece.encode("utf-8")))
        return out


# The last merge-order table asked for, per tokeniser: one each, freed with the tokeniser.
_merge_orders: weakref.WeakKeyDictionary[
    Tokenizer, tuple[int, dict[tuple[int, int], tuple[int, int]]]
] = weakref.WeakKeyDictionary()


def _merge_order(tok: Tokenizer, limit: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(left, right) -> (rank, new id) of the first `limit` merges, built as `tokenizers` builds
    its map (a pair listed twice keeps its later rank); the last one asked for is kept."""
    last = _merge_orders.get(tok)
    if last is not None and last[0] == limit:
        return last[1]
    table = {
        (left, right): (rank, new) for rank, (left, right, new) in enumerate(tok.merges[:limit])
    }
    _merge_orders[tok] = (limit, table)
    return table
