"""GPT-2's byte-level alphabet: how HuggingFace's `ByteLevel` components spell bytes as text.

Every byte gets one printable character, so a byte-level vocabulary can be stored as JSON
strings. Both the HF export and the HF import go through this one table.
"""

from __future__ import annotations

from functools import cache


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table used by HF's ByteLevel components.

    Printable Latin-1 bytes stand for themselves; the other 68 (controls, space, 0x7f-0xa0,
    0xad) take the characters from U+0100 on, in byte order.

    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")]
    ('a', 'Ġ', 'Ċ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


@cache
def unicode_to_bytes() -> dict[str, int]:
    """The inverse table: byte-level character -> byte."""
    return {char: b for b, char in bytes_to_unicode().items()}


def byte_level_string(data: bytes) -> str:
    """How HF's byte-level vocabulary spells a byte string."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in data)


def byte_level_bytes(text: str) -> bytes | None:
    """The bytes a byte-level string spells, or None if a character is outside the alphabet.

    >>> byte_level_bytes("Ġhi"), byte_level_bytes("▁hi")
    (b' hi', None)
    """
    try:  # map, not a generator: once per vocabulary entry, 200,000 times for gpt-oss
        return bytes(map(unicode_to_bytes().__getitem__, text))
    except KeyError:
        return None
