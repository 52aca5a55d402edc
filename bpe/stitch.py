"""Naive byte-level encoding by pieces that are encoded alone, cached, and stitched together.

Naive text is one long sequence, and tokens cross words ("of the"), so no fixed cut is safe. But our
merge rule (`bpe.reference.encode_reference`) has a property that makes guessing safe (it is the
"compatible tokens" argument of recent BPE work, proved here for this rule). Call a token sequence
*valid* if it is the encoding of its own bytes. Then:

1. A sequence is valid if and only if every pair of neighbours is (and, alone, each token).
   Only if: no merge crosses a token boundary of an encoding, so each stretch of it evolved
   as it would alone. If: merges are applied in increasing id order (a merge's parts have
   smaller ids, so the ids applied never go down). Take `x y` valid and `X`, `Y` their
   bytes, and a valid sequence ending in `x` whose bytes are `A X`. While no merge has
   crossed the boundary `A|X` or `X|Y`, every stretch of `A X Y` is where it would be alone;
   the first merge to cross `A|X` would then cross it in `A X` alone too (the same tokens
   meet there at the same id, with the same tokens to their left), which never happens, and
   likewise `X|Y` in `X Y`. So nothing crosses, and the encodings join.
2. So if `enc(P)` and `enc(Q)` are valid and their junction pair `(p_last, q_first)` is, then
   `enc(P + Q) == enc(P) + enc(Q)`. Where the pair is not valid, the two boundary tokens are
   replaced by the encoding of their joined bytes and the new junctions are checked the same
   way, leftwards while they fail; each step is again a join of valid sequences.

`compatible(a, b)` decides a pair without encoding it: while `a`'s bytes and `b`'s evolve
alone, the token ending `a`'s runs down `a`'s right spine and the one starting `b`'s down
`b`'s left spine; a merge crosses if a learned pair of the two comes up while both are in
place (`crosses_before`). Text is cut into words with their trailing spaces, punctuation runs
likewise, which repeat: 2 MB of English is ~400k pieces of which ~45k distinct, and ~30% of
junctions need a repair (tokens such as "e " or " of the" cross them).
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import re

from bpe.encoder import encode_all, encode_ids, encode_pieces

_INFINITE = 1 << 62
# Words with the spaces after them, runs of other non-spaces likewise, and leading spaces: every
# character is in exactly one class, so the pieces cover the text. Any cut is exact (stitching
# repairs the junctions), so the standard `re` module's classes do, and it splits faster.
_PIECE = re.compile(r"\w+\s*|[^\w\s]+\s*|\s+")
# Memos are cleared when they grow past this many entries, so memory stays bounded.
_MEMO_LIMIT = 500_000
_NOT = bytes([1, 0]) + bytes(254)  # bytes.translate: flag 0 <-> 1


def crosses_before(
    left: int,
    right: int,
    limit: int,
    ranks: dict[tuple[int, int], int],
    parts: dict[int, tuple[int, int]],
) -> bool:
    """True if a merge with id below `limit` joins the bytes of `left` and `right` placed side by
    side, both tokens being the encodings of their own bytes.

    While both evolve alone, the token ending `left`'s bytes runs down its right spine (each
    token there is made at its id) and the token starting `right`'s runs down its left spine.
    Walk the configurations (last of left, first of right) from the latest back: each is in
    place from the later of the two ids until one of them is merged into its parent (`until_l`,
    `until_r`); a learned pair `c` of the two crosses if it comes before both (at `until_r` the
    crossing pair is further left, so it is merged first).
    """
    until_l = until_r = limit
    a, b = left, right
    while True:
        crossing = ranks.get((a, b))
        if crossing is not None and crossing < until_l and crossing <= until_r:
            return True
        if a > b:
            if a not in parts:
                return False
            until_l = a
            a = parts[a][1]
        else:
            if b not in parts:
                return False
            until_r = b
            b = parts[b][0]


def whole_tokens(ranks: dict[tuple[int, int], int], vocab: dict[int, bytes]) -> dict[str, int]:
    """Text -> id of every merged token that is its own text's encoding (and whose bytes are
    text): a piece found here is encoded by one lookup.

    Token `t = (l, r)` encodes as itself exactly when `l` and `r` do and no merge below `t`
    crosses between them: then both sides become `l` and `r` as they would alone, side by side
    until merge `t` joins them; and if any of that fails, merge `t`, the last one to apply (its
    id is the largest), does not find `l` next to `r` over these bytes. Merges come in id order,
    so one pass decides every token from its parts.
    """
    parts = {new: pair for pair, new in ranks.items()}
    itself: set[int] = set(range(256))
    found: dict[str, int] = {}
    for (left, right), new in sorted(ranks.items(), key=operator.itemgetter(1)):
        if left not in itself or right not in itself:
            continue
        if not crosses_before(left, right, new, ranks, parts):
            itself.add(new)
            with contextlib.suppress(UnicodeDecodeError):  # part of a character: never a piece
                found[vocab[new].decode("utf-8")] = new
    return found


def word_ends(text: str) -> list[int]:
    """The character offsets where the words of `Stitcher.encode` end."""
    return list(itertools.accumulate(map(len, _PIECE.findall(text))))


class Stitcher:
    """Encodes naive byte-level text by cached pieces joined at checked junctions."""

    def __init__(
        self,
        ranks: dict[tuple[int, int], int],
        vocab: dict[int, bytes],
        piece_cache: dict[str, list[int]],
        whole: dict[str, int] | None = None,
    ) -> None:
        self.ranks = ranks
        self.whole = whole or {}  # piece text -> the one token it encodes as (`whole_tokens`)
        self.vocab = vocab
        self.parts = {new: pair for pair, new in ranks.items()}
        self.pieces = piece_cache  # piece text -> its encoding alone (shared, bounded by owner)
        # A pair (a, b) is keyed as the int a << shift | b: ints are not tracked by the garbage
        # collector, and the ~400k junction tuples of 2 MB made it run ~900 times per encode.
        self.shift = (max(self.parts, default=255) + 1).bit_length()
        self.valid: dict[int, bool] = {}  # pair's key -> the pair encodes as itself
        self.joined: dict[tuple[int, int], list[int]] = {}  # invalid pair -> enc(its bytes)
        # (token, piece) -> enc(the token's bytes + the piece's): a failing junction's repair.
        # 2 MB of English has ~130k failing junctions but only ~10k distinct such repairs.
        self.repaired: dict[tuple[int, str], list[int]] = {}
        self.repair_budget = 4  # bytes re-encoded per byte of text, at most

    def clear(self) -> None:
        self.valid.clear()
        self.joined.clear()
        self.repaired.clear()

    def compatible(self, a: int, b: int) -> bool:
        """`[a, b]` is the encoding of `a`'s bytes then `b`'s (both valid alone)."""
        key = a << self.shift | b
        ok = self.valid.get(key)
        if ok is None:
            if len(self.valid) >= _MEMO_LIMIT:
                self.valid.clear()
            ok = self.valid[key] = not crosses_before(a, b, _INFINITE, self.ranks, self.parts)
        return ok

    def encode(self, text: str) -> list[int]:
        """The ids of naive text, cut into words (with the spaces after them) and stitched."""
        return self.stitch(text, _PIECE.findall(text))

    def stitch(self, text: str, pieces: list[str], exact: bytes | None = None) -> list[int]:
        """The ids of naive text from any pieces covering it in order (any cut is exact once
        its junction is checked, the module docstring says why). `exact[j]` = 1: the cut after
        piece j is known to be crossed by no merge (`bpe.cuts.CutTable.rough_pieces`), so its
        junction is not checked."""
        if not pieces:
            return []
        encodings = self._encode_pieces(pieces)
        # Junction j lies between pieces j - 1 and j; most are valid and need no Python loop.
        shift = self.shift
        lasts = map(operator.itemgetter(-1), encodings)
        firsts = map(operator.itemgetter(0), itertools.islice(encodings, 1, None))
        # One fewer junction than pieces, each keyed a << shift | b.
        junctions = list(
            map(operator.or_, map(operator.lshift, lasts, itertools.repeat(shift)), firsts)
        )
        valid = self.valid
        # 1 where the junction needs a look: not known exact.
        check = bytes(exact).translate(_NOT) if exact is not None else None
        to_check = itertools.compress(junctions, check) if check is not None else junctions
        candidates = set(to_check)
        unknown = candidates.difference(valid)
        if len(valid) + len(unknown) > _MEMO_LIMIT:
            valid.clear()
            unknown = candidates
        ranks, parts = self.ranks, self.parts
        mask = (1 << shift) - 1
        for key in unknown:
            valid[key] = not crosses_before(key >> shift, key & mask, _INFINITE, ranks, parts)
        # .get: a pair forgotten since (another thread started `valid` over) counts as failing,
        # and the loop below checks it again.
        fails = map(operator.not_, map(valid.get, junctions))
        if check is not None:
            fails = map(operator.and_, check, fails)
        failing = itertools.compress(itertools.count(1), list(fails))
        compatible = self.compatible
        out = list(encodings[0])
        done = 1  # pieces[:done] are in out
        # Bytes re-encoded in repairs before giving up on stitching (which is then quadratic).
        budget = self.repair_budget * len(text) + 64
        chain = itertools.chain.from_iterable
        valid_get = valid.get
        joined, vocab = self.joined, self.vocab
        repaired = self.repaired
        repaired_get = repaired.get
        last = len(pieces)
        for j in failing:
            if j < done:
                continue
            out += chain(encodings[done:j])
            # Join piece j, and the next ones while a repair changed the last token (their
            # junctions were judged against the old one). Written out, not in a helper: this
            # runs at ~30% of the junctions of English, and calls cost more than the body.
            while True:
                ids = seq = encodings[j]
                key = None  # set when the first repair, (out[-1], piece j), is to be memoised
                while out:
                    a, b = out[-1], seq[0]
                    ok = valid_get(a << shift | b)
                    if ok is None:
                        ok = compatible(a, b)
                    if ok:
                        break
                    out.pop()
                    if seq is ids:
                        key = (a, pieces[j])
                        found = repaired_get(key)
                        if found is not None:
                            seq, key = found, None
                            continue
                    both = joined.get((a, b))
                    if both is None:
                        if len(joined) >= _MEMO_LIMIT:
                            joined.clear()
                        both = joined[a, b] = encode_ids([*vocab[a], *vocab[b]], ranks)
                    if len(seq) == 1:
                        seq = both
                    else:
                        c, d = both[-1], seq[1]
                        ok = valid_get(c << shift | d)
                        if ok is None:
                            ok = compatible(c, d)
                        if ok:
                            seq = both + seq[1:]
                        else:
                            data = vocab[a] + b"".join(map(vocab.__getitem__, seq))
                            budget -= len(data)
                            if budget < 0:  # repairs cascade: this text is not worth stitching
                                return encode_ids(list(text.encode("utf-8")), ranks)
                            seq = encode_ids(list(data), ranks)
                    if key is not None:
                        if len(repaired) >= _MEMO_LIMIT:
                            repaired.clear()
                        repaired[key] = seq
                        key = None
                out += seq
                j += 1
                if j == last or seq[-1] == ids[-1]:
                    break
            done = j
        out += chain(encodings[done:])
        return out

    def _encode_pieces(self, pieces: list[str]) -> list[list[int]]:
        ranks, whole = self.ranks, self.whole

        def encode(piece: str) -> list[int]:
            token = whole.get(piece)
            if token is not None:
                return [token]
            return encode_ids(list(piece.encode("utf-8")), ranks)

        def encode_many(new: set[str]) -> dict[str, list[int]]:
            return encode_pieces(new, ranks, whole, encode)

        return encode_all(self.pieces, pieces, encode, _MEMO_LIMIT, encode_many)
