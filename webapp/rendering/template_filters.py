"""The Jinja filters every template may use: escaping user text, and formatting numbers.

Kept in one module, registered by create_app, so any page (not just the blueprint that
happens to define a filter) can show a corpus name or a token safely.
"""

from __future__ import annotations

import json
from datetime import datetime

from flask import Flask
from markupsafe import Markup

from bpe.modes import TrainingMode, get_mode, mode_names
from bpe.patterns import pattern_name
from webapp.jobs.progress import PHASES
from webapp.refusals import human_bytes
from webapp.rendering.chips import chip_budget, id_stream_html, stream_html, token_html
from webapp.rendering.downloads import unavailable
from webapp.rendering.learning import learning_view
from webapp.rendering.page_text import escape_html, form_value_html, visible_html
from webapp.rendering.token_display import TokenInfo, TokenView, token_view

DEFAULT_MODE = "chunked"  # what the train form and the job settings take when none is given


def init_app(app: Flask) -> None:
    app.jinja_env.filters.update(
        esc=esc_filter,
        visible=visible_filter,
        form_value=form_value_filter,
        pattern_name=pattern_name_filter,
        seconds=seconds_filter,
        human_bytes=human_bytes,
        num=num_filter,
        when=when_filter,
        pair_views=pair_views_filter,
        phase_label=phase_label_filter,
        learning=learning_view,
    )
    app.jinja_env.globals.update(
        job_phases=PHASES,
        token_html=token_html,
        stream_html=stream_html,
        chip_budget=chip_budget,
        id_stream_html=id_stream_html,
        training_modes=training_modes,
        download_unavailable=unavailable,
    )


def training_modes() -> list[TrainingMode]:
    """Every registered mode for the train form, the default (chunked) first: a mode
    registered with `bpe.modes.register_mode` appears there with its label and description."""
    modes = [get_mode(name) for name in mode_names()]
    return sorted(modes, key=lambda mode: mode.name != DEFAULT_MODE)


def esc_filter(text: str | None) -> Markup:
    """Token text and labels: escaped for text and quoted attributes, `=` included."""
    return Markup(escape_html(text or ""))


def visible_filter(text: str | None) -> Markup:
    """User-given text (corpus names, special tokens) with control/bidi characters shown."""
    return Markup(visible_html(text or ""))


def form_value_filter(text: str | None) -> Markup:
    """Text for a textarea or value attribute: escaped, round-trips, nothing raw."""
    return Markup(form_value_html(text or ""))


def pattern_name_filter(pattern: str | None) -> Markup:
    """A known split pattern by name (`gpt4`), any other regex in full, escapes visible.

    >>> str(pattern_name_filter(" ?[a-z]+|[0-9]+"))
    ' ?[a-z]+|[0-9]+'
    """
    if not pattern:
        return Markup("")
    name = pattern_name(pattern)  # "custom" for any regex it does not know: show that regex
    return Markup(visible_html(name if name not in (None, "custom") else pattern))


def seconds_filter(value: float | None) -> str:
    """Every duration on every page: 972 ms, 1.6 s, 2 min 5 s."""
    if value is None:
        return "–"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value // 60:.0f} min {value % 60:.0f} s"


def num_filter(value: int | float | None) -> str:
    """Every count on every page is written one way: 5,000."""
    if value is None:
        return "–"
    return f"{value:,}"


def pair_views_filter(value: str | None) -> list[tuple[int, TokenView | None]] | None:
    """A job's last merged pair (JSON from webapp.jobs.task.PairNamer) as (id, token view)
    twice, so the job page draws it like every other token. The view is None for a token
    learned between two progress reports (only its id is known); None for anything else."""
    try:
        parts = json.loads(value or "")
        pair: list[tuple[int, TokenView | None]] = []
        for colour, (token_id, hex_bytes) in enumerate(parts):
            view = None
            if hex_bytes is not None:
                info = TokenInfo(int(token_id), bytes.fromhex(hex_bytes))
                view = token_view(info, whitespace=True, colour=colour)
            pair.append((int(token_id), view))
    except (ValueError, TypeError):
        return None
    return pair if len(pair) == 2 else None


def phase_label_filter(phase: str | None) -> str:
    return PHASES.get(phase or "", phase or "")


def when_filter(value: datetime | None) -> str:
    """A stored (naive UTC) time, short and unambiguous: 1 Dec 2026 08:14 UTC."""
    if value is None:
        return "–"
    return f"{value.day} {value:%b %Y %H:%M} UTC"
