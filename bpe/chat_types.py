"""A conversation as chat models take it, and the limits a conversation from outside must keep.

The shapes here are plain data shared by the renderers (`bpe.chat_template` for a model's own
Jinja template, `bpe.chat_formats` for the formats we write ourselves) and by the counting in
`bpe.chat`; docs/chat.md describes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROLES = ("system", "user", "assistant")
MAX_MESSAGES = 200
MAX_MESSAGE_CHARS = 100_000
MAX_CONVERSATION_CHARS = 400_000


class ChatError(ValueError):
    """A conversation, a template or a rendering we refuse; the message says how to fix it."""


class TemplateLimit(ChatError):
    """A template that ran too long or wrote too much (an imported file is untrusted)."""


@dataclass(frozen=True)
class Message:
    role: str  # one of ROLES
    content: str


@dataclass(frozen=True)
class ChatTemplate:
    """What a model's `tokenizer_config.json` says about chat: its Jinja template and the texts
    of its BOS and EOS tokens (the template reads them as `bos_token` and `eos_token`)."""

    template: str
    bos_token: str | None = None
    eos_token: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"template": self.template, "bos_token": self.bos_token, "eos_token": self.eos_token}

    @classmethod
    def from_json(cls, raw: Any) -> ChatTemplate:
        """The saved form back; ChatError naming the field if it is not that."""
        if not isinstance(raw, dict) or not isinstance(raw.get("template"), str):
            raise ChatError('chat_template must be an object with a "template" string')
        for key in ("bos_token", "eos_token"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise ChatError(f"chat_template.{key} must be a string or null")
        return cls(raw["template"], raw.get("bos_token"), raw.get("eos_token"))

    @classmethod
    def from_config(cls, config: Any) -> ChatTemplate | None:
        """From a `tokenizer_config.json`'s data: None when it has no (single) template.

        A token may be written as its text or as an AddedToken object (`{"content": ...}`).
        A list of named templates keeps the one named "default", as transformers does.
        """
        if not isinstance(config, dict):
            return None
        template = config.get("chat_template")
        if isinstance(template, list):
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        if not isinstance(template, str) or not template:
            return None
        return cls(
            template, _token_text(config.get("bos_token")), _token_text(config.get("eos_token"))
        )


def _token_text(raw: Any) -> str | None:
    if isinstance(raw, dict):
        raw = raw.get("content")
    return raw if isinstance(raw, str) else None


def parse_conversation(data: Any) -> tuple[list[Message], bool]:
    """A conversation as JSON data -> (messages, add_generation_prompt).

    Takes `[{"role", "content"}, ...]` or `{"messages": [...], "add_generation_prompt": bool}`
    (default true: the count is what a request to the model would cost).

    >>> parse_conversation([{"role": "user", "content": "hi"}])
    ([Message(role='user', content='hi')], True)
    """
    add_generation_prompt = True
    if isinstance(data, dict):
        flag = data.get("add_generation_prompt", True)
        if not isinstance(flag, bool):
            raise ChatError("add_generation_prompt must be true or false")
        add_generation_prompt = flag
        data = data.get("messages")
    if not isinstance(data, list):
        raise ChatError(
            'Give the conversation as {"messages": [{"role": "user", "content": "Hello"}]}.'
        )
    return check_messages(data), add_generation_prompt


def check_messages(raw: list[Any]) -> list[Message]:
    """Each entry a {"role", "content"} object with a known role; within the limits."""
    if not raw:
        raise ChatError("The conversation has no messages: give at least one.")
    if len(raw) > MAX_MESSAGES:
        raise ChatError(f"At most {MAX_MESSAGES} messages, not {len(raw):,}.")
    messages = []
    total = 0
    for position, entry in enumerate(raw):
        where = f"messages[{position}]"
        if not isinstance(entry, dict):
            raise ChatError(f'{where} must be an object {{"role": ..., "content": ...}}')
        role, content = entry.get("role"), entry.get("content")
        if role not in ROLES:
            raise ChatError(f"{where}.role must be one of {', '.join(ROLES)}, not {role!r}")
        if not isinstance(content, str):
            raise ChatError(f"{where}.content must be a string")
        if len(content) > MAX_MESSAGE_CHARS:
            raise ChatError(
                f"{where} has {len(content):,} characters; at most {MAX_MESSAGE_CHARS:,} each."
            )
        total += len(content)
        messages.append(Message(role, content))
    if total > MAX_CONVERSATION_CHARS:
        raise ChatError(
            f"The conversation has {total:,} characters; at most {MAX_CONVERSATION_CHARS:,}."
        )
    return messages
