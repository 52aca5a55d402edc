"""How many tokens a conversation costs a model: rendered as the model reads it, then encoded.

The format is the model's own where it has one: the Jinja template its `tokenizer_config.json`
carries (`bpe.chat_template`, as transformers' `apply_chat_template` renders it); for OpenAI's
tokenisers and ours, the formats of `bpe.chat_formats`. The rendered text is encoded whole, as
the model would receive it (special tokens the format writes are special tokens; in a
template's text every special token it names is one, as in HF), so the total is exact; each
token then belongs to the message whose content it overlaps, or to the framing: the
template's own text and the special tokens around the messages. docs/chat.md.

>>> tok = Tokenizer(mode="naive", merges=[])
>>> count = count_chat(tok, [Message("user", "hi")], add_generation_prompt=False)
>>> count.format.name, count.per_message, count.framing, count.total
('plain', [2], 6, 8)
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import regex

from bpe.chat_formats import (
    CHATML,
    FORMATS,
    HARMONY,
    HARMONY_TOKENS,
    O200K,
    PLAIN,
    ChatFormat,
    Rendered,
)
from bpe.chat_template import render_template
from bpe.chat_types import ChatError, ChatTemplate, Message
from bpe.model import Tokenizer

__all__ = ["ChatCount", "ChatError", "Message", "count_chat", "format_for", "template_format"]

# The OpenAI encodings' names (a tiktoken import's `source.name`) and the format each speaks.
_BY_ENCODING = {"cl100k_base": CHATML, "o200k_base": O200K}


def template_format(chat: ChatTemplate) -> ChatFormat:
    """A model's own template as a format: rendered, then each message found in the text."""

    def render(messages: Sequence[Message], add_generation_prompt: bool) -> Rendered:
        text = render_template(chat, messages, add_generation_prompt=add_generation_prompt)
        return Rendered(text, _find_contents(text, messages), specials_in_text=True)

    return ChatFormat("template", "the model's own chat template (tokenizer_config.json)", render)


def format_for(tok: Tokenizer) -> ChatFormat | None:
    """The format a tokeniser's model reads chats in; None when nothing says (an imported file
    without a template, GPT-2)."""
    if tok.chat_template is not None:
        return template_format(tok.chat_template)
    if tok.source is not None and tok.source.name in _BY_ENCODING:
        return _BY_ENCODING[tok.source.name]
    if tok.special_tokens.keys() >= HARMONY_TOKENS:
        return HARMONY
    if not tok.imported:
        return PLAIN
    return None


@dataclass(frozen=True)
class ChatCount:
    format: ChatFormat
    text: str  # the rendered conversation
    ids: list[int]
    owners: list[int | None]  # per token: the message whose content it is, None for framing
    special: list[bool]  # per token: a special (control) token
    spans: list[tuple[int, int]]  # per token: its characters in `text`
    per_message: list[int]
    framing: int
    found: list[bool]  # per message: its content was found in the rendered text

    @property
    def total(self) -> int:
        return len(self.ids)


def count_chat(
    tok: Tokenizer,
    messages: Sequence[Message],
    *,
    add_generation_prompt: bool = True,
    chat_format: ChatFormat | str | None = None,
) -> ChatCount:
    """The conversation's tokens for `tok`, in `chat_format` (a `ChatFormat`, a name of
    `bpe.chat_formats.FORMATS`, or None: the tokeniser's own, `format_for`).

    ChatError when the tokeniser has no format, or its template fails or runs past its limits.
    """
    fmt = _resolve(tok, chat_format)
    rendered = fmt.render(messages, add_generation_prompt)
    ids, special, spans = _encode(tok, rendered)
    owners = _owners(spans, rendered.spans)
    per_message = [0] * len(messages)
    for owner in owners:
        if owner is not None:
            per_message[owner] += 1
    return ChatCount(
        format=fmt,
        text=rendered.text,
        ids=ids,
        owners=owners,
        special=special,
        spans=spans,
        per_message=per_message,
        framing=owners.count(None),
        found=[span is not None for span in rendered.spans],
    )


def _resolve(tok: Tokenizer, chat_format: ChatFormat | str | None) -> ChatFormat:
    if isinstance(chat_format, ChatFormat):
        return chat_format
    if chat_format is not None:
        if chat_format == "template":
            if tok.chat_template is None:
                raise ChatError("this tokeniser carries no chat template")
            return template_format(tok.chat_template)
        if chat_format not in FORMATS:
            names = ", ".join(["template", *FORMATS])
            raise ChatError(f"unknown chat format {chat_format!r} (known: {names})")
        return FORMATS[chat_format]
    fmt = format_for(tok)
    if fmt is None:
        raise ChatError(
            "this tokeniser's model has no chat template (its files carry none), so what a "
            "conversation costs it is not known; give a format (e.g. plain) to count one anyway"
        )
    return fmt


def _find_contents(text: str, messages: Sequence[Message]) -> list[tuple[int, int] | None]:
    """Each message's content in the rendered text, in order; templates often trim it, so the
    trimmed text is looked for when the whole is not there."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for message in messages:
        span = None
        for needle in (message.content, message.content.strip()):
            if not needle:
                continue
            at = text.find(needle, cursor)
            if at >= 0:
                span = (at, at + len(needle))
                cursor = span[1]
                break
        spans.append(span)
    return spans


def _encode(
    tok: Tokenizer, rendered: Rendered
) -> tuple[list[int], list[bool], list[tuple[int, int]]]:
    """Ids of the whole text as the model gets it (every special token the text names is one),
    each token's kind and its characters in the text."""
    ids: list[int] = []
    special: list[bool] = []
    spans: list[tuple[int, int]] = []
    allowed: Literal["all"] | tuple[()] = "all" if rendered.specials_in_text else ()
    for start, piece, extra_id in _pieces(rendered):
        if extra_id is not None:
            ids.append(extra_id)
            special.append(True)
            spans.append((start, start + len(piece)))
            continue
        piece_ids = tok.encode(piece, allowed_special=allowed)
        ids.extend(piece_ids)
        special.extend(tok.is_special(i) for i in piece_ids)
        spans.extend((start + a, start + b) for a, b in _token_spans(tok, piece, piece_ids))
    return ids, special, spans


def _pieces(rendered: Rendered) -> list[tuple[int, str, int | None]]:
    """(start, text, None) stretches and (start, token, id) for the format's own specials."""
    extra = rendered.extra_specials
    if not extra:
        return [(0, rendered.text, None)]
    pattern = "|".join(regex.escape(s) for s in sorted(extra, key=len, reverse=True))
    out: list[tuple[int, str, int | None]] = []
    start = 0
    for match in regex.finditer(pattern, rendered.text):
        if match.start() > start:
            out.append((start, rendered.text[start : match.start()], None))
        out.append((match.start(), match.group(), extra[match.group()]))
        start = match.end()
    if start < len(rendered.text):
        out.append((start, rendered.text[start:], None))
    return out


def _token_spans(tok: Tokenizer, text: str, ids: list[int]) -> list[tuple[int, int]]:
    """Each token's characters in `text`: from its bytes where they spell the text's UTF-8
    (byte-level tokenisers); otherwise shared out by decoding prefixes. A token ending inside
    a character is counted to the end of that character."""
    raw = text.encode("utf-8")
    parts = [tok.display_bytes(i) for i in ids]
    if b"".join(parts) != raw:
        return _spans_by_decoding(tok, text, ids)
    spans = []
    at = 0
    if len(raw) == len(text):  # ASCII: a byte is a character
        for part in parts:
            spans.append((at, at + len(part)))
            at += len(part)
        return spans
    starts = [0]  # byte offset where each character starts
    for ch in text:
        starts.append(starts[-1] + len(ch.encode("utf-8")))
    for part in parts:
        end = at + len(part)
        spans.append((bisect_right(starts, at) - 1, bisect_right(starts, end - 1)))
        at = end
    return spans


def _spans_by_decoding(tok: Tokenizer, text: str, ids: list[int]) -> list[tuple[int, int]]:
    spans = []
    previous = 0
    for n in range(1, len(ids) + 1):
        end = min(len(tok.decode(ids[:n])), len(text))
        spans.append((previous, max(previous, end)))
        previous = max(previous, end)
    return spans


def _owners(
    token_spans: list[tuple[int, int]], contents: list[tuple[int, int] | None]
) -> list[int | None]:
    """Each token's message: the one whose content its characters overlap, else None."""
    located = sorted((span, index) for index, span in enumerate(contents) if span is not None)
    owners: list[int | None] = []
    for start, end in token_spans:
        owner = None
        for (c_start, c_end), index in located:
            if start < c_end and c_start < end:
                owner = index
                break
            if c_start >= end:
                break
        owners.append(owner)
    return owners
