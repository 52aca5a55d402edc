"""token_display: what a reader sees of token bytes, and that nothing unsafe gets through."""

from __future__ import annotations

import doctest
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import bpe
from webapp.rendering import token_display, utf8
from webapp.rendering.token_display import (
    INVALID_RULES,
    InvalidRule,
    Piece,
    TokenInfo,
    byte_pieces,
    counts,
    needs_escape,
    split_character_groups,
    text_pieces,
    token_infos,
    token_view,
    token_views,
)
from webapp.rendering.utf8 import hex_bytes

VISIBLE = {"space": " ", "tab": "\t", "newline": "\n"}


def kinds(pieces: list[Piece]) -> list[tuple[str, str]]:
    return [(p.kind, p.text) for p in pieces]


def pieces_to_bytes(pieces: list[Piece]) -> bytes:
    """Undo the hex rule: the pieces say exactly which bytes the token holds."""
    out = bytearray()
    for piece in pieces:
        if piece.kind == "text":
            out += piece.text.encode()
        elif piece.kind == "escape":
            out += chr(int(piece.text.split("+")[1], 16)).encode()
        elif piece.kind == "hex":
            out += bytes.fromhex(piece.text)
        elif piece.kind in VISIBLE:
            out += VISIBLE[piece.kind].encode()
        elif piece.kind == "base":
            pass  # the dotted circle is added for display only
        else:
            raise AssertionError(f"unexpected piece {piece}")
    return bytes(out)


def test_docstring_examples() -> None:
    result = doctest.testmod(token_display)
    assert result.attempted >= 6 and result.failed == 0
    result = doctest.testmod(utf8)
    assert result.attempted >= 2 and result.failed == 0


@pytest.mark.parametrize(
    ("char", "name"),
    [
        ("\u202e", "RIGHT-TO-LEFT OVERRIDE"),
        ("\u2066", "LEFT-TO-RIGHT ISOLATE"),
        ("\u200b", "ZERO WIDTH SPACE"),
        ("\u200d", "ZERO WIDTH JOINER"),
        ("\ufeff", "ZERO WIDTH NO-BREAK SPACE"),
        ("\x00", "NULL"),
        ("\x1b", "ESCAPE"),
        ("\r", "CARRIAGE RETURN"),
        ("\x7f", "DELETE"),
        ("\u00a0", "NO-BREAK SPACE"),
        ("\u2028", "LINE SEPARATOR"),
        ("\u3164", "HANGUL FILLER"),
    ],
)
def test_invisible_and_reordering_characters_become_named_escapes(char: str, name: str) -> None:
    [piece] = text_pieces(char)
    assert piece.kind == "escape"
    assert piece.text == f"U+{ord(char):04X}"
    assert name in piece.title


def test_whitespace_is_raw_unless_made_visible() -> None:
    assert kinds(text_pieces("a b\tc\n")) == [("text", "a b\tc\n")]
    assert kinds(text_pieces("a b\tc\n", whitespace=True)) == [
        ("text", "a"),
        ("space", "·"),
        ("text", "b"),
        ("tab", "→"),
        ("text", "c"),
        ("newline", "↵"),
    ]


def test_html_is_left_for_the_template_to_escape() -> None:
    # Jinja escapes <, & and quotes; this layer must not double-escape them.
    assert kinds(text_pieces("<script>&")) == [("text", "<script>&")]


def test_leading_combining_mark_gets_a_dotted_circle() -> None:
    assert kinds(text_pieces("\u0301a"))[0] == ("base", "◌")
    assert kinds(text_pieces("a\u0301")) == [("text", "a\u0301")]


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("hex", [("text", "x"), ("hex", "E4 B8")]),
        ("group", [("text", "x"), ("hex", "E4 B8")]),
        ("replace", [("text", "x"), ("replacement", "\ufffd")]),
    ],
)
def test_the_three_rules_for_a_lone_partial_character(
    rule: InvalidRule, expected: list[tuple[str, str]]
) -> None:
    assert kinds(byte_pieces(b"x\xe4\xb8", invalid=rule)) == expected


def test_stray_continuation_bytes_are_hex_each_run_once() -> None:
    assert kinds(byte_pieces(b"\x80\xbfa\xbf")) == [
        ("hex", "80 BF"),
        ("text", "a"),
        ("hex", "BF"),
    ]


def test_overlong_and_surrogate_encodings_are_not_characters() -> None:
    assert kinds(byte_pieces(b"\xc0\xaf")) == [("hex", "C0 AF")]
    assert kinds(byte_pieces(b"\xed\xa0\x80")) == [("hex", "ED A0 80")]


def test_unknown_rule_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="group"):
        byte_pieces(b"a", invalid="drop")  # type: ignore[arg-type]  # not a rule, on purpose


def test_group_rule_joins_tokens_that_split_a_character() -> None:
    infos = [TokenInfo(1, b"a\xe4"), TokenInfo(2, b"\xb8\xad"), TokenInfo(3, b"b")]
    grouped = token_views(infos, invalid="group")
    assert [v.ids for v in grouped] == [(1, 2), (3,)]
    assert kinds(list(grouped[0].pieces)) == [("text", "a中")]
    assert "2 tokens joined" in grouped[0].tip
    assert not grouped[0].partial
    separate = token_views(infos, invalid="hex")
    assert [v.ids for v in separate] == [(1,), (2,), (3,)]
    assert kinds(list(separate[1].pieces)) == [("hex", "B8 AD")]
    assert all(v.partial for v in separate[:2])


def test_group_rule_keeps_an_unfinished_character_as_hex() -> None:
    groups = split_character_groups([TokenInfo(1, b"\xe4"), TokenInfo(2, b"a")])
    assert [[i.token_id for i in g] for g in groups] == [[1], [2]]


def test_words_mode_end_of_word_has_its_own_marker() -> None:
    tok = bpe.train("low low lower", vocab_size=40, mode="words", trainer="reference")
    low = tok.encode("low")
    [view] = token_views(token_infos(tok, low))
    assert view.pieces[-1] == Piece("eow", "</w>", "end of word")
    assert "+ </w>" in view.tip
    end_of_word = token_view(token_infos(tok, [tok.base_size - 1])[0])
    assert kinds(list(end_of_word.pieces)) == [("eow", "</w>")]


def test_tip_names_id_rank_and_hex() -> None:
    tok = bpe.train("aaab aaab", vocab_size=258, mode="naive", trainer="reference")
    merged = token_view(token_infos(tok, [256])[0])
    assert merged.tip == "id 256 · rank 0 · 2 bytes: 61 61"
    assert merged.label.startswith("aa, ")
    byte = token_view(token_infos(tok, [0])[0])
    assert byte.tip == "id 0 · base byte · 1 byte: 00"
    assert kinds(list(byte.pieces)) == [("escape", "U+0000")]


def test_special_tokens_are_marked() -> None:
    tok = bpe.train(
        "ab ab", vocab_size=258, mode="naive", trainer="reference", special_tokens=["<|end|>"]
    )
    [view] = token_views(token_infos(tok, tok.encode("<|end|>", allowed_special="all")))
    assert view.special and "special token" in view.tip


def test_long_tokens_cut_the_hex_in_the_tip() -> None:
    view = token_view(TokenInfo(999, b"a" * 100, rank=5))
    assert view.tip.endswith("61 …")
    assert view.hex.count("61") == 100


def test_unknown_id_is_a_value_error() -> None:
    tok = bpe.train("ab", vocab_size=256, mode="naive", trainer="reference")
    with pytest.raises(ValueError, match="not in this vocabulary"):
        token_infos(tok, [9999])


def test_counts() -> None:
    c = counts("", [])
    assert (c.bytes, c.characters, c.tokens, c.bytes_per_token) == (0, 0, 0, None)


@given(st.binary(max_size=40), st.sampled_from(INVALID_RULES), st.booleans())
def test_no_piece_ever_holds_a_character_that_needs_escaping(
    data: bytes, rule: InvalidRule, whitespace: bool
) -> None:
    for piece in byte_pieces(data, invalid=rule, whitespace=whitespace):
        assert not any(needs_escape(c) for c in piece.text), piece
        assert "\x00" not in piece.text and "\u202e" not in piece.text


@given(st.binary(max_size=40), st.booleans())
def test_hex_rule_shows_exactly_the_bytes(data: bytes, whitespace: bool) -> None:
    assert pieces_to_bytes(byte_pieces(data, invalid="hex", whitespace=whitespace)) == data


@given(st.lists(st.binary(min_size=1, max_size=6), max_size=12))
def test_grouping_covers_every_token_once_in_order(parts: list[bytes]) -> None:
    infos = [TokenInfo(i, data) for i, data in enumerate(parts)]
    views = token_views(infos, invalid="group")
    assert [i for v in views for i in v.ids] == list(range(len(parts)))
    assert all(0 <= v.colour < token_display.PALETTE_SIZE for v in views)


@given(st.text(max_size=30))
def test_valid_text_shows_every_printable_character_as_itself(text: str) -> None:
    shown = "".join(p.text for p in text_pieces(text) if p.kind == "text")
    kept = "".join(c for c in text if not needs_escape(c))
    assert shown == kept
    assert all(unicodedata.category(c) not in ("Cc", "Cf") or c in "\t\n" for c in shown)


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(" \t\n\u3164\u034f\u202e\xa0") | st.characters(),
        max_size=12,
    ),
    st.booleans(),
    st.booleans(),
)
@example("\u3164", False, False)  # printable, yet drawn as nothing
@example("a b", True, False)
@example("\u0301e", False, False)  # a leading combining mark
def test_plain_text_takes_a_shortcut_to_the_same_pieces(text, whitespace, newlines):
    """text_pieces skips the per-character walk for printable text: the same pieces, for every
    character (surrogates, unassigned and private-use ones included)."""
    slow = token_display._pieces_by_character(text, whitespace=whitespace, newlines=newlines)
    slow = token_display._give_leading_mark_a_base(slow)
    assert text_pieces(text, whitespace=whitespace, newlines=newlines) == slow
    data = text.encode("utf-8", errors="surrogatepass")
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        shown = byte_pieces(data, whitespace=whitespace, newlines=newlines)
        assert shown == slow


@given(st.binary(max_size=40), st.one_of(st.none(), st.integers(min_value=0, max_value=30)))
def test_hex_bytes_is_each_byte_in_upper_case_hex(data, limit):
    shown = data if limit is None else data[:limit]
    expected = " ".join(f"{b:02X}" for b in shown)
    if limit is not None and len(data) > limit:
        expected += " …"
    assert hex_bytes(data, limit=limit) == expected
