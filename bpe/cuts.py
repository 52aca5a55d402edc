"""Where a byte-level text can be cut without changing how it encodes, so pieces can be cached.

Why a cut is exact. Encoding applies merges in id order, each left to right. Call a position
between two bytes *crossed* if some merge joins a token ending there to one starting there.
If no merge ever crosses position b, the tokens left of b evolve exactly as the left part
would alone (the left-to-right scan of each merge reaches b in the same state), and so do the
tokens right of b; so `encode(left + right) == encode(left) + encode(right)`. A merge crossing
b makes a token whose bytes sit in the text across b. So if no token of the vocabulary can sit
across b in this text, b can be cut.

`CutTable` decides that from the characters on either side of a character boundary:
- a token that holds two whole characters `xy` across one of its inner character boundaries
  makes every `x|y` boundary unsafe (`unsafe_pairs`);
- a token that holds part of a character across an inner boundary (byte-level training can
  learn `基` + the first two bytes of `础`) is handled by not cutting text that could hold it at
  all: text holding a whole character of such a token (`tainted`), or its bytes
  (`straddling_bytes`, for the rare token made of two partial characters), is left whole.

For English most letter pairs sit inside some token, so cuts fall mostly around punctuation;
for Chinese, where chunks are long runs of letters that rarely repeat, most boundaries between
two characters that never form a word together can be cut, and the pieces (words) repeat.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import operator
import sys
from collections.abc import Iterable

# UTF-32 in the machine's byte order, so that two characters read as one native 8-byte integer
# give the first one's code in the low half on little-endian machines, the high half otherwise.
_UTF32 = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"


def _pair_code(first: int, second: int) -> int:
    """Two characters' code points as `_safe_boundaries` reads them from the text."""
    return first | second << 32 if sys.byteorder == "little" else first << 32 | second


def _char_length(lead: int) -> int:
    """Bytes of the UTF-8 character starting with this byte; 0 if it cannot start one."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


# bytes.translate(None, _CONTINUATION) keeps one byte per character: a cheap character count.
_CONTINUATION = bytes(range(0x80, 0xC0))
# Partial tokens whose head or tail fits more characters than this are searched in every text.
_MAX_ANCHORS = 4096


class CutTable:
    """The cut rules for one vocabulary (the bytes of every merged token)."""

    def __init__(self, tokens: Iterable[bytes]) -> None:
        unsafe: set[str] = set()
        anchored: dict[str, set[bytes]] = {}  # character -> partial tokens it may be part of
        unanchored: set[bytes] = set()
        for data in tokens:
            _add_token(data, unsafe, anchored, unanchored)
        self.unsafe_pairs = frozenset(unsafe)
        self._unsafe_codes = frozenset(_pair_code(ord(pair[0]), ord(pair[1])) for pair in unsafe)
        self.anchors = {char: tuple(sorted(found)) for char, found in anchored.items()}
        self.anchor_chars = frozenset(anchored)
        self.unanchored = tuple(sorted(unanchored))

    def pieces(
        self, text: str, data: bytes, chunk_ends: Iterable[int] = ()
    ) -> tuple[list[str], set[int]]:
        """Text (`data`: its UTF-8 bytes) cut at every character boundary no token can sit
        across, and the indices of the pieces that hold a partial token (see `bpe.encoder`'s
        `CharacterEncoder`: only those need encoding byte by byte). `chunk_ends`: character
        offsets the text is cut at as well (chunked mode: no merge crosses a chunk's end).

        >>> CutTable([b"ab", b"c"]).pieces("abcab", b"abcab")
        (['ab', 'c', 'ab'], set())
        """
        n = len(text)
        forbidden: set[int] = set()
        if self.unanchored or not self.anchor_chars.isdisjoint(text):
            forbidden = self._inside_partial_tokens(text, data)
        if n < 2:
            return [text], set()
        # Boundaries i (1..n-1) whose two characters no token holds together; all in C.
        # safe[i - 1] says whether boundary i is cut; chunk ends are cut even when forbidden.
        safe = self._safe_boundaries(text)
        for boundaries, cut in ((forbidden, False), (chunk_ends, True)):
            at = [i - 1 for i in boundaries if 0 < i < n]
            collections.deque(map(safe.__setitem__, at, itertools.repeat(cut)), maxlen=0)
        cuts = list(itertools.compress(range(1, n), safe))
        if not cuts:
            return [text], {0} if forbidden else set()
        partial = {bisect.bisect(cuts, i) for i in forbidden}
        cuts.append(n)
        out = [text[: cuts[0]]]
        out.extend(map(text.__getitem__, itertools.starmap(slice, itertools.pairwise(cuts))))
        return out, partial

    def _safe_boundaries(self, text: str) -> list[bool]:
        """For each boundary i (1..n-1), at index i - 1: no token holds its two characters.

        The pairs are read as 8-byte integers from the text in UTF-32 (two views, one for the
        boundaries after even positions and one after odd), which costs far less than a
        two-character string per boundary: Chinese characters are no cached objects."""
        n = len(text)
        wide = memoryview(text.encode(_UTF32, errors="surrogatepass"))
        unsafe = self._unsafe_codes.__contains__
        safe = [False] * (n - 1)
        safe[0::2] = map(operator.not_, map(unsafe, wide[: n // 2 * 8].cast("Q")))
        safe[1::2] = map(operator.not_, map(unsafe, wide[4 : 4 + (n - 1) // 2 * 8].cast("Q")))
        return safe

    def _inside_partial_tokens(self, text: str, data: bytes) -> set[int]:
        """Character boundaries inside an occurrence of a partial token's bytes."""
        tokens = set(self.unanchored)
        for char in self.anchor_chars.intersection(text):
            tokens.update(self.anchors[char])
        spans: list[tuple[int, int]] = []
        for token in tokens:
            at = data.find(token)
            while at >= 0:
                spans.append((at, at + len(token)))
                at = data.find(token, at + 1)
        spans.sort()
        forbidden: set[int] = set()
        counted_to = chars = 0  # chars: characters starting in data[:counted_to]
        for start, end in spans:
            # The first boundary after `start` is boundary number (characters in data[:start+1]).
            chars += len(data[counted_to : start + 1].translate(None, _CONTINUATION))
            counted_to = start + 1
            inner = len(data[start + 1 : end].translate(None, _CONTINUATION))
            forbidden.update(range(chars, chars + inner))
        return forbidden


def _add_token(
    data: bytes, unsafe: set[str], anchored: dict[str, set[bytes]], unanchored: set[bytes]
) -> None:
    starts = [j for j, byte in enumerate(data) if not _is_continuation(byte)]
    if not [j for j in starts if j > 0]:
        return  # inside one character: it cannot sit across a character boundary
    # The token's characters as (start, end, whole); a part at either edge may be cut off.
    spans: list[tuple[int, int, bool]] = []
    edges = [*starts, len(data)] if starts[0] == 0 else [0, *starts, len(data)]
    for start, end in itertools.pairwise(edges):
        length = _char_length(data[start])
        if _is_continuation(data[start]):
            spans.append((start, end, False))  # the tail of a character cut off on the left
        elif length == end - start:
            spans.append((start, end, True))
        elif end == len(data) and end - start < length:
            spans.append((start, end, False))  # the head of a character cut off on the right
        else:
            return  # not valid UTF-8 at any alignment: the token never occurs in text
    chars: list[str | None] = []
    for start, end, whole in spans:
        if not whole:
            chars.append(None)
            continue
        try:
            chars.append(data[start:end].decode("utf-8"))
        except UnicodeDecodeError:
            return  # e.g. an encoded surrogate: never in text we can encode
    if None not in chars:
        unsafe.update(map(operator.add, chars, chars[1:]))
        return
    # Part of a character sits across an inner boundary: no pair of whole characters says
    # where this token can occur, so its bytes are searched for in text that may hold it,
    # text holding one of its whole characters or, failing that, a character its partial
    # head or tail can belong to.
    anchors = [char for char in chars if char is not None]
    if not anchors:
        head = data[spans[-1][0] :]
        tail = data[: spans[0][1]]
        anchors = _characters_starting_with(head) or _characters_ending_with(tail)
    if not anchors:
        unanchored.add(data)
    for char in anchors[:1] if chars.count(None) < len(chars) else anchors:
        anchored.setdefault(char, set()).add(data)


def _characters_starting_with(head: bytes) -> list[str]:
    """Every character whose UTF-8 starts with these bytes, if there are few enough."""
    missing = _char_length(head[0]) - len(head)
    if missing <= 0 or 64**missing > _MAX_ANCHORS:
        return []
    return _decodable(
        head + bytes(rest) for rest in itertools.product(range(0x80, 0xC0), repeat=missing)
    )


def _characters_ending_with(tail: bytes) -> list[str]:
    """Every character whose UTF-8 ends with these continuation bytes, if there are few enough."""
    found: list[str] = []
    for length in (2, 3, 4):
        missing = length - len(tail) - 1
        if missing < 0:
            continue
        if 64**missing * 64 > _MAX_ANCHORS:
            return []
        for lead in range(0xC2, 0xF5):
            if _char_length(lead) != length:
                continue
            found += _decodable(
                bytes([lead, *rest]) + tail
                for rest in itertools.product(range(0x80, 0xC0), repeat=missing)
            )
    return found


def _decodable(candidates: Iterable[bytes]) -> list[str]:
    chars: list[str] = []
    for candidate in candidates:
        try:
            chars.append(candidate.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return chars
