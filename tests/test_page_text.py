"""webapp.rendering.page_text: names, patterns and form values on a page, escaped, nothing raw."""

from __future__ import annotations

import doctest

from hypothesis import given, settings
from hypothesis import strategies as st

from webapp.rendering import page_text
from webapp.rendering.page_text import escape_html, form_value_html
from webapp.rendering.token_display import needs_escape

PAYLOADS = ["<script>", '"><img onerror=x>', "hx-get=", "\u202e", "\x00", "\r\n", "&amp;", "'"]


def test_docstring_examples() -> None:
    result = doctest.testmod(page_text)
    assert result.attempted >= 3 and result.failed == 0


def _one_character_at_a_time(text: str) -> str:
    """The rule form values follow, written plainly: each character on its own."""
    return "".join(f"&#x{ord(c):X};" if needs_escape(c) else escape_html(c) for c in text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PAYLOADS) | st.text(max_size=8), max_size=12).map("".join))
def test_form_values_follow_the_one_character_rule(text):
    assert form_value_html(text) == _one_character_at_a_time(text)


def test_a_form_value_of_hostile_text_keeps_nothing_raw():
    written = form_value_html("".join(PAYLOADS) + "東京\t\n")
    for raw in ("<", ">", '"', "'", "=", "\u202e", "\x00", "\r"):
        assert raw not in written
    assert written.endswith("東京\t\n")
