"""The chat page: "how many tokens is this conversation?" in several models side by side.

`/chat` shows a conversation editor (system, user and assistant messages; add, remove, move up
or down) and the models to count in; every button posts the whole form back to `/chat`, which
answers the page, or only the editor and its figures when htmx asks (`chat/_editor.html`), so
the page works the same without JavaScript. Each model's count is its own chat template, or
the format its maker documents (`bpe.chat`, docs/chat.md).
"""

from __future__ import annotations

import re

from flask import Blueprint, current_app, request
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import MultiDict

from bpe.chat_types import ROLES, ChatError, Message, check_messages
from webapp.plumbing import owners
from webapp.plumbing.htmx import page_or_fragment, refuse_in_place
from webapp.refusals import UserError
from webapp.rendering.chat_counts import count_models
from webapp.rendering.model_counts import model_label
from webapp.rendering.playground import TextTooLarge, check_text
from webapp.storage import browse, db
from webapp.storage.model_choices import ready_models
from webapp.storage.models import Tokenizer

bp = Blueprint("chat", __name__)
bp.register_error_handler(UserError, refuse_in_place)

MAX_PAGE_MESSAGES = 50
MAX_PAGE_MODELS = 8
# What the page counts in when nobody picked: the models whose chat formats are known.
DEFAULT_MODELS = ("GPT-4", "GPT-4o", "gpt-oss", "Llama 3", "Qwen 3", "DeepSeek-V3")
DEMO = (
    Message("system", "You are a helpful assistant. Answer in one sentence."),
    Message("user", "How many tokens is this conversation?"),
    Message("assistant", "It depends on the model: each one frames messages its own way."),
    Message("user", "Show me, model by model."),
)
ACTION = re.compile(r"(add)-(system|user|assistant)|(remove|up|down)-(\d{1,3})")


@bp.route("/chat", methods=["GET", "POST"])
def show() -> ResponseReturnValue:
    values = request.form if request.method == "POST" else request.args
    sent = "role" in values
    messages = _edited(_messages(values), values.get("action", "")) if sent else list(DEMO)
    add_generation_prompt = values.get("gen") == "1" if sent else True
    session = db.session()
    choices = ready_models(session, owner_id=owners.current_owner_id())
    picked = _picked(values.getlist("t"), choices) if "t" in values else _defaults(choices)
    results = []
    if messages:
        checked = _checked(messages)
        results = count_models(
            session, picked, checked, add_generation_prompt=add_generation_prompt
        )
    return page_or_fragment(
        "chat/show.html",
        "chat/_editor.html",
        messages=messages,
        roles=ROLES,
        add_generation_prompt=add_generation_prompt,
        choices=[(row, model_label(row)) for row in choices],
        picked={row.slug for row in picked},
        results=results,
        max_messages=MAX_PAGE_MESSAGES,
    )


def _messages(values: MultiDict[str, str]) -> list[Message]:
    roles, contents = values.getlist("role"), values.getlist("content")
    if len(roles) != len(contents):
        raise UserError("Each message needs a role and a content field.", status=400)
    if len(roles) > MAX_PAGE_MESSAGES:
        raise UserError(f"At most {MAX_PAGE_MESSAGES} messages, not {len(roles):,}.", status=413)
    for position, role in enumerate(roles):
        if role not in ROLES:
            raise UserError(
                f"Message {position + 1}: the role must be one of {', '.join(ROLES)}.", status=400
            )
    # A browser sends a textarea's line breaks as CRLF (see plumbing/inputs.py box_text).
    return [Message(r, c.replace("\r\n", "\n")) for r, c in zip(roles, contents, strict=True)]


def _edited(messages: list[Message], action: str) -> list[Message]:
    """The editor's buttons: add a message of a role, remove or move message i."""
    match = ACTION.fullmatch(action)
    if match is None:
        return messages
    if match.group(1):
        if len(messages) >= MAX_PAGE_MESSAGES:
            raise UserError(f"At most {MAX_PAGE_MESSAGES} messages.", status=413)
        return [*messages, Message(match.group(2), "")]
    verb, index = match.group(3), int(match.group(4))
    if not 0 <= index < len(messages):
        raise UserError(f"There is no message {index + 1} to {verb}.", status=400)
    out = list(messages)
    if verb == "remove":
        del out[index]
    else:
        other = index - 1 if verb == "up" else index + 1
        if 0 <= other < len(out):
            out[index], out[other] = out[other], out[index]
    return out


def _checked(messages: list[Message]) -> list[Message]:
    try:
        check_text("".join(m.content for m in messages), max_bytes=_limit())
        return check_messages([{"role": m.role, "content": m.content} for m in messages])
    except TextTooLarge as exc:
        raise UserError(f"The conversation is too long: {exc}.", status=413) from None
    except ChatError as exc:
        raise UserError(str(exc), status=422) from None


def _limit() -> int:
    return int(current_app.config["PLAYGROUND_MAX_BYTES"])


def _picked(slugs: list[str], choices: list[Tokenizer]) -> list[Tokenizer]:
    if len(slugs) > MAX_PAGE_MODELS:
        raise UserError(f"Pick at most {MAX_PAGE_MODELS} models, not {len(slugs)}.", status=422)
    session = db.session()
    offered = {row.slug: row for row in choices}
    picked = []
    for slug in dict.fromkeys(s.strip() for s in slugs if s.strip()):
        picked.append(offered.get(slug) or browse.get_tokenizer(session, slug))
    return picked


def _defaults(choices: list[Tokenizer]) -> list[Tokenizer]:
    by_label = {row.reference: row for row in choices if row.reference}
    return [by_label[label] for label in DEFAULT_MODELS if label in by_label]
