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
  learn `基` + the first two bytes of `础`, a *partial token*) is searched for in the text. One
  made of a whole character and one cut-off edge, or of a tail and a head, is a test on the
  two characters beside a boundary, run on every pair of the text in C (`_PairTests`); the
  others are found by the occurrences of their whole characters, with neighbours that end with
  the tail and start with the head. No boundary inside an occurrence is cut, and the piece that
  holds one is encoded byte by byte rather than character by character.

For English most letter pairs sit inside some token, so cuts fall mostly around punctuation;
for Chinese, where chunks are long runs of letters that rarely repeat, most boundaries between
two characters that never form a word together can be cut, and the pieces (words) repeat.
"""

from __future__ import annotations

import collections
import itertools
import operator
import re
import sys
import threading
from collections.abc import Callable, Iterable

# UTF-32 in the machine's byte order, so that two characters read as one native 8-byte integer
# give the first one's code in the low half on little-endian machines, the high half otherwise.
_UTF32 = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"
_LITTLE = sys.byteorder == "little"
# Pairs of noncharacters (c, c + 1) that mark "no cut" and "cut" after each character of a copy
# of the text, so that one `split` makes the pieces; the first pair absent from the text is used.
_MARKS = (*range(0xFDD0, 0xFDF0, 2), *range(0xFFFE, 0x110000, 0x10000))


def _pair_code(first: int, second: int) -> int:
    """Two characters' code points as `CutTable.pieces` reads them from the text."""
    return first | second << 32 if sys.byteorder == "little" else first << 32 | second


def _pair_codes(units: memoryview) -> memoryview:
    """Each two neighbouring 4-byte units (code points, or ids) as one native 8-byte integer,
    packed as `_pair_code` packs them, for lookups in C."""
    pairs = bytearray(8 * (len(units) - 1))
    view = memoryview(pairs).cast("I")
    view[0::2], view[1::2] = units[:-1], units[1:]
    return memoryview(pairs).cast("Q")


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


# A partial token's edges, as tests on the code points beside its whole characters: a tail
# (the last bytes of the character before) as (mask, value, smallest code point), a head (the
# first bytes of the character after) as the range of code points starting with them.
Tail = tuple[int, int, int]
Head = tuple[int, int]
Shape = tuple[Tail | None, str, Head | None]


class CutTable:
    """The cut rules for one vocabulary (the bytes of every merged token)."""

    def __init__(self, tokens: Iterable[bytes]) -> None:
        unsafe: set[str] = set()
        shapes: set[tuple[bytes, str, bytes]] = set()  # partial tokens: (tail, whole, head)
        for data in tokens:
            _add_token(data, unsafe, shapes)
        self.unsafe_pairs = frozenset(unsafe)
        # pair code -> 0: the boundary between the two characters is not cut (`pieces`).
        self._no_cut = dict.fromkeys((_pair_code(ord(p[0]), ord(p[1])) for p in unsafe), 0)
        # A partial token of one whole character and one cut-off edge, or of a tail and a head
        # only, sits across a boundary as a test on the two characters beside it: those run on
        # every pair of the text in C (`_PairTests`). The others (two or more whole characters,
        # or one with both edges) are searched for by their first character, found by one `re`
        # class in C.
        self._by_first: dict[str, list[Shape]] = {}
        pair_shapes: list[tuple[bytes, str, bytes]] = []
        for tail, whole, head in sorted(shapes):
            if len(tail) > 3 or (head and _code_range(head) is None):
                continue  # no character ends with the tail or starts with the head: never occurs
            if len(whole) + bool(tail) + bool(head) == 2:
                pair_shapes.append((tail, whole, head))
            else:
                self._by_first.setdefault(whole[0], []).append(
                    (_tail_test(tail), whole, _code_range(head) if head else None)
                )
        self._pairs = _PairTests(pair_shapes) if pair_shapes else None
        self._sides = _PartialSides(shapes)
        firsts = "".join(map(re.escape, sorted(self._by_first)))
        self._first_class = re.compile(f"[{firsts}]") if firsts else None

    def pieces(self, text: str, chunk_ends: Iterable[int] = ()) -> tuple[list[str], set[str]]:
        """Text cut at every character boundary no token can sit across, and the pieces that
        hold a partial token: those must be encoded byte by byte (see `bpe.encoder`'s
        `CharacterEncoder`), the others can be encoded character by character. `chunk_ends`:
        character offsets the text is cut at as well (chunked mode: no merge crosses a chunk's
        end).

        >>> CutTable([b"ab", b"c"]).pieces("abcab")
        (['ab', 'c', 'ab'], set())
        >>> CutTable(["基".encode() + "础".encode()[:2]]).pieces("基础基")  # 基, part of 础
        (['基础', '基'], {'基础'})
        """
        n = len(text)
        forbidden = sorted(set(self._inside_partial_tokens(text)))
        if n < 2:
            return [text], set()
        chars, cut = self._pair_cuts(text)
        # Chunk ends are cut even inside a partial token: no merge crosses them.
        for boundaries, value in ((forbidden, 0), (chunk_ends, 1)):
            _set_flags(cut, boundaries, value)
        cut[-1] = 0
        pieces = _split_after(text, chars, cut)
        # The piece holding boundary b comes after the cuts before b, counted in C.
        partial: set[str] = set()
        index = counted = 0
        for boundary in forbidden:
            if not cut[boundary - 1]:
                index += cut.count(1, counted, boundary - 1)
                counted = boundary - 1
                partial.add(pieces[index])
        return pieces, partial

    def search_work(self, text: str) -> int:
        """How many `str.find` steps `pieces` takes on this text to find the partial tokens the
        pair tests leave: each occurrence of a character times those tokens that start with it.
        With a vocabulary of their own, the UDHR's script groups take 0-0.5 per character, and
        Japanese, Hangul, Georgian or Armenian 3-7 (benchmarks/encode_scripts.py)."""
        if self._first_class is None:
            return 0
        counts = collections.Counter(self._first_class.findall(text))
        by_first = self._by_first
        return sum(len(by_first[char]) * count for char, count in counts.items())

    def rough_pieces(self, text: str, ends: Iterable[int] = ()) -> tuple[list[str], bytes]:
        """Text cut at `ends` (character offsets) and at every character boundary no token of
        whole characters sits across, and for each cut between two pieces whether it is exact.

        Partial tokens are not searched for (`pieces` pays a Python loop per occurrence of
        their characters, most of Japanese or Devanagari text). A cut is flagged exact (1)
        when no token of whole characters holds the two characters and no partial token can
        sit across it either: the character before can be the left side of one of their inner
        boundaries (a whole character or a tail) and the one after the right side (a whole
        character or a head), tested per character (`_PartialSides`), in C per text. The other
        cuts (0), the ends among them, are for `bpe.stitch`, which checks and repairs them.

        >>> CutTable([b"ab", b"c"]).rough_pieces("abcab", [1])  # 1: inside "ab"
        (['a', 'b', 'c', 'ab'], b'\\x00\\x01\\x01')
        """
        n = len(text)
        if n < 2:
            return ([text] if text else []), b""
        chars, cut = self._pair_cuts(text)
        cut[-1] = 0
        suspect = _and(text.translate(self._sides.left), text.translate(self._sides.right)[1:])
        exact = _and(cut, suspect.translate(_NOT))
        _set_flags(cut, ends, 1)
        cut[-1] = 0
        return _split_after(text, chars, cut), bytes(itertools.compress(exact, cut))

    def _pair_cuts(self, text: str) -> tuple[memoryview, bytearray]:
        """The text's code points, and cut[i] = 1 where no token of whole characters holds
        characters i and i + 1 (a last 0 added for the end)."""
        # The pairs of neighbouring characters as native 8-byte integers, read from the text in
        # UTF-32 (a string per pair would cost far more: Chinese characters are no cached
        # objects), and looked up in C: cut[i] says whether the text is cut after character i.
        chars = memoryview(text.encode(_UTF32)).cast("I")
        cut = bytearray(map(self._no_cut.get, _pair_codes(chars), itertools.repeat(1)))
        cut.append(0)
        return chars, cut

    def _inside_partial_tokens(self, text: str) -> list[int]:
        """Character boundaries inside an occurrence of a partial token: those the pair tests
        find (`_PairTests`), and for the other tokens the occurrences of their whole characters
        (found by str.find, in C) where the character before fits the tail and the one after
        the head."""
        forbidden = self._pairs.inside(text) if self._pairs is not None else []
        n = len(text)
        present = set(self._first_class.findall(text)) if self._first_class else set()
        for char in present:
            for tail, whole, head in self._by_first[char]:
                at = text.find(whole)
                while at >= 0:
                    end = at + len(whole)
                    if (tail is None or (at and _fits(ord(text[at - 1]), tail))) and (
                        head is None or (end < n and head[0] <= ord(text[end]) <= head[1])
                    ):
                        forbidden.extend(range(at if tail else at + 1, end + 1 if head else end))
                    at = text.find(whole, at + 1)
        return forbidden


class _PairTests:
    """The partial tokens whose occurrence is a test on two neighbouring characters x and y:
    a whole x and a head (y starts with it), a tail (x ends with it) and a whole y, or a tail
    and a head. Each character gets an id for what it can be as x (the tails it ends with, and
    itself if a token holds it and a head) and as y (the heads it starts with, and itself if a
    token holds a tail and it). Whether the boundary between x and y lies inside such a token
    depends on their two ids alone, so each pair of ids is decided once; a text is read as ids
    by one `str.translate` and its pairs are looked up in C, as `CutTable._pair_cuts` reads
    characters. Ids are code points (surrogates skipped), each character judged on first
    sight."""

    def __init__(self, shapes: list[tuple[bytes, str, bytes]]) -> None:
        self.heads_after: dict[str, set[bytes]] = {}  # x -> the heads a token holds after it
        self.tails_before: dict[str, set[bytes]] = {}  # y -> the tails a token holds before it
        self.tail_heads: set[tuple[bytes, bytes]] = set()
        for tail, whole, head in shapes:
            if not whole:
                self.tail_heads.add((tail, head))
            elif head:
                self.heads_after.setdefault(whole, set()).add(head)
            else:
                self.tails_before.setdefault(whole, set()).add(tail)
        tails = {tail for tail, _ in self.tail_heads}.union(*self.tails_before.values())
        heads = {head for _, head in self.tail_heads}.union(*self.heads_after.values())
        self.ids = _IdTable(
            lambda char, data: (
                _edges(data, tails, tail=True),
                char if char in self.heads_after else "",
                _edges(data, heads, tail=False),
                char if char in self.tails_before else "",
            )
        )
        self.verdicts = _Verdicts(self)

    def inside(self, text: str) -> list[int]:
        """The boundaries of text (1 .. len - 1) inside an occurrence of one of the tokens."""
        n = len(text)
        if n < 2:
            return []
        ids = memoryview(text.translate(self.ids).encode(_UTF32)).cast("I")
        verdicts = map(self.verdicts.__getitem__, _pair_codes(ids))
        return list(itertools.compress(range(1, n), verdicts))

    def decide(self, left_id: int, right_id: int) -> int:
        """1 if a boundary with a character of left_id before it and one of right_id after it
        lies inside one of the tokens, else 0."""
        tails, x, _, _ = self.ids.known[left_id]
        _, _, heads, y = self.ids.known[right_id]
        inside = (
            (x and not heads.isdisjoint(self.heads_after[x]))
            or (y and not tails.isdisjoint(self.tails_before[y]))
            or any((tail, head) in self.tail_heads for tail in tails for head in heads)
        )
        return int(bool(inside))


def _edges(data: bytes, edges: set[bytes], *, tail: bool) -> frozenset[bytes]:
    """The tails (the character's last bytes) or heads (its first bytes) among `edges` that a
    character of these UTF-8 bytes has; never all of its bytes."""
    parts = (data[-k:] if tail else data[:k] for k in range(1, len(data)))
    return frozenset(part for part in parts if part in edges)


# A character as the left of a pair (the tails it ends with; itself, or "") and as the right
# (the heads it starts with; itself, or "").
_IdKey = tuple[frozenset[bytes], str, frozenset[bytes], str]


class _IdTable(dict[int, str]):
    """`str.translate` table: code point -> its id (as a character); ids interned from keys,
    0 for the key that takes part in no token."""

    def __init__(self, key: Callable[[str, bytes], _IdKey]) -> None:
        super().__init__()
        self.key = key
        self.known: list[_IdKey] = [(frozenset(), "", frozenset(), "")]
        self.ids: dict[_IdKey, int] = {self.known[0]: 0}
        # A tokeniser serves several threads: two new keys given ids at once must not get one
        # id, or an id whose place in `known` holds the other's key.
        self.lock = threading.Lock()

    def __missing__(self, code: int) -> str:
        char = chr(code)
        key = self.key(char, char.encode("utf-8", "surrogatepass"))
        with self.lock:
            number = self.ids.get(key)
            if number is None:
                self.known.append(key)
                number = self.ids[key] = len(self.known) - 1
        # Surrogates cannot be encoded as UTF-32: ids skip them.
        flag = self[code] = chr(number if number < 0xD800 else number + 0x800)
        return flag


class _Verdicts(dict[int, int]):
    """Pair code of a left id and a right id (as `_pair_code` packs them) -> 0 or 1."""

    def __init__(self, tests: _PairTests) -> None:
        super().__init__()
        self.tests = tests

    def __missing__(self, code: int) -> int:
        first, second = (
            (code & 0xFFFFFFFF, code >> 32) if _LITTLE else (code >> 32, code & 0xFFFFFFFF)
        )
        verdict = self[code] = self.tests.decide(_id_of(first), _id_of(second))
        return verdict


def _id_of(code: int) -> int:
    return code if code < 0xD800 else code - 0x800


_NOT = bytes([1, 0]) + bytes(254)  # bytes.translate: flag 0 <-> 1


def _and(first: str | bytes | bytearray, second: str | bytes) -> bytes:
    """Byte-wise AND of two runs of 0/1 flags (strings of chr(0) and chr(1), or bytes), as
    long as the shorter: one big-integer AND, in C."""
    n = min(len(first), len(second))
    a = first[:n].encode("latin-1") if isinstance(first, str) else bytes(first[:n])
    b = second[:n].encode("latin-1") if isinstance(second, str) else bytes(second[:n])
    return (int.from_bytes(a, "little") & int.from_bytes(b, "little")).to_bytes(n, "little")


class _SideTable(dict[int, str]):
    """`str.translate` table: code point -> chr(1) if the character can stand on this side of
    a partial token's inner boundary, else chr(0); each character judged on first sight."""

    def __init__(self, chars: set[str], tails: set[tuple[int, int]], heads: set[bytes]) -> None:
        super().__init__()
        self.chars = chars
        self.tails = tails  # (k, low 6k bits) of the last k bytes of a character, k >= 1
        self.heads = heads  # the first bytes of a character

    def __missing__(self, code: int) -> str:
        char = chr(code)
        data = char.encode("utf-8", "surrogatepass")
        side = char in self.chars
        side = side or any((k, code & (1 << 6 * k) - 1) in self.tails for k in range(1, len(data)))
        side = side or any(data[:k] in self.heads for k in range(1, len(data)))
        flag = self[code] = chr(side)
        return flag


class _PartialSides:
    """For the partial tokens (tail, whole characters, head), which characters can stand left
    and right of one of their inner character boundaries."""

    def __init__(self, shapes: set[tuple[bytes, str, bytes]]) -> None:
        left: set[str] = set()
        right: set[str] = set()
        tails: set[tuple[int, int]] = set()
        heads: set[bytes] = set()
        for tail, whole, head in shapes:
            left.update(whole[:-1] if not head else whole)
            right.update(whole[1:] if not tail else whole)
            if tail:
                tails.add((len(tail), _tail_bits(tail)))
            if head:
                heads.add(head)
        self.left = _SideTable(left, tails, set())
        self.right = _SideTable(right, set(), heads)


def _tail_bits(tail: bytes) -> int:
    value = 0
    for byte in tail:
        value = value << 6 | byte & 0x3F
    return value


def _set_flags(cut: bytearray, boundaries: Iterable[int], value: int) -> None:
    """cut[b - 1] = value for each character boundary b, in C."""
    at = map(operator.sub, boundaries, itertools.repeat(1))
    collections.deque(map(cut.__setitem__, at, itertools.repeat(value)), maxlen=0)


def _fits(code: int, tail: Tail) -> bool:
    """Whether the character with this code point ends with the tail's bytes."""
    mask, value, smallest = tail
    return code & mask == value and code >= smallest


def _tail_test(tail: bytes) -> Tail | None:
    """A tail of k continuation bytes as a test on code points: their low 6k bits, and at
    least k + 1 bytes of UTF-8."""
    if not tail:
        return None
    value = 0
    for byte in tail:
        value = value << 6 | byte & 0x3F
    return (1 << 6 * len(tail)) - 1, value, (0x80, 0x800, 0x10000)[len(tail) - 1]


def _split_after(text: str, chars: memoryview, cut: bytearray) -> list[str]:
    """The pieces of text cut after each character i where cut[i] is 1 (cut[-1] is 0).

    A copy of the text in UTF-32 gets a mark after every character, one noncharacter for "no
    cut" and the next for "cut": all in C, removing the first and splitting at the second make
    the pieces ~3x faster than a slice per piece (389k pieces in 2 MB of Chinese)."""
    n = len(text)
    mark = next((c for c in _MARKS if chr(c) not in text and chr(c + 1) not in text), None)
    if mark is None:  # the text holds all of them: slice it
        ends = list(itertools.compress(range(1, n + 1), cut))
        return list(map(text.__getitem__, map(slice, [0, *ends], [*ends, n])))
    marked = bytearray(8 * n)
    memoryview(marked).cast("I")[0::2] = chars
    flag_to_low_byte = bytearray(range(256))
    flag_to_low_byte[0:2] = bytes([mark & 0xFF, (mark & 0xFF) + 1])  # mark's low byte is even
    for byte in range(3):  # code points fit in three bytes: the fourth stays 0
        offset = 4 + (byte if _LITTLE else 3 - byte)
        value = mark >> 8 * byte & 0xFF
        marked[offset::8] = cut.translate(flag_to_low_byte) if byte == 0 else bytes([value]) * n
    return marked.decode(_UTF32).replace(chr(mark), "").split(chr(mark + 1))


def _add_token(data: bytes, unsafe: set[str], shapes: set[tuple[bytes, str, bytes]]) -> None:
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
    # where this token can occur, so it is searched for in each text (`_inside_partial_tokens`).
    tail = b"" if chars[0] is not None else data[: spans[0][1]]
    head = b"" if chars[-1] is not None else data[spans[-1][0] :]
    shapes.add((tail, "".join(char for char in chars if char is not None), head))


def _code_range(head: bytes) -> tuple[int, int] | None:
    """The first and last code points whose UTF-8 starts with `head` (a character's first
    bytes, which UTF-8's order keeps together), or None if no character does. Only the byte
    after a lone lead byte is constrained (E0, ED, F0, F4), so the rest is filled 80... or BF..."""
    missing = _char_length(head[0]) - len(head)
    after = [bytes([byte]) for byte in range(0x80, 0xC0)]
    low = _decodable(head + byte + b"\x80" * (missing - 1) for byte in after)
    high = _decodable(head + byte + b"\xbf" * (missing - 1) for byte in after)
    return (ord(low[0]), ord(high[-1])) if low else None


def _decodable(candidates: Iterable[bytes]) -> list[str]:
    chars: list[str] = []
    for candidate in candidates:
        try:
            chars.append(candidate.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return chars
