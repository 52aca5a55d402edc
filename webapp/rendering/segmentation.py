"""Where tokenisers cut a text: token spans, the boundary diff of several tokenisers, the merge
scrubber's numbers, and the "why this split?" replay of one chunk.

Offsets are UTF-8 byte offsets into the text, so tokenisers of every mode and id layout are
compared on the same axis (words mode drops whitespace, so its tokens cover only the words).
Nothing here imports Flask; the views call it and render what it returns.
"""

from __future__ import annotations

import bisect
import re
import weakref
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, pairwise

import bpe
from bpe.model import UNKNOWN
from bpe.rules.hf_pipeline import pipeline_of
from bpe.stepwise import (
    Chunk,
    Step,
    base_symbols,
    encode_chunks,
    first_merges,
    imported_pieces,
    replay,
    replay_joins,
    whole_piece_token,
)
from webapp.rendering.pipeline_stages import Located, PipelineStages, locate

REPLAY_MAX_BYTES = 64  # a longer chunk is replayed as the window of its tokens around the click
REPLAY_MAX_STEPS = 200  # a single token longer than that has at most this many steps shown
REPLAY_MAX_PAIRS = 12  # learned pairs listed per step; the rest are counted


@dataclass(frozen=True)
class Segmentation:
    """One tokeniser's cut of a text: its chunks, ids, and each token's byte span."""

    chunks: list[Chunk]
    ids: list[int]
    spans: list[tuple[int, int]]  # per token: (start byte, end byte) in the text
    chunk_of: list[int]  # per token: the index of its chunk

    @property
    def boundaries(self) -> set[int]:
        """Byte offsets where one token ends and the next starts, or where a gap (whitespace a
        words-mode tokeniser drops, text a pattern does not match) begins or ends."""
        cuts: set[int] = set()
        for start, end in self.spans:
            cuts.add(start)
            cuts.add(end)
        return cuts


def segment(
    tok: bpe.Tokenizer,
    text: str,
    *,
    allowed_special: str | Sequence[str] = (),
    merge_limit: int | None = None,
) -> Segmentation:
    chunks = encode_chunks(tok, text, allowed_special=allowed_special, merge_limit=merge_limit)
    ids: list[int] = []
    spans: list[tuple[int, int]] = []
    chunk_of: list[int] = []
    byte_at = _byte_offsets(text)
    words = not tok.mode_object.byte_level  # characters and </w>, not bytes
    unknown = tok.special_tokens.get(UNKNOWN) if words else None
    width = _widths(tok)
    for index, chunk in enumerate(chunks):
        if chunk.special:
            ids.append(chunk.ids[0])
            spans.append((byte_at[chunk.start], byte_at[chunk.end]))
            chunk_of.append(index)
            continue
        if words:  # tokens are characters: measure in characters, then convert
            char = chunk.start
            for token_id in chunk.ids:
                # `<unk>` stands for the one character it does not know
                chars = 1 if token_id == unknown else len(tok.token_bytes(token_id).decode())
                spans.append((byte_at[char], byte_at[char + chars]))
                char += chars
        else:
            ends = list(accumulate(map(width, chunk.ids), initial=byte_at[chunk.start]))
            spans.extend(pairwise(ends))
        ids.extend(chunk.ids)
        chunk_of.extend([index] * len(chunk.ids))
    return Segmentation(chunks, ids, spans, chunk_of)


_widths_cache: weakref.WeakKeyDictionary[bpe.Tokenizer, Callable[[int], int]] = (
    weakref.WeakKeyDictionary()
)


def _widths(tok: bpe.Tokenizer) -> Callable[[int], int]:
    """id -> the token's length in bytes, remembered per tokeniser in an array of its ids
    (4 bytes an id, so even a 200,000-token vocabulary costs under 1 MB)."""
    width = _widths_cache.get(tok)
    if width is None:
        known = array("I", bytes(4 * tok.id_limit))  # 0: not looked up yet

        def width(token_id: int) -> int:
            found = known[token_id] if 0 <= token_id < len(known) else 0
            if not found:
                found = len(tok.token_bytes(token_id))
                if 0 <= token_id < len(known):
                    known[token_id] = found
            return found

        _widths_cache[tok] = width
    return width


@lru_cache(maxsize=4)  # the compare page measures one text for each of its rows
def _byte_offsets(text: str) -> list[int]:
    """byte offset of each character, plus the length at the end (do not change the list)."""
    if text.isascii():
        return list(range(len(text) + 1))
    data = text.encode("utf-8", errors="surrogatepass")
    # Every character starts with a byte that is not a continuation byte (10xxxxxx).
    offsets = [m.start() for m in _CHARACTER_START.finditer(data)]
    offsets.append(len(data))
    return offsets


_CHARACTER_START = re.compile(rb"[^\x80-\xbf]")


# ----- the boundary diff ----------------------------------------------------------------------
# The diff counts what it draws: a row's cuts are the edges of the chips its view shows (a
# chip can join the tokens that split a character, and words mode drops the whitespace
# between its tokens), so every cut counted is marked on a chip, and every cut marked counted.
@dataclass(frozen=True)
class RowCuts:
    """One row's inner cuts (the text's start and end are not cuts) as its view draws them."""

    chips: list[tuple[int, int]]  # (start byte, end byte) of each chip shown
    drawn: frozenset[int]  # at a chip's edge: its start, or its end where a gap follows
    hidden: frozenset[int]  # inside a chip: tokens it joins into one character


def row_cuts(seg: Segmentation, view_token_counts: Sequence[int], text_bytes: int) -> RowCuts:
    """The cuts of a segmentation as a view that shows `view_token_counts[i]` tokens as chip i.

    >>> seg = Segmentation([], [1, 2, 3], [(0, 1), (1, 3), (4, 6)], [0, 0, 0])
    >>> cuts = row_cuts(seg, [2, 1], 6)  # chip 0 joins tokens 0 and 1; a gap at byte 3
    >>> cuts.chips, sorted(cuts.drawn), sorted(cuts.hidden)
    ([(0, 3), (4, 6)], [3, 4], [1])
    """
    spans = seg.spans
    chips = []
    index = 0
    for count in view_token_counts:
        chips.append((spans[index][0], spans[index + count - 1][1]))
        index += count
    edges = {cut for chip in chips for cut in chip}
    inner = seg.boundaries - {0, text_bytes}
    drawn = frozenset(edges - {0, text_bytes})
    return RowCuts(chips, drawn, frozenset(inner - drawn))


@dataclass(frozen=True)
class BoundaryDiff:
    agreeing: int  # inner boundaries every compared row draws
    differing: int  # inner boundaries some but not all of them draw
    rows: list[RowDiff]
    hidden: int = 0  # cuts inside characters only some rows make (drawn with "hex bytes")
    pair: tuple[int, int] | None = None  # the two rows compared, or None for all of them


@dataclass(frozen=True)
class RowDiff:
    only_some: frozenset[int]  # this row's drawn cuts that not every compared row draws
    lacks: frozenset[int]  # cuts other compared rows draw that fall inside one of its chips
    compared: bool = True  # False: a row outside the pair compared, left unmarked


def boundary_diff(rows: Sequence[RowCuts], *, pair: tuple[int, int] | None = None) -> BoundaryDiff:
    """Compare the drawn cuts of every row, or of the two rows of `pair` only.

    >>> a = RowCuts([(0, 2), (2, 4)], frozenset({2}), frozenset())
    >>> b = RowCuts([(0, 1), (1, 2), (2, 4)], frozenset({1, 2}), frozenset())
    >>> d = boundary_diff([a, b])
    >>> (d.agreeing, d.differing, sorted(d.rows[0].lacks), sorted(d.rows[1].only_some))
    (1, 1, [1], [1])
    """
    chosen = list(pair) if pair is not None else list(range(len(rows)))
    compared = [rows[i] for i in chosen]
    if not compared:
        return BoundaryDiff(0, 0, [])
    everywhere = frozenset.intersection(*(r.drawn for r in compared))
    anywhere = frozenset.union(*(r.drawn for r in compared))
    differing = anywhere - everywhere
    # Cuts inside characters that only some rows make: a chip's edge is never inside one, so
    # these are what "hex bytes" (a chip per token) would add to `differing`.
    full = [r.drawn | r.hidden for r in compared]
    hidden = frozenset.union(*full) - frozenset.intersection(*full) - anywhere
    out = []
    for i, row in enumerate(rows):
        if i not in chosen:
            out.append(RowDiff(frozenset(), frozenset(), compared=False))
            continue
        missing = sorted(differing - row.drawn)
        inside = {cut for cut in missing if _inside_a_chip(row.chips, cut)}
        out.append(RowDiff(only_some=row.drawn & differing, lacks=frozenset(inside)))
    return BoundaryDiff(len(everywhere), len(differing), out, len(hidden), pair)


def _inside_a_chip(chips: list[tuple[int, int]], cut: int) -> bool:
    at = bisect.bisect_right(chips, (cut, float("inf"))) - 1
    return at >= 0 and chips[at][0] < cut < chips[at][1]


@dataclass(frozen=True)
class ChipMark:
    """What one chip of a diff row shows: a bar before it (a cut only some make starts it), a
    bar after it (one ends it before a gap), and how many cuts of others it runs across."""

    before: bool
    after: bool
    inside: int


def view_marks(cuts: RowCuts, row: RowDiff) -> list[ChipMark]:
    """One mark per chip; its bars and its count add up to the row's `only_some` and
    `lacks`."""
    lacks = sorted(row.lacks)
    only_some = row.only_some
    chips = cuts.chips
    marks = []
    for n, (start, end) in enumerate(chips):
        inside = bisect.bisect_left(lacks, end) - bisect.bisect_right(lacks, start) if lacks else 0
        next_start = chips[n + 1][0] if n + 1 < len(chips) else None
        after = end in only_some and end != next_start
        marks.append(ChipMark(start in only_some, after, max(inside, 0)))
    return marks


# ----- the merge scrubber ---------------------------------------------------------------------
@dataclass(frozen=True)
class Scrub:
    """The text cut with the first `k` of `total` merges, and what merge k did to it."""

    k: int
    total: int
    merge: tuple[int, int, int] | None  # merge k (the k-th learned, 1-based); None for k = 0
    removed: int  # boundaries merge k removed from this text (tokens before it - after it)
    segmentation: Segmentation


def clamp_merges(tok: bpe.Tokenizer, k: int | None) -> int:
    total = len(tok.merges)
    return total if k is None else max(0, min(k, total))


def scrub(
    tok: bpe.Tokenizer, text: str, k: int, *, allowed_special: str | Sequence[str] = ()
) -> Scrub:
    """Encode with the first k merges, and count what merge k removed: encode(k) is encode(k-1)
    with merge k applied once more in each chunk (bpe.stepwise), so the difference in tokens is
    the number of places it joined."""
    k = clamp_merges(tok, k)
    seg = segment(tok, text, allowed_special=allowed_special, merge_limit=k)
    merge = tok.merges[k - 1] if k else None
    # Every token with merge k's id was made by merge k (an id is new when merged) and none was
    # merged further (no later merge is used), so counting them counts the joins it made.
    removed = seg.ids.count(merge[2]) if merge is not None else 0
    if merge is not None and tok.rule != "merges":  # imported: count by re-encoding one less
        removed = len(segment(tok, text, allowed_special=allowed_special, merge_limit=k - 1).ids)
        removed -= len(seg.ids)
    return Scrub(k=k, total=len(tok.merges), merge=merge, removed=removed, segmentation=seg)


# ----- "why this split?" ------------------------------------------------------------------------
@dataclass(frozen=True)
class Replay:
    text: str  # what is replayed: a whole chunk, or a window of whole tokens of it
    chunk_text: str  # the whole chunk it comes from
    symbols: list[int]  # the base symbols it starts as
    steps: list[Step]
    result: list[int]  # the encoding: the last step's tokens (or the symbols, if no step)
    windowed: bool  # only part of a long chunk is replayed
    cut_steps: bool  # the steps were capped at REPLAY_MAX_STEPS
    token_index: int  # the clicked token's index in the whole text's encoding
    rule: str = "merges"  # whose rule is replayed: ours (docs/algorithms.md), tiktoken's or HF's
    whole: bool = False  # the piece is itself a token, taken at once before any join
    stages: PipelineStages | None = None  # HF's whole pipeline: the steps before the merges


def replay_token(
    tok: bpe.Tokenizer,
    text: str,
    token_index: int,
    *,
    allowed_special: str | Sequence[str] = (),
    merge_limit: int | None = None,
) -> Replay | None:
    """Replay the encoding of the chunk holding token `token_index` (None if there is none).

    A chunk longer than REPLAY_MAX_BYTES is replayed as a window of its final tokens around the
    clicked one. That window encodes on its own to exactly the same tokens: no merge of the
    chunk's encoding crossed a final token's edge, and our rule only looks at pairs (the
    lowest-ranked pair present merges first: docs/algorithms.md, "Encoding").
    """
    if tok.rule == "hf_pipeline":
        # Its pieces are HF's own strings (normalized, byte-level or `▁` spelled), not slices
        # of the text's bytes, which the imported replay walks.
        found = locate(
            tok, text, token_index, allowed_special=allowed_special, merge_limit=merge_limit
        )
        return None if found is None else _replay_pipeline(tok, found, token_index, merge_limit)
    if tok.rule != "merges":
        return _replay_imported(
            tok, text, token_index, allowed_special=allowed_special, merge_limit=merge_limit
        )
    seg = segment(tok, text, allowed_special=allowed_special, merge_limit=merge_limit)
    if not 0 <= token_index < len(seg.ids):
        return None
    chunk = seg.chunks[seg.chunk_of[token_index]]
    chunk_text = text[chunk.start : chunk.end]
    if chunk.special:
        return Replay(chunk_text, chunk_text, chunk.ids, [], chunk.ids, False, False, token_index)
    first = seg.chunk_of.index(seg.chunk_of[token_index])  # the chunk's first token
    lo, hi = _window(seg, first, first + len(chunk.ids), token_index)
    windowed = (lo, hi) != (first, first + len(chunk.ids))
    text_bytes = text.encode("utf-8", errors="surrogatepass")
    window_text = text_bytes[seg.spans[lo][0] : seg.spans[hi - 1][1]].decode(
        "utf-8", errors="surrogatepass"
    )
    symbols = _window_symbols(tok, window_text, ends_word=hi == first + len(chunk.ids))
    steps = replay(symbols, first_merges(tok, merge_limit), max_steps=REPLAY_MAX_STEPS)
    result = steps[-1].after if steps else symbols
    cut = len(steps) == REPLAY_MAX_STEPS and result != seg.ids[lo:hi]
    return Replay(window_text, chunk_text, symbols, steps, result, windowed, cut, token_index)


def _replay_imported(
    tok: bpe.Tokenizer,
    text: str,
    token_index: int,
    *,
    allowed_special: str | Sequence[str],
    merge_limit: int | None,
) -> Replay | None:
    """The replay for an imported tokeniser, by its own rule (tiktoken's or HF's), of the piece
    holding the token; a long piece as the window of its tokens around it, which joins on its
    own exactly as in the piece (no join crossed a final token's edge, and both rules pick
    among the pairs inside it in the same order), without the whole-piece lookup."""
    if token_index < 0:
        return None
    first = 0
    for piece, ids, special in imported_pieces(
        tok, text, allowed_special=allowed_special, merge_limit=merge_limit
    ):
        if token_index >= first + len(ids):
            first += len(ids)
            continue
        if special:
            return Replay(piece, piece, ids, [], ids, False, False, token_index, rule=tok.rule)
        ends = list(accumulate((len(tok.token_bytes(i)) for i in ids), initial=0))
        local = Segmentation([], ids, list(pairwise(ends)), [])
        lo, hi = _window(local, 0, len(ids), token_index - first)
        windowed = (lo, hi) != (0, len(ids))
        data = piece.encode("utf-8", errors="surrogatepass")[ends[lo] : ends[hi]]
        window_text = data.decode("utf-8", errors="replace")
        symbols = [tok.byte_ids[b] for b in data]
        whole = None if windowed else whole_piece_token(tok, data, merge_limit)
        steps, result, cut = _joins(tok, symbols, ids[lo:hi], whole, merge_limit)
        return Replay(
            window_text,
            piece,
            symbols,
            steps,
            result,
            windowed,
            cut,
            token_index,
            rule=tok.rule,
            whole=whole is not None,
        )
    return None


def _replay_pipeline(
    tok: bpe.Tokenizer, found: Located, token_index: int, merge_limit: int | None
) -> Replay:
    """The replay for an import run through HF's whole pipeline: the stages that made the word
    holding the token (`webapp.rendering.pipeline_stages`), then the word's merges from its
    model symbols (its characters, unknown ones as `<0xNN>` bytes), a join at a time. A long
    word is replayed as the window of its final tokens around the clicked one, which joins on
    its own as in the word (no join crossed a final token's edge; the symbols are the word's
    own, sliced at those edges)."""
    pipeline = pipeline_of(tok)
    word, stages = found.word, found.stages
    ids = word.ids
    if word.added_id is not None:
        return Replay(
            word.text, word.text, ids, [], ids, False, False, token_index, rule=tok.rule,
            stages=stages,
        )  # fmt: skip
    symbols = pipeline.model.symbols(word.text)
    spans = _symbol_spans(tok, ids, len(symbols))
    spelled = [pipeline.token_string(i) or "" for i in ids]
    # Measured as the text they stand for (Llama 2's `▁` a space, `<0xNN>` one byte).
    ends = list(accumulate((len(tok.display_bytes(i)) for i in ids), initial=0))
    lo, hi = 0, len(ids)
    if spans is not None:
        local = Segmentation([], ids, list(pairwise(ends)), [])
        lo, hi = _window(local, 0, len(ids), token_index - found.first)
        symbols = symbols[spans[lo] : spans[hi]]
    windowed = (lo, hi) != (0, len(ids))
    limited = merge_limit is not None and merge_limit < len(tok.merges)
    whole = (
        not windowed and not limited and tok.ignore_merges and len(ids) == 1
        and pipeline.model.vocab.get(word.text) == ids[0]
    )  # fmt: skip
    steps, result, cut = _joins(tok, symbols, ids[lo:hi], ids[0] if whole else None, merge_limit)
    return Replay(
        text="".join(spelled[lo:hi]),
        chunk_text=word.text,
        symbols=symbols,
        steps=steps,
        result=result,
        windowed=windowed,
        cut_steps=cut,
        token_index=token_index,
        rule=tok.rule,
        whole=whole,
        stages=stages,
    )


def _joins(
    tok: bpe.Tokenizer,
    symbols: list[int],
    final: list[int],
    whole: int | None,
    merge_limit: int | None,
) -> tuple[list[Step], list[int], bool]:
    """An imported piece's steps, its result, and whether the steps were cut before reaching
    `final` (its tokens in the encoding): none when it is taken `whole` as one token."""
    if whole is not None:
        return [], [whole], False
    steps = replay_joins(tok, symbols, merge_limit=merge_limit, max_steps=REPLAY_MAX_STEPS)
    result = steps[-1].after if steps else symbols
    return steps, result, len(steps) == REPLAY_MAX_STEPS and result != final


def _symbol_spans(tok: bpe.Tokenizer, ids: Sequence[int], count: int) -> list[int] | None:
    """Where each final token starts among the word's `count` model symbols (and the end):
    a token made by a merge covers its two parts' symbols, any other token one. None when
    that does not add up to the word's symbols (a token taken whole with `ignore_merges`),
    and the word is then replayed whole."""
    covers: dict[int, int] = {}

    def symbols_of(token_id: int) -> int:
        stack, total = [token_id], 0
        while stack:  # a stack, not recursion: merge trees can run deep
            part = stack.pop()
            known = covers.get(part)
            rank = tok.merge_rank(part) if known is None else None
            if known is not None:
                total += known
            elif rank is None:
                total += 1
            else:
                left, right, _ = tok.merges[rank]
                stack += (left, right)
        covers[token_id] = total
        return total

    starts = list(accumulate(map(symbols_of, ids), initial=0))
    return starts if starts[-1] == count else None


def _window_symbols(tok: bpe.Tokenizer, window_text: str, *, ends_word: bool) -> list[int]:
    symbols = base_symbols(tok, window_text)
    if not tok.mode_object.byte_level and not ends_word:
        symbols = symbols[:-1]  # a window that stops inside a word has no `</w>`
    return symbols


def _window(seg: Segmentation, first: int, stop: int, clicked: int) -> tuple[int, int]:
    """Tokens first..stop-1 of a chunk, narrowed to at most REPLAY_MAX_BYTES around `clicked`
    (always keeping the clicked token itself)."""

    def size(lo: int, hi: int) -> int:
        return seg.spans[hi - 1][1] - seg.spans[lo][0]

    if size(first, stop) <= REPLAY_MAX_BYTES:
        return first, stop
    lo, hi = clicked, clicked + 1
    grew = True
    while grew:
        grew = False
        if hi < stop and size(lo, hi + 1) <= REPLAY_MAX_BYTES:
            hi += 1
            grew = True
        if lo > first and size(lo - 1, hi) <= REPLAY_MAX_BYTES:
            lo -= 1
            grew = True
    return lo, hi
