"""The home page's playground: one text in the picked model, as chips, and the same text
counted in every model the picker offers ("how many tokens in each model").

Everything here is bounded by what a request may send: the text by the playground's limit
(`check_playground_text`, the same 413), the table by `TABLE_LIMIT` models, each one encode of
that text by a tokeniser loaded once per process (`storage/convert.py`'s cache).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from webapp.refusals import UserError
from webapp.rendering.chips import Chip, encoded_chips
from webapp.rendering.playground import Display
from webapp.rendering.token_display import Counts, counts, text_pieces
from webapp.storage.convert import load_tokenizer, loaded_tokenizer
from webapp.storage.models import Tokenizer

# The counts table encodes the text once per model; past this many it says how many it left
# out. The site's models come first in the picker's order, so they are always counted.
TABLE_LIMIT = 12
PREFERRED_DEFAULT = "GPT-4o"  # what the peers' playgrounds open on, when the site has it


def model_label(row: Tokenizer) -> str:
    """How a model is named in the picker and the table: plain text, with any control, format
    or bidi character of a name already written as `U+XXXX` (a label also goes where no markup
    may, an <option> and an aria-label); templates escape it."""
    return "".join(piece.text for piece in text_pieces(_label(row)))


def _label(row: Tokenizer) -> str:
    if row.reference:
        return row.reference
    if row.source_format is not None:
        if row.name or row.source_name:
            return f"{row.name or row.source_name} · {row.vocab_size:,} tokens"
        # Every HF file is called tokenizer.json: the slug's start tells two of them apart.
        name = row.source_filename or "imported"
        return f"{name} · {row.vocab_size:,} tokens · #{row.slug[:6]}"
    corpus = f" · on {row.corpus.name}" if row.corpus is not None else ""
    own = f"{row.name} · " if row.name else ""
    return f"{own}{row.mode} · {row.vocab_size:,} tokens{corpus} · #{row.slug[:6]}"


def pick_model(choices: Sequence[Tokenizer], wanted: Tokenizer | None) -> Tokenizer | None:
    """The model to encode with: the one asked for, else GPT-4o, else the first offered."""
    if wanted is not None:
        return wanted
    for row in choices:
        if row.reference == PREFERRED_DEFAULT:
            return row
    return choices[0] if choices else None


@dataclass(frozen=True)
class Encoded:
    """The text in the picked model: its chips and counts."""

    row: Tokenizer
    ids: list[int]
    chips: list[Chip]
    counts: Counts


def encode_picked(session: Session, row: Tokenizer, text: str, display: Display) -> Encoded:
    tok = load_tokenizer(session, row)
    ids = tok.encode(text, allowed_special="all" if display.specials else ())
    chips = encoded_chips(tok, ids, invalid=display.invalid, whitespace=display.whitespace)
    return Encoded(row, ids, chips, counts(text, ids))


@dataclass(frozen=True)
class CountRow:
    """One model's line of the table; `tokens` None while the model is still loading."""

    row: Tokenizer
    label: str
    tokens: int | None
    characters: int
    bytes: int

    @property
    def chars_per_token(self) -> float | None:
        return self.characters / self.tokens if self.tokens else None

    @property
    def bytes_per_token(self) -> float | None:
        return self.bytes / self.tokens if self.tokens else None


@dataclass(frozen=True)
class CountTable:
    rows: list[CountRow]
    left_out: int  # models offered but not counted (over TABLE_LIMIT)
    fewest: int | None  # the least token count, to mark the cheapest model(s)
    loading: int = 0  # models not loaded yet: the page asks again shortly


def count_table(
    session: Session,
    models: Sequence[Tokenizer],
    text: str,
    *,
    specials: bool,
    load_seconds: float | None = None,
    warm: Callable[[list[Tokenizer]], None] | None = None,
) -> CountTable:
    """The text's token count in each of the first TABLE_LIMIT models.

    With `load_seconds`, a model this process has not loaded yet is loaded here only while
    this request has spent less than that loading; the others are handed to `warm` (the
    background loader) and shown as loading, so the first request after a restart does not
    wait for every model of the site (~10 s for eight)."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    allowed = "all" if specials else ()
    spent = 0.0
    rows, later = [], []
    for row in models[:TABLE_LIMIT]:
        tok = loaded_tokenizer(row.id, row.slug)
        if tok is None and (load_seconds is None or spent < load_seconds):
            started = time.perf_counter()
            tok = load_tokenizer(session, row)
            spent += time.perf_counter() - started
        if tok is None:
            later.append(row)
        tokens = None if tok is None else len(tok.encode(text, allowed_special=allowed))
        rows.append(CountRow(row, model_label(row), tokens, len(text), size))
    if later and warm is not None:
        warm(later)
    counted = [r.tokens for r in rows if r.tokens is not None]
    # "fewest" only once every model is counted: one still loading might need fewer.
    fewest = min(counted, default=None) if text and not later else None
    return CountTable(rows, max(0, len(models) - TABLE_LIMIT), fewest, len(later))


def picked_slugs(values: Sequence[str]) -> list[str]:
    """The table's ticked models for the compare page, in the table's order (the form's): 2 to
    4 of them, or a 400 that says what to tick. Each is looked up as the compare page would."""
    picked = list(dict.fromkeys(v.strip() for v in values if v.strip()))
    if not 2 <= len(picked) <= 4:
        raise UserError(
            f"Tick 2 to 4 models in the table to compare them (you ticked {len(picked)}).",
            status=400,
        )
    return picked
