"""tiktoken's rule for imported rank files: join the pair whose joined bytes rank lowest, and a
piece that is a token is that token at once (`bpe.rank_rule`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bpe import rank_rule
from bpe.rules.base import BytesEncoder, ImportedRule, JoinLookup

if TYPE_CHECKING:
    from bpe.model import Tokenizer


class TiktokenRule(ImportedRule):
    name = "tiktoken"
    export_targets = frozenset({"tiktoken"})  # its ranks are its ids
    cuts_by_pattern = True

    def piece_token(self, tok: Tokenizer, data: bytes) -> int | None:
        return tok.mergeable_ranks.get(data)

    def encode_joins(self, tok: Tokenizer, data: bytes) -> list[int]:
        ranks = tok.mergeable_ranks
        return [ranks[part] for part in rank_rule.split_piece(data, ranks)]

    def limited_encoder(self, tok: Tokenizer, merge_limit: int) -> BytesEncoder:
        # Joins limited to tokens ranked below merge k's token, the whole-piece shortcut too.
        ranks, merges = tok.mergeable_ranks, tok.merges

        def encode(data: bytes) -> list[int]:
            bound = merges[merge_limit][2]
            token = ranks.get(data)
            if token is not None and token < bound:
                return [token]
            parts = rank_rule.split_piece(data, ranks, max_rank=bound)
            return [ranks[part] for part in parts]

        return encode

    def whole_piece_token(self, tok: Tokenizer, token: int, merge_limit: int | None) -> int | None:
        # Always looked up first; with the first k merges, only tokens ranked below merge k's.
        if merge_limit is None or token < tok.merges[max(merge_limit, 0)][2]:
            return token
        return None

    def join_lookup(self, tok: Tokenizer, limit: int) -> JoinLookup:
        # A pair ranks as its joined bytes do (below merge k's token, with the first k only).
        ranks = tok.mergeable_ranks
        bound = tok.merges[limit][2] if limit < len(tok.merges) else None
        bytes_of = tok.token_bytes

        def join(pair: tuple[int, int]) -> tuple[int, int] | None:
            token = ranks.get(bytes_of(pair[0]) + bytes_of(pair[1]))
            if token is None or (bound is not None and token >= bound):
                return None
            return token, token  # (rank, new id): in tiktoken files the id is the rank

        return join


TIKTOKEN = TiktokenRule()
