"""Any other text on a page (names, patterns, special tokens, form values): HTML-escaped, with
the characters that must not appear raw shown the way token pieces show them. The template
filters (webapp/rendering/template_filters.py) are built on these."""

from __future__ import annotations

import html

from webapp.rendering.token_display import needs_escape, text_pieces


def escape_html(text: str) -> str:
    """HTML-escape text for element content or a quoted attribute, `=` included, so user text
    never spells an attribute (`hx-get=`) anywhere in the page source, not even as text.

    >>> escape_html('"><img onerror=x>')
    '&quot;&gt;&lt;img onerror&#61;x&gt;'
    """
    return html.escape(text).replace("=", "&#61;")


def visible_html(text: str) -> str:
    """Names, patterns, special tokens: HTML-escaped, with escapes shown as in tokens.

    >>> visible_html("a<b>\\u202e")
    'a&lt;b&gt;<span class="pc pc-escape" title="U+202E RIGHT-TO-LEFT OVERRIDE">U+202E</span>'
    """
    out = []
    for piece in text_pieces(text):
        if piece.kind == "text":
            out.append(escape_html(piece.text))
        else:
            out.append(
                f'<span class="pc pc-{piece.kind}" title="{escape_html(piece.title)}">'
                f"{escape_html(piece.text)}</span>"
            )
    return "".join(out)


def form_value_html(text: str) -> str:
    """Text going back into a textarea or a value attribute, escaped so it is never raw but the
    browser still gets the same characters: what must not be raw becomes `&#x...;`.

    (NUL cannot survive any HTML form; browsers turn even `&#x0;` into U+FFFD.)

    >>> form_value_html('"<a>\\u202e\\n')
    '&quot;&lt;a&gt;&#x202E;\\n'
    """
    if text.isascii() and text.isprintable():
        return escape_html(text)
    # Each distinct character is looked at once (50 KB of text holds a few thousand at most),
    # then str.translate writes the whole text.
    table: dict[int, str] = {}
    for char in set(text):
        written = f"&#x{ord(char):X};" if needs_escape(char) else escape_html(char)
        if written != char:
            table[ord(char)] = written
    return text.translate(table)
