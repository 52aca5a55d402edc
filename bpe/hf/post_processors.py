"""HF post-processors: the special tokens put around an encoded text when they are asked for
(`add_special_tokens=True`, as `tokenizers` does by default).

Supported: TemplateProcessing (its `single` template), BertProcessing, RobertaProcessing,
ByteLevel (which adds nothing) and Sequence. Only single texts are encoded here, so a template's
`pair` is never used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bpe.hf.errors import Malformed, Unsupported, type_of

AddSpecial = Callable[[list[int]], list[int]]


def _unchanged(ids: list[int]) -> list[int]:
    return ids


def _template(raw: dict[str, Any]) -> AddSpecial:
    specials = raw.get("special_tokens") or {}
    parts: list[list[int] | None] = []  # ids to insert, or None where the text's ids go
    for piece in raw.get("single") or []:
        if isinstance(piece, dict) and "Sequence" in piece:
            parts.append(None)
        elif isinstance(piece, dict) and "SpecialToken" in piece:
            name = piece["SpecialToken"].get("id")
            entry = specials.get(name)
            if not isinstance(entry, dict) or not isinstance(entry.get("ids"), list):
                raise Malformed(f"the template names the special token {name!r:.40}, not defined")
            parts.append([int(i) for i in entry["ids"]])
        else:
            raise Malformed(f"a template piece is neither Sequence nor SpecialToken: {piece!r:.60}")

    def apply(ids: list[int]) -> list[int]:
        out: list[int] = []
        for part in parts:
            out.extend(ids if part is None else part)
        return out

    return apply


def _around(raw: dict[str, Any]) -> AddSpecial:
    cls, sep = raw.get("cls"), raw.get("sep")
    if not (isinstance(cls, list) and isinstance(sep, list) and len(cls) == 2 == len(sep)):
        raise Malformed(f"{type_of(raw)} needs cls and sep as [token, id]")
    first, last = int(cls[1]), int(sep[1])

    def apply(ids: list[int]) -> list[int]:
        return [first, *ids, last]

    return apply


def _sequence(steps: list[AddSpecial]) -> AddSpecial:
    def apply(ids: list[int]) -> list[int]:
        for step in steps:
            ids = step(ids)
        return ids

    return apply


def build_post_processor(raw: Any) -> AddSpecial:
    """What `add_special_tokens=True` does to a text's ids (None: nothing)."""
    if raw is None:
        return _unchanged
    kind = type_of(raw)
    if kind == "ByteLevel":
        return _unchanged
    if kind == "TemplateProcessing":
        return _template(raw)
    if kind in ("BertProcessing", "RobertaProcessing"):
        return _around(raw)
    if kind == "Sequence":
        return _sequence([build_post_processor(p) for p in raw.get("processors") or []])
    raise Unsupported(
        f"the {kind} post-processor",
        "imports take TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and "
        "Sequence",
    )
