"""`bpe chat TOKENIZER CONVERSATION`: what a conversation costs a model, message by message.

TOKENIZER is a BPE Workbench file, or a model's own file (`tokenizer.json`, a tiktoken rank
file) with its `tokenizer_config.json` beside it or named by `--config`: its chat template is
used. CONVERSATION is JSON, `{"messages": [{"role", "content"}, ...]}` or the bare list.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bpe.chat import ChatCount, count_chat
from bpe.chat_formats import FORMATS
from bpe.chat_types import ChatError, ChatTemplate, parse_conversation
from bpe.formats import FORMAT_NAME, TokenizerFileError, load, parse_json
from bpe.importers import import_path
from bpe.model import Tokenizer

MAX_CONVERSATION_BYTES = 8_000_000


def add_parser(commands: Any) -> None:
    p = commands.add_parser("chat", help="tokens a conversation costs, message by message")
    p.add_argument(
        "tokenizer", metavar="TOKENIZER", help="our .json, a tokenizer.json or rank file"
    )
    p.add_argument("conversation", metavar="CONVERSATION", help='JSON: {"messages": [...]}')
    p.add_argument("--config", metavar="JSON", help="the model's tokenizer_config.json")
    p.add_argument(
        "--format",
        choices=("template", *FORMATS),
        help="the chat format (default: the model's own template, else its documented format)",
    )
    p.add_argument(
        "--no-generation-prompt",
        action="store_true",
        help="do not prime the reply (count the conversation alone)",
    )
    p.add_argument("--json", action="store_true", help="ids, owners and counts as JSON")
    p.set_defaults(run=run_chat)


def run_chat(args: argparse.Namespace) -> int:
    # The conversation first: a bad one is refused before a large model file is read.
    messages, add_generation_prompt = parse_conversation(
        parse_json(_read(args.conversation), source=args.conversation)
    )
    tok = _tokenizer(args.tokenizer, args.config)
    if args.no_generation_prompt:
        add_generation_prompt = False
    count = count_chat(
        tok, messages, add_generation_prompt=add_generation_prompt, chat_format=args.format
    )
    if args.json:
        print(json.dumps(count_json(count, [m.role for m in messages]), ensure_ascii=False))
        return 0
    print(f"format: {count.format.label}")
    for position, (message, n) in enumerate(zip(messages, count.per_message, strict=True)):
        note = "" if count.found[position] else "  (not found in the rendering: counted as framing)"
        print(f"{position:>4}  {message.role:<9} {n:>8,}{note}")
    print(f"      {'framing':<9} {count.framing:>8,}")
    print(f"      {'total':<9} {count.total:>8,}")
    return 0


def count_json(count: ChatCount, roles: list[str]) -> dict[str, Any]:
    """A count as JSON, the shape the web API answers too (docs/chat.md)."""
    return {
        "format": count.format.name,
        "format_label": count.format.label,
        "total": count.total,
        "framing": count.framing,
        "messages": [
            {"role": role, "tokens": n, "found": found}
            for role, n, found in zip(roles, count.per_message, count.found, strict=True)
        ],
        "text": count.text,
        "ids": count.ids,
        "owners": count.owners,
        "special": count.special,
    }


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONVERSATION_BYTES + 1)
    except OSError as exc:
        raise ChatError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_CONVERSATION_BYTES:
        raise ChatError(f"{path} is over {MAX_CONVERSATION_BYTES:,} bytes")
    return raw


def _tokenizer(path: str, config: str | None) -> Tokenizer:
    head = _read_head(path)
    tok = load(path) if FORMAT_NAME.encode() in head else import_path(path)
    config_path = Path(config) if config else Path(path).with_name("tokenizer_config.json")
    if config is not None or (tok.chat_template is None and config_path.is_file()):
        data = parse_json(_read(str(config_path)), source=str(config_path))
        tok.chat_template = ChatTemplate.from_config(data)
        if tok.chat_template is None and config is not None:
            raise ChatError(f"{config_path} has no chat_template")
    return tok


def _read_head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(200)
    except OSError as exc:
        raise TokenizerFileError(f"cannot read {path}: {exc.strerror}") from None
