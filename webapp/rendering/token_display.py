"""Token bytes -> pieces that are safe and honest to show in HTML.

Everything the pages show of a token goes through here, so one module decides what a reader
sees for bytes that are not plain text:
- control, format and bidi characters (NUL, U+202E, zero-width joiners, ...) and unusual
  spaces become visible escapes (`U+202E`), never the raw character;
- space, tab and newline are shown as `·`, `→`, `↵` when whitespace is made visible;
- bytes that are not valid UTF-8 on their own follow one of three rules (`INVALID_RULES`):
  `group` joins neighbouring tokens until the characters are whole (a single token on its own
  falls back to hex), `hex` shows the raw bytes, `replace` shows U+FFFD;
- a words-mode token that ends a word gets a separate `</w>` marker piece.

The functions return plain data (`Piece`, `TokenView`, `Counts`); `webapp.rendering.chips` turns
it into escaped HTML spans. Nothing here imports Flask, so it is tested on its own.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from webapp.rendering.utf8 import hex_bytes, is_valid_utf8, utf8_spans

if TYPE_CHECKING:
    import bpe

InvalidRule = Literal["group", "hex", "replace"]
INVALID_RULES: tuple[InvalidRule, ...] = ("group", "hex", "replace")
PALETTE_SIZE = 6  # colour classes c0..c5 in app.css (Paul Tol's "light" scheme)
TIP_HEX_LIMIT = 24  # bytes of hex shown in a tooltip before it is cut with "…"

# Characters that draw nothing, or reorder or join their neighbours: always escaped.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
# Letters and marks that render as blank space; used to spoof identifiers, so escape them too.
_INVISIBLE = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0})
_INVISIBLE_CHARACTERS = frozenset(map(chr, _INVISIBLE))
_CONTROL_NAMES = {
    0x00: "NULL",
    0x07: "BELL",
    0x08: "BACKSPACE",
    0x0B: "LINE TABULATION",
    0x0C: "FORM FEED",
    0x0D: "CARRIAGE RETURN",
    0x1B: "ESCAPE",
    0x7F: "DELETE",
    0x85: "NEXT LINE",
}
_VISIBLE_WHITESPACE = {" ": ("space", "·"), "\t": ("tab", "→"), "\n": ("newline", "↵")}


@dataclass(frozen=True)
class Piece:
    """A run of one kind: `text`, `space`, `tab`, `newline`, `escape`, `hex`, `replacement`,
    `base` (a dotted circle carrying a leading combining mark) or `eow` (`</w>`).

    `text` never holds a control, format or bidi character; `title` explains escapes.
    """

    kind: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class TokenInfo:
    """What the display needs to know of one token, from a Tokenizer or a vocab row."""

    token_id: int
    data: bytes
    rank: int | None = None  # 0-based merge rank; None for base ids and special tokens
    special: bool = False
    ends_word: bool = False  # words mode: the token closes a word (`</w>`)
    base_kind: str = "byte"  # what a non-merge, non-special id is: "byte" or "character"


@dataclass(frozen=True)
class TokenView:
    """One coloured span: usually one token, several when `group` joins a split character."""

    ids: tuple[int, ...]
    pieces: tuple[Piece, ...]
    tip: str  # id, rank and hex bytes, shown on hover and keyboard focus
    label: str  # the same for screen readers, with the visible text first
    hex: str
    special: bool
    partial: bool  # the bytes are not valid UTF-8 on their own
    colour: int  # 0..PALETTE_SIZE-1
    line_breaks: int = 0  # newlines in the token: encoded text breaks its line after it


@dataclass(frozen=True)
class Counts:
    bytes: int
    characters: int
    tokens: int

    @property
    def bytes_per_token(self) -> float | None:
        return self.bytes / self.tokens if self.tokens else None


# ----- characters -> pieces ----------------------------------------------------------------------
def char_name(char: str) -> str:
    point = ord(char)
    name = unicodedata.name(char, "") or _CONTROL_NAMES.get(point, "")
    if not name:
        category = unicodedata.category(char)
        name = {"Cc": "control character", "Co": "private use", "Cn": "unassigned"}.get(
            category, "invisible character"
        )
    return f"U+{point:04X} {name}"


def needs_escape(char: str) -> bool:
    """True for characters shown as `U+XXXX`: controls, format and bidi characters, unusual
    spaces, line and paragraph separators, private use, unassigned and invisible letters."""
    if char in _VISIBLE_WHITESPACE:
        return False
    return unicodedata.category(char) in _ESCAPED_CATEGORIES or ord(char) in _INVISIBLE


def text_pieces(text: str, *, whitespace: bool = False, newlines: bool = False) -> list[Piece]:
    """Valid text -> pieces, escaping what must never be raw. `newlines` marks `\n` as `↵`
    even when other whitespace is left raw (encoded text breaks its lines between tokens).

    >>> [(p.kind, p.text) for p in text_pieces("a\\u202eb c", whitespace=True)]
    [('text', 'a'), ('escape', 'U+202E'), ('text', 'b'), ('space', '·'), ('text', 'c')]
    """
    if (
        text.isprintable()  # false exactly for the escaped categories (bar the ASCII space)
        and not (whitespace and " " in text)
        and _INVISIBLE_CHARACTERS.isdisjoint(text)
    ):
        return _give_leading_mark_a_base([Piece("text", text)] if text else [])
    return _pieces_by_character(text, whitespace=whitespace, newlines=newlines)


def _pieces_by_character(text: str, *, whitespace: bool, newlines: bool) -> list[Piece]:
    """`text_pieces`, one character at a time (what it does for text that is not plain)."""
    pieces: list[Piece] = []
    plain: list[str] = []

    def flush() -> None:
        if plain:
            pieces.append(Piece("text", "".join(plain)))
            plain.clear()

    for char in text:
        if (whitespace and char in _VISIBLE_WHITESPACE) or (newlines and char == "\n"):
            kind, visible = _VISIBLE_WHITESPACE[char]
            flush()
            pieces.append(Piece(kind, visible))
        elif needs_escape(char):
            flush()
            pieces.append(Piece("escape", f"U+{ord(char):04X}", char_name(char)))
        else:
            plain.append(char)
    flush()
    return _give_leading_mark_a_base(pieces)


def _give_leading_mark_a_base(pieces: list[Piece]) -> list[Piece]:
    # A token that starts with a combining mark would draw it on the previous token's last
    # letter, across the visible boundary; a dotted circle gives it its own base, as Unicode
    # charts do.
    if pieces and pieces[0].kind == "text" and unicodedata.category(pieces[0].text[0])[0] == "M":
        return [
            Piece("base", "◌", "dotted circle: the token starts with a combining mark")
        ] + pieces
    return pieces


def byte_pieces(
    data: bytes, *, invalid: InvalidRule = "hex", whitespace: bool = False, newlines: bool = False
) -> list[Piece]:
    """Token bytes -> pieces. Whole characters become text; bytes that are not part of a whole
    character become one hex piece per run (`hex`, and `group` for a lone token) or U+FFFD
    (`replace`, one per maximal invalid subpart, as every UTF-8 decoder does).

    >>> [(p.kind, p.text) for p in byte_pieces(b"\\xe4\\xb8 x")]
    [('hex', 'E4 B8'), ('text', ' x')]
    >>> [(p.kind, p.text) for p in byte_pieces(b"\\xe4\\xb8 x", invalid="replace")]
    [('replacement', '�'), ('text', ' x')]
    """
    if invalid not in INVALID_RULES:
        raise ValueError(f"unknown rule {invalid!r} for partial UTF-8; use one of {INVALID_RULES}")
    try:  # most tokens are whole characters: then there is one valid span, all of it
        return text_pieces(data.decode("utf-8"), whitespace=whitespace, newlines=newlines)
    except UnicodeDecodeError:
        pass
    pieces: list[Piece] = []
    valid_start = None
    invalid_start = None
    for start, _end, valid in utf8_spans(data):
        if valid:
            if invalid_start is not None:
                pieces.append(_invalid_piece(data[invalid_start:start], invalid))
                invalid_start = None
            if valid_start is None:
                valid_start = start
        else:
            if valid_start is not None:
                text = data[valid_start:start].decode()
                pieces.extend(text_pieces(text, whitespace=whitespace, newlines=newlines))
                valid_start = None
            if invalid_start is None:
                invalid_start = start
    if valid_start is not None:
        text = data[valid_start:].decode()
        pieces.extend(text_pieces(text, whitespace=whitespace, newlines=newlines))
    if invalid_start is not None:
        pieces.append(_invalid_piece(data[invalid_start:], invalid))
    return pieces


def _invalid_piece(run: bytes, rule: InvalidRule) -> Piece:
    title = (
        "1 byte that is not" if len(run) == 1 else f"{len(run)} bytes that are not"
    ) + " a whole UTF-8 character"
    if rule == "replace":
        return Piece("replacement", run.decode("utf-8", errors="replace"), title)
    return Piece("hex", hex_bytes(run), title)


# ----- tokens -> views --------------------------------------------------------------------------
def describe(info: TokenInfo) -> str:
    """The tooltip line: id, what the token is, its bytes in hex.

    >>> describe(TokenInfo(300, b" the", rank=44))
    'id 300 · rank 44 · 4 bytes: 20 74 68 65'
    """
    if info.special:
        what = "special token"
    elif info.rank is None:
        what = f"base {info.base_kind}"
    else:
        what = f"rank {info.rank}"
    size = len(info.data)
    tail = f"{size} byte{'s' if size != 1 else ''}"
    if size:
        tail += ": " + hex_bytes(info.data, limit=TIP_HEX_LIMIT)
    if info.ends_word:
        tail += " + </w>"
    return f"id {info.token_id} · {what} · {tail}"


def token_view(
    info: TokenInfo,
    *,
    invalid: InvalidRule = "hex",
    whitespace: bool = False,
    colour: int = 0,
) -> TokenView:
    """One token on its own (vocabulary rows, merges, the merge tree)."""
    return _view([info], invalid=invalid, whitespace=whitespace, colour=colour)


def token_views(
    infos: Sequence[TokenInfo],
    *,
    invalid: InvalidRule = "group",
    whitespace: bool = False,
) -> list[TokenView]:
    """A sequence of tokens, as in encoded text; `group` joins tokens that split a character.

    Newlines are always marked `↵` here: a token never holds a line break, so it is one box
    that never wraps, and the stream breaks the line after it (`line_breaks`) instead.
    """
    groups = split_character_groups(infos) if invalid == "group" else [[i] for i in infos]
    return [
        _view(group, invalid=invalid, whitespace=whitespace, colour=n % PALETTE_SIZE, newlines=True)
        for n, group in enumerate(groups)
    ]


def stream_view(
    group: Sequence[TokenInfo], *, invalid: InvalidRule = "group", whitespace: bool = False
) -> TokenView:
    """One view of `token_views` on its own (colour 0): `group` is one of its groups, which
    shows the same wherever it stands, since a group starts and ends between characters."""
    return _view(group, invalid=invalid, whitespace=whitespace, colour=0, newlines=True)


def split_character_groups(infos: Sequence[TokenInfo]) -> list[list[TokenInfo]]:
    """Runs of tokens whose boundaries fall inside a character, so the run shows whole ones.

    >>> infos = [TokenInfo(1, b"a\\xe4"), TokenInfo(2, b"\\xb8"), TokenInfo(3, b"\\xad")]
    >>> [[i.token_id for i in g] for g in split_character_groups(infos + [TokenInfo(4, b"b")])]
    [[1, 2, 3], [4]]
    """
    data = b"".join(info.data for info in infos)
    inside: set[int] = set()  # byte offsets strictly inside a valid multi-byte character
    for start, end, valid in utf8_spans(data):
        if valid and end - start > 1:
            inside.update(range(start + 1, end))
    groups: list[list[TokenInfo]] = []
    offset = 0
    for info in infos:
        if groups and offset in inside:
            groups[-1].append(info)
        else:
            groups.append([info])
        offset += len(info.data)
    return groups


def _view(
    group: Sequence[TokenInfo],
    *,
    invalid: InvalidRule,
    whitespace: bool,
    colour: int,
    newlines: bool = False,
) -> TokenView:
    data = b"".join(info.data for info in group)
    pieces = byte_pieces(data, invalid=invalid, whitespace=whitespace, newlines=newlines)
    if group[-1].ends_word:
        pieces.append(Piece("eow", "</w>", "end of word"))
    if len(group) == 1:
        tip = describe(group[0])
    else:
        tip = f"{len(group)} tokens joined to show whole characters: " + "; ".join(
            describe(info) for info in group
        )
    visible = "".join(p.text for p in pieces) or "(empty)"
    return TokenView(
        ids=tuple(info.token_id for info in group),
        pieces=tuple(pieces),
        tip=tip,
        label=f"{visible}, {tip}",
        hex=hex_bytes(data),
        special=any(info.special for info in group),
        partial=not is_valid_utf8(data),
        colour=colour % PALETTE_SIZE,
        line_breaks=data.count(b"\n") if newlines else 0,
    )


# ----- from a Tokenizer -------------------------------------------------------------------------
def token_infos(tok: bpe.Tokenizer, ids: Iterable[int]) -> list[TokenInfo]:
    """TokenInfo for ids of a bpe.Tokenizer; raises ValueError for an id not in it."""
    specials = set(tok.special_tokens.values())
    out = []
    for token_id in ids:
        data = tok.display_bytes(token_id)  # Llama 2's `▁` as a space, `<0xNN>` as its byte
        rank = None if token_id in specials else tok.merge_rank(token_id)
        out.append(
            TokenInfo(
                token_id,
                data,
                rank=rank,
                special=token_id in specials,
                ends_word=tok.ends_word(token_id),
                base_kind="byte" if rank is not None else tok.base_kind(token_id),
            )
        )
    return out


def counts(text: str, ids: Sequence[int]) -> Counts:
    """The four numbers shown under encoded text.

    >>> c = counts("héllo", [1, 2])
    >>> (c.bytes, c.characters, c.tokens, c.bytes_per_token)
    (6, 5, 2, 3.0)
    """
    return Counts(bytes=len(text.encode("utf-8")), characters=len(text), tokens=len(ids))
