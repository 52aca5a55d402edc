"""Stored ids and bytes -> what the display needs (`TokenInfo`), for the vocabulary and merge
lists: tokenisers trained here by their id layout, imported ones by their own tokeniser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from bpe.modes import get_mode
from webapp.rendering.token_display import TokenInfo
from webapp.storage.browse import base_size
from webapp.storage.models import Tokenizer


@dataclass(frozen=True)
class Describer:
    """Turns stored ids and bytes into TokenInfo; knows the tokeniser's id layout.

    Tokenisers trained here have it by arithmetic (bytes, then merges, then specials);
    imported ones keep their file's ids, so ranks and specials come from the tokeniser itself.
    """

    base: int
    merge_end: int
    words: bool
    tok: Any = None  # bpe.Tokenizer, for imported rows

    @classmethod
    def for_row(cls, row: Tokenizer, tok: Any = None) -> Describer:
        base = base_size(row)
        return cls(
            base=base,
            merge_end=base + row.merge_count,
            words=not get_mode(row.mode).byte_level,
            tok=tok if row.imported else None,
        )

    def info(
        self, token_id: int, data: bytes, *, special: bool = False, ends_word: bool = False
    ) -> TokenInfo:
        if self.tok is not None:
            tok = self.tok
            rank = tok.merge_rank(token_id)
            return TokenInfo(
                token_id,
                tok.display_bytes(token_id),  # Llama 2's `▁` as a space, `<0xNN>` as its byte
                rank=rank,
                special=tok.is_special(token_id),
                base_kind="byte" if rank is not None else tok.base_kind(token_id),
            )
        rank = token_id - self.base if self.base <= token_id < self.merge_end else None
        return TokenInfo(
            token_id,
            bytes(data),
            rank=None if special else rank,
            special=special or token_id >= self.merge_end,
            ends_word=ends_word,
            base_kind="character" if self.words else "byte",
        )


def describer_for(session: Session, row: Tokenizer) -> Describer:
    """The Describer of a row; an imported one brings its (cached) library tokeniser."""
    from webapp.storage.convert import load_tokenizer

    return Describer.for_row(row, load_tokenizer(session, row) if row.imported else None)
