"""Token chips as HTML: every token a page shows goes through here.

A page of encoded text holds one chip per token (11,000 for 50 KB), and rendering them one
Jinja macro call at a time cost seconds. So chips are written here, in Python, exactly as the
`_tokens.html` macros wrote them before (tests/test_chips.py holds those macros and checks the
two agree on hostile tokens), and a chip's HTML is built once per token and display setting:
a token's chip depends on the tokeniser, the token and the display options only, never on its
neighbours; its colour comes from its position and is added when the stream is joined.

What reaches the page, and how it is escaped (the same as before):
- token text (`Piece.text` of kind `text`) and the label go through `escape_html` (HTML
  escaping plus `=`, so not even a token spells an attribute like `hx-get=`);
- everything else (tooltips, escape pieces, titles, list labels) through markupsafe's
  `escape`, which Jinja's autoescaping applied;
- control, format and bidi characters never get here raw: `token_display` turned them into
  visible `U+XXXX` pieces already.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

import bpe
from webapp.rendering.page_text import escape_html
from webapp.rendering.token_display import (
    PALETTE_SIZE,
    InvalidRule,
    TokenView,
    stream_view,
    token_infos,
)
from webapp.rendering.utf8 import is_valid_utf8

# Chips kept per process, over all tokenisers and display settings: a request that leaves more
# empties the cache, so memory stays bounded (~0.5 KB a chip) whatever texts visitors send.
CHIP_CACHE_LIMIT = 100_000

Mark = tuple[str, str, str]  # (extra classes, tooltip note, label note) for one chip
NO_MARK: Mark = ("", "", "")


@dataclass(frozen=True, slots=True)
class Chip:
    """One shown token (several when the `group` rule joins tokens that split a character),
    its HTML ready but for its colour: `<span class="tok c{n}` + `tail`."""

    ids: tuple[int, ...]
    classes: str  # after "tok cN": " tok-special", " tok-partial", " tok-group"
    tip: str  # escaped for a quoted attribute
    label: str  # escaped for a quoted attribute
    body: str  # the pieces as HTML
    breaks: str  # "<br>" per newline in the token: the line breaks after it
    tail: str  # the rest of the chip as a list item, with the breaks after it


def chip(view: TokenView) -> Chip:
    """A token view as HTML parts (escaped here, once)."""
    classes = (
        (" tok-special" if view.special else "")
        + (" tok-partial" if view.partial else "")
        + (" tok-group" if len(view.ids) > 1 else "")
    )
    tip = str(escape(view.tip))
    label = escape_html(view.label)
    body = _pieces_html(view)
    breaks = "<br>" * view.line_breaks
    tail = (
        f'{classes}" tabindex="-1" role="listitem" data-tip="{tip}" aria-label="{label}">'
        f"{body}</span>{breaks}"
    )
    return Chip(view.ids, classes, tip, label, body, breaks, tail)


def _pieces_html(view: TokenView) -> str:
    out = []
    for piece in view.pieces:
        if piece.kind == "text":
            out.append(escape_html(piece.text))
            continue
        title = f' title="{escape(piece.title)}"' if piece.title else ""
        out.append(f'<span class="pc pc-{escape(piece.kind)}"{title}>{escape(piece.text)}</span>')
    return "".join(out)


# ----- one token on its own ----------------------------------------------------------------------
def token_html(view: TokenView, href: str | None = None) -> Markup:
    """One token (a table cell, a merge part, a tree node): a link with href, else a focusable
    span. Its colour is the view's own."""
    c = chip(view)
    head = f"tok c{view.colour}{c.classes}"
    attrs = f'data-tip="{c.tip}" aria-label="{c.label}">{c.body}'
    if href:
        return Markup(f'<a class="{head}" href="{escape(href)}" {attrs}</a>')
    return Markup(f'<span class="{head}" tabindex="0" role="img" {attrs}</span>')


# ----- encoded text ------------------------------------------------------------------------------
_HEADS = [f'<span class="tok c{n}' for n in range(PALETTE_SIZE)]

# What the chips of one page may weigh: 1.6 MB, shared by every token stream on the page, or
# 32 bytes per byte of text if the playground's limit is raised past 50 kB. A chip is ~150-700
# bytes (its tooltip and label spell out the id, rank and bytes), so 50 kB of text made 5-8 MB
# of chips for the playground and four times that for a 4-way compare; 1.6 MB holds 8,000-10,000
# chips, every token of a 5 kB text in four GPT-sized tokenisers. With the rest of a page (its
# copies of the text in the form) a page at the limit stays under 40 bytes per byte of text.
CHIP_BYTES_PER_TEXT_BYTE = 32
CHIP_BYTES_FLOOR = 1_600_000


def chip_budget(text: str, *, streams: int = 1) -> int:
    """The bytes of chip HTML each of `streams` token streams showing `text` may use."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    return max(CHIP_BYTES_FLOOR, CHIP_BYTES_PER_TEXT_BYTE * size) // max(1, streams)


def _fitting(parts: list[str], budget: int | None) -> int:
    """How many of the parts, from the first, fit in `budget` bytes (all of them for None)."""
    if budget is None:
        return len(parts)
    used = 0
    for count, part in enumerate(parts):
        used += len(part.encode("utf-8", errors="surrogatepass")) + 5  # and its <wbr>
        if used > budget:
            return count
    return len(parts)


def _cut_note(shown: int, total: int) -> str:
    """Said under a stream cut short by its budget: how many tokens are shown, and that the
    counts are still the whole text's."""
    if shown >= total:
        return ""
    return (
        f'<p class="stream-cut muted">Showing the first {shown:,} of {total:,} tokens: all of'
        " them would make this page too large to load. The token counts are for the whole"
        " text.</p>"
    )


def stream_html(
    chips: Sequence[Chip],
    label: str = "Tokens",
    *,
    kind: str = "",
    marks: Sequence[Mark] | None = None,
    budget: int | None = None,
) -> Markup:
    """Encoded text, wrapped like the text it came from: each token one box that never wraps
    inside (app.css); lines break only between tokens, `<wbr>` where the width runs out and
    `<br>` after a token that holds a newline. Chip n has colour n mod the palette. `kind` adds
    a class to the list (`diff-tokens`, `replay-tokens`); `marks` (one per chip) add classes
    and notes to the tooltip and label of some chips.

    The list is one Tab stop and its chips none (a 525-byte text made 389 of them, so nothing
    after the tokens could be reached by keyboard): static/app.js moves between chips with the
    arrow keys, Home and End. With `budget` (`chip_budget`), only the chips that fit in that
    many bytes are written, and a note under the list says how many of them there are."""
    heads = _HEADS
    size = PALETTE_SIZE
    if marks is None:
        parts = [heads[n % size] + c.tail for n, c in enumerate(chips)]
    else:
        parts = [
            heads[n % size] + (c.tail if m is NO_MARK or m == NO_MARK else _marked(c, m))
            for n, (c, m) in enumerate(zip(chips, marks, strict=True))
        ]
    list_class = f"tokens {kind}" if kind else "tokens"
    shown = _fitting(parts, budget)
    return Markup(
        f'<div class="{list_class}" role="list" tabindex="0" aria-label="{escape(label)}">'
        + "<wbr>".join(parts[:shown])
        + "</div>"
        + (_cut_note(_ids_in(chips[:shown]), _ids_in(chips)) if shown < len(chips) else "")
    )


def _ids_in(chips: Sequence[Chip]) -> int:
    """Tokens in these chips (a group chip holds several)."""
    return sum(map(len, [c.ids for c in chips]))


def _marked(c: Chip, mark: Mark) -> str:
    extra, tip_note, label_note = (str(escape(part)) for part in mark)
    return (
        f'{c.classes}{extra}" tabindex="-1" role="listitem" data-tip="{c.tip}{tip_note}"'
        f' aria-label="{c.label}{label_note}">{c.body}</span>{c.breaks}'
    )


def id_stream_html(
    chips: Sequence[Chip],
    label: str = "Token ids",
    *,
    marks: Sequence[Mark] | None = None,
    budget: int | None = None,
) -> Markup:
    """The ids view: one chip per token id, coloured like the text view (a joined group's ids
    share its colour), a space between chips so the ids wrap and copy as separate numbers.
    `marks`, one per id, add classes and notes as in `stream_html`; `budget` cuts it short as
    it does `stream_html`."""
    parts: list[str] = []
    at = 0
    for n, c in enumerate(chips):
        head = _HEADS[n % PALETTE_SIZE]
        for token_id in c.ids:
            mark = marks[at] if marks is not None else NO_MARK
            at += 1
            extra, tip_note, label_note = (str(escape(part)) for part in mark)
            parts.append(
                f'{head}{c.classes}{extra}" tabindex="-1" role="listitem" data-tip="{c.tip}'
                f'{tip_note}" aria-label="{c.label}{label_note}">{token_id}</span>'
            )
    shown = _fitting(parts, budget)
    return Markup(
        f'<div class="tokens tokens-ids" role="list" tabindex="0" aria-label="{escape(label)}">'
        + " ".join(parts[:shown])
        + "</div>"
        + _cut_note(shown, len(parts))
    )


# ----- chips of a tokeniser, cached ---------------------------------------------------------------
ChipKey = int | tuple[int, ...]  # one token's id, or the ids of tokens grouped into characters
_cache: weakref.WeakKeyDictionary[bpe.Tokenizer, dict[tuple[str, bool], dict[ChipKey, Chip]]] = (
    weakref.WeakKeyDictionary()
)
_cache_lock = threading.Lock()
_cached = 0  # chips in _cache, over every tokeniser


def encoded_chips(
    tok: bpe.Tokenizer,
    ids: Sequence[int],
    *,
    invalid: InvalidRule = "group",
    whitespace: bool = False,
) -> list[Chip]:
    """The chips of encoded text: as `token_views(token_infos(tok, ids), ...)` shows it, one
    chip per view, each built once per tokeniser and display setting."""
    chips = _chips_for(tok, invalid, whitespace)
    out: list[Chip] = []
    missing = 0
    groups = _groups(tok, ids) if invalid == "group" else None
    if groups is None:
        get = chips.get
        for token_id in ids:
            c = get(token_id)
            if c is None:
                c = chips[token_id] = _build(tok, (token_id,), invalid, whitespace)
                missing += 1
            out.append(c)
    else:
        for start, stop in groups:
            key = ids[start] if stop - start == 1 else tuple(ids[start:stop])
            c = chips.get(key)
            if c is None:
                c = chips[key] = _build(tok, ids[start:stop], invalid, whitespace)
                missing += 1
            out.append(c)
    _count(missing)
    return out


def _build(tok: bpe.Tokenizer, ids: Sequence[int], invalid: InvalidRule, whitespace: bool) -> Chip:
    return chip(stream_view(token_infos(tok, ids), invalid=invalid, whitespace=whitespace))


def _chips_for(tok: bpe.Tokenizer, invalid: str, whitespace: bool) -> dict[ChipKey, Chip]:
    with _cache_lock:
        per_tok = _cache.get(tok)
        if per_tok is None:
            per_tok = _cache[tok] = {}
        return per_tok.setdefault((invalid, whitespace), {})


def cached_chips() -> int:
    """How many chips the cache holds now, over every tokeniser and display setting."""
    return _cached


def _count(added: int) -> None:
    global _cached
    with _cache_lock:
        _cached += added
        if _cached > CHIP_CACHE_LIMIT:
            for per_tok in _cache.values():
                for chips in per_tok.values():
                    chips.clear()
            _cached = 0


def _groups(tok: bpe.Tokenizer, ids: Sequence[int]) -> list[tuple[int, int]] | None:
    """`character_groups` of the tokens, or None when every token stands alone (none of them
    is empty or starts with a continuation byte: only those can start inside a character)."""
    if not _any_may_join(tok, ids):
        return None
    # What the tokens stand for: Llama 2's `<0xNN>` tokens are single bytes of a character.
    return character_groups([tok.display_bytes(token_id) for token_id in ids])


def character_groups(datas: Sequence[bytes]) -> list[tuple[int, int]]:
    """(start, stop) index ranges of the tokens that `group` joins into whole characters, as
    `token_display.split_character_groups` finds them.

    A byte that is not a continuation byte is never inside a character, so whether a token
    starts inside one depends only on the nearest such byte in the three before its start;
    only the tokens that are empty or start with a continuation byte are looked at.
    """
    data = b"".join(datas)
    groups = []
    start, offset = 0, 0
    for index, token_data in enumerate(datas):
        joins = (not token_data or 0x80 <= token_data[0] <= 0xBF) and _inside_character(
            data, offset
        )
        if index and not joins:
            groups.append((start, index))
            start = index
        offset += len(token_data)
    if datas:
        groups.append((start, len(datas)))
    return groups


def _inside_character(data: bytes, offset: int) -> bool:
    """True if byte `offset` of `data` is strictly inside a whole multi-byte character, as
    `webapp.rendering.utf8.utf8_spans` reads the bytes."""
    if offset >= len(data) or not 0x80 <= data[offset] <= 0xBF:
        return False
    for lead_at in range(offset - 1, max(offset - 4, -1), -1):
        lead = data[lead_at]
        if 0x80 <= lead <= 0xBF:
            continue
        if lead < 0xC2 or lead > 0xF4:
            return False
        length = 2 if lead <= 0xDF else 3 if lead <= 0xEF else 4
        end = lead_at + length
        return offset < end <= len(data) and is_valid_utf8(data[lead_at:end])
    return False


_join_cache: weakref.WeakKeyDictionary[bpe.Tokenizer, bytearray] = weakref.WeakKeyDictionary()
_UNKNOWN, _STANDS_ALONE, _MAY_JOIN = 0, 1, 2


def _any_may_join(tok: bpe.Tokenizer, ids: Sequence[int]) -> bool:
    """Whether any of the tokens is empty or starts with a continuation byte; what each id is
    is remembered per tokeniser, so a request only looks its ids up (in C, with map)."""
    with _cache_lock:
        known = _join_cache.get(tok)
        if known is None:
            known = _join_cache[tok] = bytearray(tok.id_limit)
    try:
        found = bytes(map(known.__getitem__, ids))
    except IndexError:  # an id past id_limit: the tokeniser will refuse it; look one by one
        return any(_joins(tok, token_id) for token_id in ids)
    if _UNKNOWN in found:
        for token_id in {ids[i] for i, flag in enumerate(found) if flag == _UNKNOWN}:
            known[token_id] = _MAY_JOIN if _joins(tok, token_id) else _STANDS_ALONE
        found = bytes(map(known.__getitem__, ids))
    return _MAY_JOIN in found


def _joins(tok: bpe.Tokenizer, token_id: int) -> bool:
    data = tok.display_bytes(token_id)
    return not data or 0x80 <= data[0] <= 0xBF
