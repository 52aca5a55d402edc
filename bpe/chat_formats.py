"""The chat formats we write ourselves, for tokenisers whose files carry no template.

- `chatml`: GPT-4's (cl100k_base), as openai-python's `chatml.md` documents it:
  `<|im_start|>{role}\\n{content}<|im_end|>\\n` per message, the reply primed with
  `<|im_start|>assistant\\n`; `<|im_start|>` and `<|im_end|>` are ids 100264 and 100265, as
  tiktoken's README extends cl100k_base with them.
- `o200k`: GPT-4o's (o200k_base): `<|start|>{role}<|message|>{content}<|end|>`, the reply primed
  with `<|start|>assistant<|message|>` (3 tokens a message and 3 for the reply, as OpenAI's
  cookbook counts them), with o200k_harmony's ids for the three (tiktoken).
- `harmony`: gpt-oss's, from OpenAI's harmony format guide: a system message of the model's
  own (identity, knowledge cutoff, today's date, reasoning effort, channels), a `system` message
  of the conversation becomes the developer's `# Instructions`, assistant replies go to the
  `final` channel, the reply is primed with `<|start|>assistant`. Its ids are o200k_harmony's,
  which gpt-oss's file gives the same tokens (a tokeniser without them has no harmony).
- `plain`: for the tokenisers trained here, which have no chat tokens: `{role}: {content}` and
  a blank line between messages, `assistant: ` to prime the reply; every token is text.

Each format gives the rendered text, where each message's content sits in it, and the special
tokens it writes that the tokeniser does not know (`extra_specials`, text -> id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bpe.chat_types import Message


@dataclass(frozen=True)
class Rendered:
    text: str
    spans: list[tuple[int, int] | None]  # each message's content in `text`; None: not found
    extra_specials: dict[str, int] = field(default_factory=dict)
    # A template's text names special tokens as text, and HF encodes every one it names as a
    # special token (a message's too). Our formats write theirs as `extra_specials` and keep a
    # message's special-looking text as text, as OpenAI's API does with what a user types.
    specials_in_text: bool = False


@dataclass(frozen=True)
class ChatFormat:
    name: str
    label: str  # what a page says about where the format comes from
    render: Callable[[Sequence[Message], bool], Rendered]


class _Writer:
    """Builds a rendering piece by piece, noting where each message's content lands."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.spans: list[tuple[int, int] | None] = []

    def frame(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def content(self, text: str) -> None:
        self.spans.append((self.size, self.size + len(text)))
        self.frame(text)

    def done(self, extra: dict[str, int] | None = None) -> Rendered:
        return Rendered("".join(self.parts), self.spans, dict(extra or {}))


def _chatml(messages: Sequence[Message], add_generation_prompt: bool) -> Rendered:
    out = _Writer()
    for message in messages:
        out.frame(f"<|im_start|>{message.role}\n")
        out.content(message.content)
        out.frame("<|im_end|>\n")
    if add_generation_prompt:
        out.frame("<|im_start|>assistant\n")
    return out.done({"<|im_start|>": 100264, "<|im_end|>": 100265})


def _o200k(messages: Sequence[Message], add_generation_prompt: bool) -> Rendered:
    out = _Writer()
    for message in messages:
        out.frame(f"<|start|>{message.role}<|message|>")
        out.content(message.content)
        out.frame("<|end|>")
    if add_generation_prompt:
        out.frame("<|start|>assistant<|message|>")
    return out.done({"<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008})


HARMONY_SYSTEM = (
    "You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: {date}\n\n"
    "Reasoning: medium\n\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
)


def _harmony(messages: Sequence[Message], add_generation_prompt: bool) -> Rendered:
    out = _Writer()
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    out.frame(f"<|start|>system<|message|>{HARMONY_SYSTEM.format(date=date)}<|end|>")
    for message in messages:
        if message.role == "system":
            out.frame("<|start|>developer<|message|># Instructions\n\n")
        elif message.role == "assistant":
            out.frame("<|start|>assistant<|channel|>final<|message|>")
        else:
            out.frame(f"<|start|>{message.role}<|message|>")
        out.content(message.content)
        out.frame("<|end|>")
    if add_generation_prompt:
        out.frame("<|start|>assistant")
    return out.done(HARMONY_IDS)


def _plain(messages: Sequence[Message], add_generation_prompt: bool) -> Rendered:
    out = _Writer()
    for position, message in enumerate(messages):
        out.frame(f"{'' if position == 0 else chr(10) * 2}{message.role}: ")
        out.content(message.content)
    if add_generation_prompt:
        out.frame(("\n\n" if messages else "") + "assistant: ")
    return out.done()


CHATML = ChatFormat("chatml", "ChatML, as OpenAI documents it for GPT-4 (cl100k_base)", _chatml)
O200K = ChatFormat("o200k", "OpenAI's message format for GPT-4o (o200k_base)", _o200k)
HARMONY = ChatFormat("harmony", "OpenAI's harmony format for gpt-oss", _harmony)
PLAIN = ChatFormat("plain", "a plain format of our own (role: content), no chat tokens", _plain)
FORMATS = {f.name: f for f in (CHATML, O200K, HARMONY, PLAIN)}
# o200k_harmony's ids (tiktoken), which gpt-oss's tokenizer.json gives them too.
HARMONY_IDS = {"<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008}
HARMONY_TOKENS = frozenset(HARMONY_IDS)
