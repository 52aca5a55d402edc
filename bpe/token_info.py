"""Questions people ask about single tokens: what kind of text is it, and how was it built.

The web app's vocabulary filters and token detail pages use these; they depend only on a
Tokenizer, so the command line and notebooks can ask the same questions.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from bpe.model import Tokenizer

CATEGORIES = (
    "letters",
    "digits",
    "whitespace",
    "punctuation",
    "leading-space",
    "control",
    "mixed",
    "partial-utf8",
    "special",
)


def token_category(token: bytes, *, special: bool = False) -> str:
    """One category per token, the first that fits in this order:

    special; partial-utf8 (not valid UTF-8 on its own); whitespace (all whitespace);
    leading-space (one space, then letters only); letters; digits; punctuation (all
    punctuation or symbols); control (all control characters, e.g. the bytes 0x00-0x08);
    mixed (anything else, e.g. `a1` or `x.`).

    >>> token_category(b" the"), token_category(b"\\xe4\\xb8"), token_category(b"42")
    ('leading-space', 'partial-utf8', 'digits')
    >>> token_category(b"\\x00"), token_category(b"\\x7f\\x1b"), token_category(b"\\x80")
    ('control', 'control', 'partial-utf8')
    """
    if special:
        return "special"
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return "partial-utf8"
    return text_category(text)


def text_category(text: str) -> str:
    """`token_category` of an ordinary token that is valid UTF-8, from its decoded text: for
    callers that decode it anyway (storing a vocabulary of 200,000 decodes each token once)."""
    if not text:
        return "mixed"
    if text.isspace():
        return "whitespace"
    if text[0] == " " and len(text) > 1 and text[1:].isalpha():
        return "leading-space"
    if text.isalpha():
        return "letters"
    if text.isdigit():
        return "digits"
    if all(unicodedata.category(c)[0] in "PS" for c in text):
        return "punctuation"
    if all(unicodedata.category(c) == "Cc" for c in text):
        return "control"
    return "mixed"


@dataclass(frozen=True)
class MergeNode:
    """A token and how it was made: leaves are base ids, inner nodes carry their merge rank."""

    token_id: int
    rank: int | None  # 0-based merge rank, None for a base id or special token
    count: int | None  # the pair's count when it was learned, if known
    left: MergeNode | None = None
    right: MergeNode | None = None


def merge_tree(tok: Tokenizer, token_id: int) -> MergeNode:
    """The merge tree of a token down to base ids (bytes, or characters in words mode).

    Built bottom-up without recursion: a naive tokeniser trained on a long run of one byte
    learns chains thousands of merges deep.
    """
    if not tok.has_id(token_id):
        raise ValueError(f"token id {token_id} is not in this vocabulary (0..{tok.id_limit - 1})")
    counts = tok.training.merge_counts if tok.training is not None else None
    built: dict[int, MergeNode] = {}  # token id -> its finished node
    pending = [token_id]
    while pending:
        current = pending[-1]
        rank = tok.merge_rank(current)
        if rank is None:
            built[current] = MergeNode(current, None, None)
            pending.pop()
            continue
        left, right, _ = tok.merges[rank]
        missing = [part for part in (left, right) if part not in built]
        if missing:
            pending.extend(missing)
            continue
        count = counts[rank] if counts is not None else None
        built[current] = MergeNode(current, rank, count, built[left], built[right])
        pending.pop()
    return built[token_id]
