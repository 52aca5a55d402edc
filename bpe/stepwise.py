"""Watching an encoding happen: encode with only the first k merges, find which chunk and tokens
each part of a text became, and replay one chunk's encoding step by step.

Everything follows our merge rule (`bpe.reference.encode_reference`), as `Tokenizer.encode` does:
repeatedly apply the learned pair of lowest rank present, everywhere, left to right. Ranks only grow
along the way (a merge always makes an id later than its parts), so encoding with the first k merges
is the full encoding stopped before its first step of rank k or later, and it equals what a
tokeniser trained to a vocabulary of base + k would give: greedy training learns the same first k
merges.

The functions take a `bpe.Tokenizer` and use only its public parts (`merges`, `ranks`, `vocab`,
`alphabet`, `pattern`, `special_tokens`), so they hold for any id layout: the byte ids are read
from the vocabulary, never assumed to be 0..255.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import regex

from bpe.encoder import encode_ids
from bpe.patterns import split_deadline

if TYPE_CHECKING:
    from bpe.model import Tokenizer

Ranks = dict[tuple[int, int], int]  # (left_id, right_id) -> new id, which is also the rank
# The last first-k table asked for, per tokeniser: one table each, freed with the tokeniser.
_last_table: weakref.WeakKeyDictionary[Tokenizer, tuple[int, Ranks]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Chunk:
    """One unit that is encoded on its own: a split-pattern chunk (chunked mode), a word (words
    mode: whitespace is not part of it), the text between special tokens (naive mode), or one
    allowed special token. `start`/`end` are character offsets into the text."""

    start: int
    end: int
    ids: list[int]
    special: bool = False


# ----- the first k merges ---------------------------------------------------------------------
def first_merges(tok: Tokenizer, merge_limit: int | None) -> Ranks:
    """The ranks table of the first `merge_limit` merges (None: all of them).

    >>> from bpe.model import Tokenizer
    >>> tok = Tokenizer(mode="naive", merges=[(97, 97, 256), (256, 97, 257), (257, 98, 258)])
    >>> first_merges(tok, 1)
    {(97, 97): 256}
    """
    count = len(tok.merges)
    if merge_limit is None or merge_limit >= count:
        return tok.ranks
    if merge_limit < 0:
        raise ValueError(f"merge_limit must be 0 or more (this tokeniser has {count} merges)")
    last = _last_table.get(tok)
    if last is not None and last[0] == merge_limit:
        return last[1]  # the scrubber asks for the same k while the text is typed
    # `ranks` is built from the merges in learned order, so its first k items are merges 0..k-1.
    table = dict(itertools.islice(tok.ranks.items(), merge_limit))
    _last_table[tok] = (merge_limit, table)
    return table


def encode_chunks(
    tok: Tokenizer,
    text: str,
    *,
    allowed_special: Literal["all"] | Iterable[str] = (),
    merge_limit: int | None = None,
) -> list[Chunk]:
    """The text's chunks in order, each with its ids, using only the first `merge_limit` merges.

    Joining the chunks' ids gives `tok.encode(text, allowed_special=...)` when `merge_limit` is
    None (or N), and the encoding of a tokeniser trained to base + k ids when it is k.

    >>> from bpe.model import Tokenizer
    >>> tok = Tokenizer(mode="naive", merges=[(97, 97, 256), (256, 97, 257), (257, 98, 258)])
    >>> [c.ids for c in encode_chunks(tok, "abaaab", merge_limit=2)]
    [[97, 98, 257, 98]]
    """
    with split_deadline(len(text)):  # one split time limit for all of the text's segments
        return _encode_chunks(tok, text, allowed_special, merge_limit)


def _encode_chunks(
    tok: Tokenizer,
    text: str,
    allowed_special: Literal["all"] | Iterable[str],
    merge_limit: int | None,
) -> list[Chunk]:
    if tok.rule_object.imported:
        return _imported_chunks(tok, text, allowed_special, merge_limit)
    if merge_limit is not None and merge_limit < 0:
        first_merges(tok, merge_limit)  # refuses it, saying why
    limited = merge_limit is not None and merge_limit < len(tok.merges)
    cut_back = _unmerger(tok, merge_limit) if merge_limit is not None and limited else None
    out: list[Chunk] = []
    seen: dict[str, list[int]] = {}  # chunks repeat (" the"): encode each distinct one once
    for start, end, special_id in _special_pieces(tok, text, allowed_special):
        if special_id is not None:
            out.append(Chunk(start, end, [special_id], special=True))
            continue
        spans = _chunk_spans(tok, text, start, end)
        if tok.mode_object.byte_level:
            # The tokeniser's own full encoding (cached per chunk, or the fast path), cut back to
            # the first k merges: the same ids as encoding with them, and far cheaper.
            for chunk_start, chunk_end in spans:
                ids = list(tok.encode_piece(text[chunk_start:chunk_end]))
                out.append(Chunk(chunk_start, chunk_end, cut_back(ids) if cut_back else ids))
            continue
        for chunk_start, chunk_end in spans:
            piece = text[chunk_start:chunk_end]
            found = seen.get(piece)
            if found is None:
                ranks = first_merges(tok, merge_limit)
                found = seen[piece] = encode_ids(base_symbols(tok, piece), ranks)
            out.append(Chunk(chunk_start, chunk_end, found))
    return out


# The last cut-back asked for, per tokeniser: typing with the scrubber still reuses its parts.
_last_unmerger: weakref.WeakKeyDictionary[
    Tokenizer, tuple[int, Callable[[list[int]], list[int]]]
] = weakref.WeakKeyDictionary()


def _unmerger(tok: Tokenizer, merge_limit: int) -> Callable[[list[int]], list[int]]:
    """ids -> the same text encoded with only the first `merge_limit` merges, from its full
    encoding: every token made by merge k or later is split back into its two parts, until
    each part is a base symbol or was made by an earlier merge.

    Exact for our merge rule: its steps come in rising rank (a merge's parts are older ids, so
    a pair it makes ranks later), so the state after the steps of rank < k is the encoding with
    k merges, and the later steps only join its tokens, each by its own merge.
    """
    last = _last_unmerger.get(tok)
    if last is not None and last[0] == merge_limit:
        return last[1]
    merges = tok.merges
    rank_of = tok.merge_rank
    parts_of: dict[int, list[int]] = {}  # token -> its tokens under the first k merges

    def parts(token_id: int) -> list[int]:
        found = parts_of.get(token_id)
        if found is None:
            found = []
            stack = [token_id]  # a stack, not recursion: naive merge trees run deep
            while stack:
                part = stack.pop()
                rank = rank_of(part)
                if rank is None or rank < merge_limit:
                    found.append(part)
                else:
                    left, right, _ = merges[rank]
                    stack.append(right)
                    stack.append(left)
            parts_of[token_id] = found
        return found

    # Our own tokenisers number merge r's token base + r, specials after the last merge, so
    # the ids to split back are one range.
    own = tok.tokens is None
    low, high = tok.base_size + merge_limit, tok.base_size + len(merges)

    def cut_back(ids: list[int]) -> list[int]:
        out: list[int] = []
        for token_id in ids:
            if own and not low <= token_id < high:
                out.append(token_id)
                continue
            rank = rank_of(token_id)
            if rank is None or rank < merge_limit:
                out.append(token_id)
            else:
                out.extend(parts(token_id))
        return out

    _last_unmerger[tok] = (merge_limit, cut_back)
    return cut_back


def _imported_chunks(
    tok: Tokenizer,
    text: str,
    allowed_special: Literal["all"] | Iterable[str],
    merge_limit: int | None,
) -> list[Chunk]:
    """Imported tokenisers encode by their own rule (tiktoken's ranks, HF's merge list), which
    `Tokenizer.encode` knows: each ordinary stretch is one chunk here, with its ids."""
    out: list[Chunk] = []
    for start, end, special_id in _special_pieces(tok, text, allowed_special):
        if special_id is not None:
            out.append(Chunk(start, end, [special_id], special=True))
        else:
            out.append(Chunk(start, end, tok.encode(text[start:end], merge_limit=merge_limit)))
    return out


def encode_with_merges(
    tok: Tokenizer,
    text: str,
    *,
    merge_limit: int | None = None,
    allowed_special: Literal["all"] | Iterable[str] = (),
) -> list[int]:
    """`tok.encode(text)` using only the first `merge_limit` merges: 0 gives the base symbols.

    >>> from bpe.model import Tokenizer
    >>> tok = Tokenizer(mode="naive", merges=[(97, 97, 256), (256, 97, 257), (257, 98, 258)])
    >>> [encode_with_merges(tok, "abaaab", merge_limit=k) for k in (0, 1, 3)]
    [[97, 98, 97, 97, 97, 98], [97, 98, 256, 97, 98], [97, 98, 258]]
    """
    chunks = encode_chunks(tok, text, allowed_special=allowed_special, merge_limit=merge_limit)
    return [token_id for chunk in chunks for token_id in chunk.ids]


def apply_merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of `pair`, left to right (as `bpe.reference.merge_pair`).

    >>> apply_merge([97, 97, 97, 97], (97, 97), 256)
    [256, 256]
    """
    return _merge_positions(ids, pair, new_id)[1]


# ----- the base symbols of a chunk ----------------------------------------------------------------
def base_symbols(tok: Tokenizer, chunk: str) -> list[int]:
    """The ids a chunk starts as, before any merge: its bytes (through the tokeniser's byte ids),
    or in words mode its characters (unknown ones as `<unk>`) and `</w>` (`bpe.modes`)."""
    return tok.mode_object.base_symbols(tok, chunk)


def _special_pieces(
    tok: Tokenizer, text: str, allowed_special: Literal["all"] | Iterable[str]
) -> list[tuple[int, int, int | None]]:
    """(start, end, special id or None) covering the text: allowed specials, longest first."""
    if allowed_special == "all":
        allowed = dict(tok.special_tokens)
    else:
        allowed = {}
        for token in allowed_special:
            if token not in tok.special_tokens:
                raise ValueError(f"{token!r} is not a special token of this tokeniser")
            allowed[token] = tok.special_tokens[token]
    if not allowed:
        return [(0, len(text), None)] if text else []
    alternatives = "|".join(regex.escape(s) for s in sorted(allowed, key=len, reverse=True))
    pieces: list[tuple[int, int, int | None]] = []
    start = 0
    for match in regex.finditer(alternatives, text):
        if match.start() > start:
            pieces.append((start, match.start(), None))
        pieces.append((match.start(), match.end(), allowed[match.group()]))
        start = match.end()
    if start < len(text):
        pieces.append((start, len(text), None))
    return pieces


def _chunk_spans(tok: Tokenizer, text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Where the ordinary text text[start:end] is cut into separately encoded units."""
    return tok.mode_object.spans(text, start, end, tok.pattern)


# ----- one chunk, step by step ---------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One round of the merge rule's loop (`bpe.reference.encode_reference`): the learned pairs
    present (pair -> rank, lowest first), the
    one applied, where (indices into `before`), and the tokens after it."""

    before: list[int]
    present: list[tuple[tuple[int, int], int]]
    applied: tuple[int, int]
    new_id: int
    positions: list[int]
    after: list[int]


def replay(symbols: list[int], ranks: Ranks, *, max_steps: int | None = None) -> list[Step]:
    """Every step of encoding `symbols` with `ranks`, until no learned pair is present (or
    `max_steps` steps). The last step's `after` is `encode_ids(symbols, ranks)`.

    >>> steps = replay([97, 98, 97, 97, 97, 98], {(97, 97): 256, (256, 97): 257, (257, 98): 258})
    >>> [(s.applied, s.new_id, s.after) for s in steps][-1]
    ((257, 98), 258, [97, 98, 258])
    >>> [len(s.present) for s in steps]
    [1, 1, 1]
    """
    steps: list[Step] = []
    ids = list(symbols)
    while len(ids) >= 2 and (max_steps is None or len(steps) < max_steps):
        present: dict[tuple[int, int], int] = {}
        for pair in itertools.pairwise(ids):
            rank = ranks.get(pair)
            if rank is not None:
                present[pair] = rank
        if not present:
            break
        pair, new_id = min(present.items(), key=lambda item: item[1])
        positions, after = _merge_positions(ids, pair, new_id)
        steps.append(
            Step(
                before=ids,
                present=sorted(present.items(), key=lambda item: item[1]),
                applied=pair,
                new_id=new_id,
                positions=positions,
                after=after,
            )
        )
        ids = after
    return steps


def _merge_positions(
    ids: list[int], pair: tuple[int, int], new_id: int
) -> tuple[list[int], list[int]]:
    positions: list[int] = []
    out: list[int] = []
    i, n = 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            positions.append(i)
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return positions, out


# ----- imported tokenisers, step by step ---------------------------------------------------------
def imported_pieces(
    tok: Tokenizer,
    text: str,
    *,
    allowed_special: Literal["all"] | Iterable[str] = (),
    merge_limit: int | None = None,
) -> Iterator[tuple[str, list[int], bool]]:
    """(piece, its ids, is a special token) in order, for an imported tokeniser: the pieces its
    own pre-tokenisation makes, as the model sees them (HF's prefix space included), each with
    its share of `tok.encode(text, merge_limit=...)` (no token crosses a piece)."""
    for start, end, special_id in _special_pieces(tok, text, allowed_special):
        if special_id is not None:
            yield text[start:end], [special_id], True
            continue
        stretch = text[start:end]
        ids = tok.encode(stretch, merge_limit=merge_limit)
        at = 0
        for piece in tok.pieces(stretch):
            size = len(piece.encode("utf-8", errors="surrogatepass"))
            first = at
            while size > 0 and at < len(ids):
                size -= len(tok.token_bytes(ids[at]))
                at += 1
            yield piece, ids[first:at], False


def whole_piece_token(tok: Tokenizer, piece: bytes, merge_limit: int | None = None) -> int | None:
    """The token an imported tokeniser takes a whole piece as, before any join (None if not):
    tiktoken always looks the piece up first (with the first k merges, only tokens ranked below
    merge k's token count), HF only with `ignore_merges` and all merges, as `Tokenizer.encode`."""
    limited = merge_limit is not None and merge_limit < len(tok.merges)
    token = tok.mergeable_ranks.get(piece)
    if token is None:
        return None
    return tok.rule_object.whole_piece_token(tok, token, merge_limit if limited else None)


def replay_joins(
    tok: Tokenizer,
    symbols: list[int],
    *,
    merge_limit: int | None = None,
    max_steps: int | None = None,
) -> list[Step]:
    """An imported tokeniser's loop on one piece, step by step, by its own rule: each step joins
    the lowest-ranked adjacent pair present, at its leftmost place only (one join a step, as
    both tiktoken and `tokenizers` do). tiktoken ranks a pair by the rank of its joined bytes
    (with the first k merges, only below merge k's token); HF by the pair's place in the file's
    merge list (its first k). `present` lists each pair with the id it makes, lowest first.
    The whole-piece lookup (`whole_piece_token`) comes before this, not in it."""
    count = len(tok.merges)
    limit = count if merge_limit is None else max(0, min(merge_limit, count))
    join = tok.rule_object.join_lookup(tok, limit)
    steps: list[Step] = []
    ids = list(symbols)
    while len(ids) >= 2 and (max_steps is None or len(steps) < max_steps):
        present: dict[tuple[int, int], tuple[int, int]] = {}
        best: tuple[int, int, tuple[int, int], int] | None = None  # (rank, place, pair, new)
        for place, pair in enumerate(itertools.pairwise(ids)):
            found = present.get(pair) or join(pair)
            if found is None:
                continue
            present[pair] = found
            if best is None or found[0] < best[0]:
                best = (found[0], place, pair, found[1])
        if best is None:
            break
        _, place, pair, new_id = best
        after = [*ids[:place], new_id, *ids[place + 2 :]]
        steps.append(
            Step(
                before=ids,
                present=[(p, new) for p, (_, new) in sorted(present.items(), key=_by_rank)],
                applied=pair,
                new_id=new_id,
                positions=[place],
                after=after,
            )
        )
        ids = after
    return steps


def _by_rank(item: tuple[tuple[int, int], tuple[int, int]]) -> int:
    return item[1][0]
