"""What the compare page computes about two tokenisers: which compresses better, how their
learned vocabularies overlap, which learned tokens cross a GPT-4 chunk boundary, and the
geometry of the compression-curve plot.

Everything here works on `bpe.Tokenizer` objects (as `convert.load_tokenizer` rebuilds them,
cached) and plain numbers; nothing imports Flask, so it is tested without a request.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import bpe
from bpe import GPT4_PATTERN, split_chunks

MAX_CURVE_POINTS = 300  # per series; a 50,000-merge curve is drawn from every 167th merge
TokenKey = tuple[bytes, bool]  # (token bytes, ends a word): the same token on both sides


# ----- which compresses better -------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """`winner` is "a", "b" or None (a tie); `fewer` tokens, `percent` of the loser's count."""

    winner: str | None
    fewer: int
    percent: float


def verdict(tokens_a: int, tokens_b: int) -> Verdict:
    """Fewer tokens for the same text is better compression.

    >>> verdict(715, 733)
    Verdict(winner='a', fewer=18, percent=2.4556616643929057)
    """
    if tokens_a == tokens_b:
        return Verdict(None, 0, 0.0)
    winner = "a" if tokens_a < tokens_b else "b"
    loser = max(tokens_a, tokens_b)
    fewer = abs(tokens_a - tokens_b)
    return Verdict(winner, fewer, 100 * fewer / loser if loser else 0.0)


def unknown_count(tok: bpe.Tokenizer, ids: Sequence[int]) -> int:
    """How many of the ids are the tokeniser's unknown token: characters it could not keep, so
    its count for the text is not comparable with a tokeniser that kept every one.

    Only a tokeniser without byte-level symbols (words mode) has an unknown token; a text that
    names `<unk>` literally with special tokens recognised is counted too, which errs on the
    side of not crowning it.
    """
    if tok.mode_object.byte_level:
        return 0
    unknown = tok.special_tokens.get(bpe.UNKNOWN)
    return 0 if unknown is None else sum(1 for token_id in ids if token_id == unknown)


# ----- learned tokens: overlap and chunk crossings -----------------------------------------------
def learned_tokens(tok: bpe.Tokenizer) -> dict[TokenKey, tuple[int, int]]:
    """Each merged token's key -> (its id, the pair count when it was learned).

    Base bytes (or words mode's characters) and special tokens are left out: every byte-level
    tokeniser has the same 256 bytes, and counting them would only blur the overlap.
    """
    counts = tok.training.merge_counts if tok.training is not None else [0] * len(tok.merges)
    out: dict[TokenKey, tuple[int, int]] = {}
    for rank, (_, _, new_id) in enumerate(tok.merges):
        key = (tok.token_bytes(new_id), tok.ends_word(new_id))
        out.setdefault(key, (new_id, counts[rank]))
    return out


@dataclass(frozen=True)
class SetOverlap:
    """Learned tokens of two to four tokenisers: how many all of them learned, and per member
    how many only it learned (with the most frequent of those, by id)."""

    in_all: int
    only: list[int]
    top_only: list[list[int]]


def overlap_many(toks: Sequence[bpe.Tokenizer], *, top: int = 12) -> SetOverlap:
    learned = [learned_tokens(tok) for tok in toks]
    everywhere = set.intersection(*(set(table) for table in learned))
    only, top_only = [], []
    for i, table in enumerate(learned):
        others = set().union(*(set(t) for j, t in enumerate(learned) if j != i))
        entries = [v for k, v in table.items() if k not in others]
        only.append(len(entries))
        ranked = sorted(entries, key=lambda e: (-e[1], e[0]))[:top]
        top_only.append([token_id for token_id, _ in ranked])
    return SetOverlap(in_all=len(everywhere), only=only, top_only=top_only)


def crosses_chunk_boundary(data: bytes, pattern: str = GPT4_PATTERN) -> bool:
    """Would the pattern cut this token's text in two? Judged on its whole characters: bytes of
    a character split off at either end are left out (on their own they match no chunk rule).

    >>> [crosses_chunk_boundary(t) for t in (b"t ", b" the", b"dog.")]
    [True, False, True]
    """
    return len(split_chunks(data.decode("utf-8", errors="ignore"), pattern)) > 1


def checks_crossings(tok: bpe.Tokenizer) -> bool:
    """Only tokenisers not trained on GPT-4 chunks can learn tokens that cross them."""
    return tok.mode != "chunked" or tok.pattern != GPT4_PATTERN


_crossing_cache: OrderedDict[tuple[int, str], frozenset[int]] = OrderedDict()
_crossing_lock = threading.Lock()


def crossing_ids(key: tuple[int, str], tok: bpe.Tokenizer) -> frozenset[int]:
    """Ids of the merged tokens that cross a GPT-4 chunk boundary (cached by the tokeniser's
    (row id, slug), like `load_tokenizer`: stored tokenisers never change)."""
    with _crossing_lock:
        if key in _crossing_cache:
            _crossing_cache.move_to_end(key)
            return _crossing_cache[key]
    found: frozenset[int] = frozenset()
    if checks_crossings(tok):
        found = frozenset(
            new for _, _, new in tok.merges if crosses_chunk_boundary(tok.token_bytes(new))
        )
    with _crossing_lock:
        _crossing_cache[key] = found
        while len(_crossing_cache) > 32:
            _crossing_cache.popitem(last=False)
    return found


# ----- the compression-curve plot ----------------------------------------------------------------
@dataclass(frozen=True)
class Series:
    label: str
    points: str  # SVG polyline points, "x,y x,y ..."
    end_x: float
    end_y: float
    end_value: str  # the last value, as shown next to the line's end
    label_y: float = 0.0  # where the end label is drawn, nudged apart from the others'
    markers: tuple[tuple[float, float], ...] = ()  # a few points along the line, for its shape


@dataclass(frozen=True)
class Plot:
    width: int
    height: int
    left: int
    right: int  # x of the right edge of the plot area
    top: int
    bottom: int  # y of the x axis
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    series: list[Series]
    y_label: str
    y_label_x: float = 16.0  # the rotated y-axis title's centre line, left of the tick labels


TICK_CHAR_WIDTH = 7.5  # px per character of a 13 px tick label, a little generous
END_LABEL_GAP = 16  # px between two end labels
MARKERS_PER_CURVE = 8


def curve(initial: int, tokens_after: Sequence[int]) -> list[tuple[int, int]]:
    """(merges done, tokens in the corpus) from the start to the last merge."""
    return [(0, initial), *((rank + 1, n) for rank, n in enumerate(tokens_after))]


def downsample(
    points: Sequence[tuple[int, float]], limit: int = MAX_CURVE_POINTS
) -> Sequence[tuple[int, float]]:
    """Every k-th point, always keeping the first and the last.

    >>> downsample([(i, i) for i in range(10)], 4)
    [(0, 0), (3, 3), (6, 6), (9, 9)]
    """
    if len(points) <= limit:
        return points
    step = math.ceil((len(points) - 1) / (limit - 1))
    kept = points[::step]
    return kept if kept[-1] == points[-1] else [*kept, points[-1]]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering low..high.

    >>> nice_ticks(558, 702)
    [550.0, 600.0, 650.0, 700.0, 750.0]
    """
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = [first]
    while ticks[-1] < high:
        ticks.append(ticks[-1] + step)
    return [float(t) for t in ticks]


def _label(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def curve_plot(
    curves: Sequence[tuple[str, Sequence[tuple[int, float]]]],
    *,
    relative: bool = False,
    width: int = 960,
    height: int = 340,
) -> Plot:
    """Both curves on one pair of axes; `relative` draws each as % of its starting count
    (for tokenisers of different corpora, whose raw counts do not share a scale)."""
    if relative:
        curves = [
            (label, [(x, 100 * y / (pts[0][1] or 1)) for x, y in pts]) for label, pts in curves
        ]
    curves = [(label, downsample(pts)) for label, pts in curves]
    max_x = max(1, *(pts[-1][0] for _, pts in curves))
    x_ticks = [t for t in nice_ticks(0, max_x) if t <= max_x * 1.0001] or [0.0]
    y_values = [y for _, pts in curves for _, y in pts]
    y_ticks = nice_ticks(min(y_values), max(y_values))
    y_low, y_high = y_ticks[0], y_ticks[-1]
    y_labels = [_label(t) + ("%" if relative else "") for t in y_ticks]
    # The y title sits left of the widest tick label, never over it: the margin grows with them.
    y_label_x = 16.0
    left = round(y_label_x + 14 + max(len(label) for label in y_labels) * TICK_CHAR_WIDTH)
    right, top, bottom = width - 150, 16, height - 52

    def sx(x: float) -> float:
        return round(left + (right - left) * x / max_x, 1)

    def sy(y: float) -> float:
        return round(bottom - (bottom - top) * (y - y_low) / ((y_high - y_low) or 1), 1)

    series = []
    for label, pts in curves:
        last_x, last_y = pts[-1]
        every = max(1, len(pts) // MARKERS_PER_CURVE)
        series.append(
            Series(
                label=label,
                points=" ".join(f"{sx(x)},{sy(y)}" for x, y in pts),
                end_x=sx(last_x),
                end_y=sy(last_y),
                end_value=f"{last_y:.1f}%" if relative else f"{last_y:,.0f}",
                markers=tuple((sx(x), sy(y)) for x, y in pts[every:-1:every]),
            )
        )
    series = _spread_end_labels(series, top=top, bottom=bottom)
    return Plot(
        width=width,
        height=height,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        x_ticks=[(sx(t), _label(t)) for t in x_ticks],
        y_ticks=[(sy(t), label) for t, label in zip(y_ticks, y_labels, strict=True)],
        series=series,
        y_label="tokens, % of the start" if relative else "tokens in the corpus",
        y_label_x=y_label_x,
    )


def _spread_end_labels(series: list[Series], *, top: float, bottom: float) -> list[Series]:
    """Each curve's end label at its end's height, moved apart where two would overlap.

    >>> s = [Series("a", "", 0, 100, ""), Series("b", "", 0, 104, "")]
    >>> [x.label_y for x in _spread_end_labels(s, top=0, bottom=300)]
    [94.0, 110.0]
    """
    order = sorted(range(len(series)), key=lambda i: series[i].end_y)
    ys = [series[i].end_y for i in order]
    for _ in range(len(ys)):  # push neighbours apart symmetrically until none overlap
        moved = False
        for j in range(1, len(ys)):
            gap = ys[j] - ys[j - 1]
            if gap < END_LABEL_GAP:
                shift = (END_LABEL_GAP - gap) / 2
                ys[j - 1] -= shift
                ys[j] += shift
                moved = True
        if not moved:
            break
    low = top + 6 - min(ys)
    if low > 0:
        ys = [y + low for y in ys]
    high = max(ys) - (bottom + 6)
    if high > 0:
        ys = [y - high for y in ys]
    out = list(series)
    for i, y in zip(order, ys, strict=True):
        out[i] = replace(series[i], label_y=round(y, 1))
    return out
