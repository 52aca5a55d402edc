"""Token bytes as characters: where the whole UTF-8 characters are, and bytes as hex.

Tokens are bytes, and a byte-level token may hold half a character; `webapp.rendering.token_display`
shows them with these, and `webapp.rendering.chips` groups tokens by them.
"""

from __future__ import annotations

from collections.abc import Iterator


def utf8_spans(data: bytes) -> Iterator[tuple[int, int, bool]]:
    """(start, end, valid) for each whole character, or each single byte that is not one.

    >>> list(utf8_spans("a€".encode() + b"\\xe4"))
    [(0, 1, True), (1, 4, True), (4, 5, False)]
    """
    i, n = 0, len(data)
    while i < n:
        lead = data[i]
        if lead < 0x80:
            yield i, i + 1, True
            i += 1
            continue
        length = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4
        if lead <= 0xF4 and length <= n - i and _decodes(data[i : i + length]):
            yield i, i + length, True
            i += length
        else:
            yield i, i + 1, False
            i += 1


def _decodes(chunk: bytes) -> bool:
    # The codec rejects overlong forms, surrogates and code points past U+10FFFF for us.
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_valid_utf8(data: bytes) -> bool:
    return _decodes(data)


def hex_bytes(data: bytes, *, limit: int | None = None) -> str:
    """Bytes as spaced upper-case hex, cut after `limit` bytes with "…".

    >>> hex_bytes(b" th")
    '20 74 68'
    """
    shown = data if limit is None else data[:limit]
    text = shown.hex(" ").upper()
    return text + " …" if limit is not None and len(data) > limit else text
