"""tiktoken's rule for imported rank files: join the pair whose joined bytes rank lowest, and a
piece that is a token is that token at once (`bpe.rank_rule`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bpe import rank_rule
from bpe.rules.base import BytesEncoder, ImportedRule

if TYPE_CHECKING:
    from bpe.model import Tokenizer


class TiktokenRule(ImportedRule):
    name = "tiktoken"

    def encode_new_piece(self, tok: Tokenizer, data: bytes) -> list[int]:
        return rank_rule.encode_piece(data, tok.mergeable_ranks)

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


TIKTOKEN = TiktokenRule()
