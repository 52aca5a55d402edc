"""Our own rule: repeatedly merge the present learned pair with the lowest id, everywhere.

`bpe.reference.encode_reference` is the literal loop; the tokeniser's mode encodes by faster
means that give the same ids, and long byte-level texts may go to tiktoken when it provably
agrees (`bpe.tiktoken_path`; docs/algorithms.md, "Encoding").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from bpe.modes.base import MULTIBYTE_SHARE, PieceEncoder
from bpe.rules.base import EncodingRule
from bpe.stepwise import encode_with_merges

if TYPE_CHECKING:
    from bpe.model import Engine, Tokenizer

# From this length on, `encode` tries the tiktoken fast path (building it costs ~0.1 s, once).
FAST_PATH_MIN_CHARS = 2_000


class MergesRule(EncodingRule):
    name = "merges"
    # Both exports carry our rule; where a peer could still differ, `bpe.export_common` warns.
    export_targets = frozenset({"hf", "tiktoken"})

    def encode_ordinary(self, tok: Tokenizer, text: str, engine: Engine) -> list[int]:
        if engine == "auto" and len(text) >= FAST_PATH_MIN_CHARS:
            multibyte = len(text.encode("utf-8")) > MULTIBYTE_SHARE * len(text)
            fast = tok.fast_path if tok.mode_object.fast_path_suits(multibyte) else None
            ids = fast.encode(text) if fast is not None else None
            if ids is not None:
                return ids
        return tok.mode_object.encode_ordinary(tok, text)

    def piece_encoder(self, tok: Tokenizer) -> PieceEncoder:
        return tok.mode_object.piece_encoder()

    def encode_limited(
        self,
        tok: Tokenizer,
        text: str,
        merge_limit: int,
        allowed_special: Literal["all"] | Iterable[str],
    ) -> list[int]:
        # The full encoding cut back to the first k merges (`bpe.stepwise`).
        return encode_with_merges(
            tok, text, merge_limit=merge_limit, allowed_special=allowed_special
        )


MERGES = MergesRule()
