"""A training job's "watch it learn" panel, from the JSON its job wrote (webapp/jobs/learning.py):
the latest merges as token views, and two curves drawn as server-side SVG, the vocabulary's
growth over wall time and the bytes per token of the corpus sample over the vocabulary size.

Only numbers reach the SVG (the coordinates are formatted here); token bytes go through the
token views like every other token on the site. A snapshot that does not parse is drawn as
nothing rather than failing the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from webapp.rendering.token_display import TokenInfo, TokenView, token_view

WIDTH, HEIGHT = 360, 150  # the SVG's viewBox
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 10, 10, 26


@dataclass(frozen=True)
class Merge:
    rank: int  # 1-based, as the pages number merges
    left: TokenView
    right: TokenView
    made: TokenView


@dataclass(frozen=True)
class Curve:
    """One line chart: the polyline's points in viewBox units, and the axes' end labels."""

    points: str
    x_labels: tuple[str, str]
    y_labels: tuple[str, str]
    last: tuple[float, float]  # the latest point, in viewBox units (a dot marks it)


@dataclass(frozen=True)
class Learning:
    merges: list[Merge]
    vocab: Curve | None  # vocabulary size against wall seconds
    compression: Curve | None  # sample bytes per token against vocabulary size
    vocab_size: int
    bytes_per_token: float | None
    first_bytes_per_token: float | None
    sample_bytes: int


def learning_data(raw: str | None) -> dict[str, Any] | None:
    """The snapshot as plain data (the JSON API gives it as it is), None if there is none."""
    try:
        data = json.loads(raw or "")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def learning_view(raw: str | None) -> Learning | None:
    """The panel for a job's `learning` column, or None when there is nothing to draw."""
    try:
        data = json.loads(raw or "")
        if not isinstance(data, dict) or data.get("v") != 1:
            return None
        base, sample_bytes = int(data["base"]), int(data["sample_bytes"])
        merges = [_merge(row, base) for row in data["recent"]]
        points = [(float(s), int(m), int(t)) for s, m, t in data["points"]]
    except (ValueError, TypeError, KeyError):
        return None
    if not points:
        return None
    ratios = [(float(base + m), sample_bytes / t) for _, m, t in points if t > 0]
    vocab = _curve([(s, float(base + m)) for s, m, _ in points], x_unit="s")
    return Learning(
        merges=[m for m in merges if m is not None],
        vocab=vocab,
        compression=_curve(ratios, y_format="{:.2f}"),
        vocab_size=base + points[-1][1],
        bytes_per_token=ratios[-1][1] if ratios else None,
        first_bytes_per_token=ratios[0][1] if ratios else None,
        sample_bytes=sample_bytes,
    )


def _merge(row: Any, base: int) -> Merge | None:
    new_id, left_id, left_hex, right_id, right_hex = row
    if left_hex is None or right_hex is None:
        return None
    left, right = bytes.fromhex(left_hex), bytes.fromhex(right_hex)

    def view(token_id: int, data: bytes, colour: int) -> TokenView:
        rank = token_id - base if token_id >= base else None
        return token_view(TokenInfo(int(token_id), data, rank=rank), whitespace=True, colour=colour)

    return Merge(
        int(new_id) - base + 1,
        view(left_id, left, 0),
        view(right_id, right, 1),
        view(new_id, left + right, 2),
    )


def _curve(
    points: list[tuple[float, float]], *, x_unit: str = "", y_format: str = "{:,.0f}"
) -> Curve | None:
    """Points scaled into the chart's box: x from 0 (or the first x) to the largest, y from
    the smallest to the largest value seen (a flat line sits in the middle)."""
    if len(points) < 2:
        return None
    x0 = min(x for x, _ in points)
    x1 = max(x for x, _ in points)
    y0 = min(y for _, y in points)
    y1 = max(y for _, y in points)
    inner_w = WIDTH - PAD_LEFT - PAD_RIGHT
    inner_h = HEIGHT - PAD_TOP - PAD_BOTTOM

    def at(x: float, y: float) -> tuple[float, float]:
        fx = (x - x0) / (x1 - x0) if x1 > x0 else 1.0
        fy = (y - y0) / (y1 - y0) if y1 > y0 else 0.5
        return PAD_LEFT + fx * inner_w, PAD_TOP + (1 - fy) * inner_h

    scaled = [at(x, y) for x, y in points]
    x_format = "{:.1f} " + x_unit if x_unit else "{:,.0f}"
    return Curve(
        points=" ".join(f"{x:.1f},{y:.1f}" for x, y in scaled),
        x_labels=(x_format.format(x0).strip(), x_format.format(x1).strip()),
        y_labels=(y_format.format(y0), y_format.format(y1)),
        last=scaled[-1],
    )
