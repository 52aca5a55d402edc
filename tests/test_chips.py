"""webapp.rendering.chips writes token chips in Python: the HTML must be exactly what the Jinja
macros it replaces wrote (kept verbatim in tests/chips_reference.html), on hostile token text
above all: `<script>`, quotes and `=`, RTL overrides and other control characters, half a UTF-8
character, newline tokens, a combining mark at a token's start, special tokens, `</w>`."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from webapp.rendering import chips
from webapp.rendering.chips import NO_MARK, encoded_chips, id_stream_html, stream_html, token_html
from webapp.rendering.template_filters import esc_filter
from webapp.rendering.token_display import (
    INVALID_RULES,
    TokenInfo,
    split_character_groups,
    token_infos,
    token_view,
    token_views,
)
from webapp.rendering.utf8 import is_valid_utf8

HOSTILE = (
    '<script>alert("x")</script> "\'><img src=x onerror=alert(1)> hx-get="/api" &amp; &lt;\n'
    "\u202eevil\u202c \u200d\u200b zero\u00a0width\x00nul\x07bell\x1besc\x7f\r\n"
    "\u0301accent first, e\u0301 then; 東京 中文字 😀👩\u200d👩\u200d👧 𝔘𝔫𝔦\n\n\ttab\t"
) * 3
SPECIALS = ["<|<script>end</script>|>", "<|\u202eend|>"]
DISPLAYS = [(rule, ws) for rule in INVALID_RULES for ws in (False, True)]


@pytest.fixture(scope="module")
def reference():
    """The macros as they were, rendered with autoescaping and the app's `esc` filter."""
    env = jinja2.Environment(autoescape=True)
    env.filters["esc"] = esc_filter
    source = (Path(__file__).parent / "chips_reference.html").read_text(encoding="utf-8")
    return env.from_string(source).module


def _train(mode: str, vocab_size: int) -> bpe.Tokenizer:
    return bpe.train(HOSTILE, vocab_size=vocab_size, mode=mode, special_tokens=SPECIALS)


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, bpe.Tokenizer]:
    # Naive merges cross everything, so tokens hold `<script>`, quotes, U+202E, newlines and
    # half characters; chunked keeps to the GPT-4 chunks; words has `</w>` and `<unk>`.
    return {
        "naive": _train("naive", 420),
        "chunked": _train("chunked", 360),
        "words": _train("words", 200),
    }


def _text_views(tok, ids, rule, whitespace):
    return token_views(token_infos(tok, ids), invalid=rule, whitespace=whitespace)


def _hostile_ids(tok: bpe.Tokenizer) -> list[int]:
    text = HOSTILE + SPECIALS[0] + "unseen ±§ \u2066isolate\u2069 ༀ" + SPECIALS[1]
    return tok.encode(text, allowed_special="all")


def test_the_hostile_tokens_hold_what_they_should(tokenizers):
    """The fixture is as hostile as claimed: otherwise the equality tests prove little."""
    naive = tokenizers["naive"]
    learned = [naive.token_bytes(new) for _, _, new in naive.merges]
    assert any(b"<script>" in data for data in learned)
    assert any("\u202e".encode() in data for data in learned)
    assert any(b"\n" in data for data in learned)
    assert any(b'="' in data or b"=x" in data for data in learned)
    partial = [data for data in learned if not is_valid_utf8(data)]
    assert partial, "no token holds half a UTF-8 character"
    ids = _hostile_ids(naive)
    assert any(len(view.ids) > 1 for view in _text_views(naive, ids, "group", False))


@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
@pytest.mark.parametrize(("rule", "whitespace"), DISPLAYS)
def test_streams_equal_the_macros_they_replace(reference, tokenizers, mode, rule, whitespace):
    tok = tokenizers[mode]
    ids = _hostile_ids(tok)
    views = _text_views(tok, ids, rule, whitespace)
    found = encoded_chips(tok, ids, invalid=rule, whitespace=whitespace)
    assert [c.ids for c in found] == [v.ids for v in views]
    label = 'Tokens of <b>"A"</b>'
    assert stream_html(found, label) == reference.stream(views, label=label)
    assert id_stream_html(found, label) == reference.id_stream(views, label=label)
    # Again, now from the cache: the same HTML.
    again = encoded_chips(tok, ids, invalid=rule, whitespace=whitespace)
    assert stream_html(again) == reference.stream(views)


@pytest.mark.parametrize("mode", ["naive", "chunked"])
def test_marked_streams_equal_the_diff_and_replay_macros(reference, tokenizers, mode):
    tok = tokenizers[mode]
    ids = _hostile_ids(tok)
    views = _text_views(tok, ids, "group", True)
    found = encoded_chips(tok, ids, invalid="group", whitespace=True)
    diff_marks = [
        ("", "")
        if n % 3
        else (" cut-differs spans-cut", f" · a cut only some make · runs across {n} cuts")
        for n in range(len(views))
    ]
    marks = [(extra, note, note) for extra, note in diff_marks]
    assert stream_html(found, "Tokens of A", kind="diff-tokens", marks=marks) == (
        reference.diff_stream(views, diff_marks, "Tokens of A")
    )
    marked = {n for n in range(len(views)) if n % 4 == 1}
    just = (" just-merged", " · just merged", ", just merged")
    replay_marks = [just if n in marked else NO_MARK for n in range(len(views))]
    listed = [{"view": v, "marked": n in marked} for n, v in enumerate(views)]
    assert stream_html(found, "Step 1", kind="replay-tokens", marks=replay_marks) == (
        reference.why_chips(listed, "Step 1")
    )


@pytest.mark.parametrize("mode", ["naive", "words"])
def test_single_tokens_equal_the_token_macro(reference, tokenizers, mode):
    tok = tokenizers[mode]
    for info in token_infos(tok, tok.ordinary_ids + sorted(tok.special_tokens.values())):
        for rule, whitespace in DISPLAYS:
            view = token_view(info, invalid=rule, whitespace=whitespace, colour=info.token_id)
            assert token_html(view) == reference.token(view)
            href = f'/t/x/token/{info.token_id}?a=1&b="2"'
            assert token_html(view, href) == reference.token(view, href=href)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_id_sequence_renders_like_the_macros(reference, tokenizers, data):
    """Any ids at all, in any order: half characters split every way across tokens, so the
    `group` rule joins (and refuses to join) in every pattern the bytes allow."""
    mode = data.draw(st.sampled_from(["naive", "chunked"]))
    tok = tokenizers[mode]
    ids = data.draw(st.lists(st.sampled_from(tok.ordinary_ids), max_size=40))
    rule, whitespace = data.draw(st.sampled_from(DISPLAYS))
    views = _text_views(tok, ids, rule, whitespace)
    found = encoded_chips(tok, ids, invalid=rule, whitespace=whitespace)
    assert stream_html(found) == reference.stream(views)
    assert id_stream_html(found) == reference.id_stream(views)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=4), max_size=12))
def test_groups_are_those_of_split_character_groups(parts):
    """The shortcut that looks only around continuation bytes finds the same groups as the
    scan over the whole text, on arbitrary bytes (empty tokens included)."""
    infos = [TokenInfo(i, data) for i, data in enumerate(parts)]
    expected, start = [], 0
    for group in split_character_groups(infos):
        expected.append((start, start + len(group)))
        start += len(group)
    assert chips.character_groups(parts) == expected


def test_a_full_cache_starts_again_and_stays_right(reference, tokenizers, monkeypatch):
    tok = tokenizers["naive"]
    ids = _hostile_ids(tok)
    views = _text_views(tok, ids, "hex", False)
    monkeypatch.setattr(chips, "CHIP_CACHE_LIMIT", 10)
    for _ in range(3):
        found = encoded_chips(tok, ids, invalid="hex", whitespace=False)
        assert stream_html(found) == reference.stream(views)
        assert chips.cached_chips() <= 10


def test_the_pages_macros_are_the_python_renderer(app, reference, tokenizers):
    """templates/_tokens.html's stream and token macros hand over to webapp.rendering.chips."""
    tok = tokenizers["naive"]
    ids = _hostile_ids(tok)
    views = _text_views(tok, ids, "group", False)
    found = encoded_chips(tok, ids)
    with app.app_context():
        partial = app.jinja_env.get_template("_tokens.html").module
        assert partial.stream(found) == reference.stream(views)
        assert partial.id_stream(found) == reference.id_stream(views)
        assert partial.token(views[0]) == reference.token(views[0])
