"""The chat page's figures: a conversation counted in each picked model (`bpe.chat`), and each
model's tokens as pieces to show, framing marked. docs/chat.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from bpe.chat import ChatCount, ChatError, count_chat
from bpe.chat_types import Message
from webapp.rendering.model_counts import model_label
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Tokenizer

MAX_PIECES = 4000  # tokens shown per model; the counts always cover the whole conversation


@dataclass(frozen=True)
class Piece:
    text: str
    owner: int | None  # the message's index, None for framing
    special: bool


@dataclass(frozen=True)
class ModelCount:
    row: Tokenizer
    label: str
    count: ChatCount | None
    error: str | None  # why there is no count (no template, a template that failed)
    pieces: list[Piece]

    @property
    def cut(self) -> bool:
        return self.count is not None and self.count.total > len(self.pieces)


def count_models(
    session: Session,
    rows: Sequence[Tokenizer],
    messages: Sequence[Message],
    *,
    add_generation_prompt: bool,
) -> list[ModelCount]:
    """One ModelCount per row, in order; a model without a chat format says so in `error`."""
    out = []
    for row in rows:
        tok = load_tokenizer(session, row)
        try:
            count = count_chat(tok, messages, add_generation_prompt=add_generation_prompt)
        except ChatError as exc:
            out.append(ModelCount(row, model_label(row), None, str(exc), []))
            continue
        out.append(ModelCount(row, model_label(row), count, None, pieces(count)))
    return out


def pieces(count: ChatCount, limit: int = MAX_PIECES) -> list[Piece]:
    """Each token's own text in the rendering (a special token's is its name)."""
    return [
        Piece(count.text[start:end], owner, special)
        for (start, end), owner, special in zip(
            count.spans[:limit], count.owners, count.special, strict=False
        )
    ]
