"""HuggingFace's rule for imported `tokenizer.json` files: the file's merge list in its order,
one join at a time (`bpe.hf_rule`); with `ignore_merges`, a piece that is a token is that token."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bpe import hf_rule
from bpe.rules.base import BytesEncoder, ImportedRule

if TYPE_CHECKING:
    from bpe.model import Tokenizer


class HfRule(ImportedRule):
    name = "hf"

    def piece_token(self, tok: Tokenizer, data: bytes) -> int | None:
        return tok.mergeable_ranks.get(data) if tok.ignore_merges else None

    def encode_joins(self, tok: Tokenizer, data: bytes) -> list[int]:
        byte_ids = tok.byte_ids
        return hf_rule.merge_word([byte_ids[b] for b in data], tok._hf_merges)

    def limited_encoder(self, tok: Tokenizer, merge_limit: int) -> BytesEncoder:
        # The merge list cut after k, built as `tokenizers` builds its map (see _hf_merges).
        limited = {
            (left, right): (rank, new)
            for rank, (left, right, new) in enumerate(tok.merges[:merge_limit])
        }
        byte_ids = tok.byte_ids

        def encode(data: bytes) -> list[int]:
            return hf_rule.merge_word([byte_ids[b] for b in data], limited)

        return encode


HF = HfRule()
