"""A language table as its page shows it: the job's counts as a `bpe.languages.LanguageTable`,
filtered (script, name) and sorted, grouped by script, the worst and best languages of each
tokeniser, the premium chart's geometry, and the CSV and JSON downloads.

The chart is one server-drawn SVG (as the compare page's curves): a row per language when the
filter leaves at most CHART_LANGUAGES of them, else a row per script; in each row, each
tokeniser's premium on a log scale (1 = English's price) in a lane of its own, a marker shape
per tokeniser, and for a script the range of its languages with their median marked.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from bpe.languages import (
    BASELINE,
    CSV_COLUMNS,
    LanguageRow,
    LanguageTable,
    extremes,
    long_rows,
)
from webapp.storage.languages import counted_texts, counts_of, job_tokenizers
from webapp.storage.models import LanguageJob, Tokenizer

CHART_LANGUAGES = 60  # more than this, and the chart draws a row per script instead
STYLES = "abcd"  # the compare page's four line and marker styles (static/compare.css)
SHAPES = {"a": "circle", "b": "square", "c": "triangle", "d": "diamond"}
EXTREMES_SHOWN = 5


def tokenizer_name(row: Tokenizer) -> str:
    if row.imported:
        return row.reference or row.name or row.source_name or row.source_filename or "imported"
    return row.name or f"{row.mode} · {row.vocab_size:,}"


def unique_names(tokenizers: Sequence[Tokenizer]) -> list[str]:
    """Each tokeniser's name, made unique with " (2)", " (3)": the table's columns are keyed by
    them."""
    names: list[str] = []
    for row in tokenizers:
        name, n = tokenizer_name(row), 2
        candidate = name
        while candidate in names:
            candidate, n = f"{name} ({n})", n + 1
        names.append(candidate)
    return names


@dataclass
class JobTable:
    table: LanguageTable
    tokenizers: list[Tokenizer]  # in the table's column order

    def style(self, index: int) -> str:
        return STYLES[index % len(STYLES)]


def job_table(session: Session, job: LanguageJob) -> JobTable:
    """The finished job's counts as a table (its live tokenisers, every text it counted)."""
    tokenizers = job_tokenizers(session, job)
    names = unique_names(tokenizers)
    counts = counts_of(session, job.id)
    rows = []
    for text in counted_texts(session, job.id):
        tokens = {
            name: counts[(text.id, t.id)]
            for name, t in zip(names, tokenizers, strict=True)
            if (text.id, t.id) in counts
        }
        rows.append(
            LanguageRow(
                code=text.code,
                name=text.name,
                script=text.script,
                spaced=text.spaced,
                bytes=text.byte_count,
                characters=text.char_count,
                words=text.word_count,
                tokens=tokens,
            )
        )
    return JobTable(LanguageTable(names, rows, job.elapsed_seconds or 0.0), tokenizers)


# ----- filters, sorting, groups ------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    """What the page's query string asks for, checked: unknown values fall back to defaults."""

    script: str = ""  # "" = every script
    query: str = ""  # part of a name or a code
    sort: str = "premium"  # premium, name, code, bytes
    by: int = 0  # whose premium sorts the table
    descending: bool = True

    def params(self, **changes: Any) -> dict[str, Any]:
        values = {
            "script": self.script,
            "q": self.query,
            "sort": self.sort,
            "by": self.by,
            "order": "desc" if self.descending else "asc",
        }
        values.update(changes)
        return {k: v for k, v in values.items() if v not in ("", None)}


SORT_KEYS = ("premium", "name", "code", "bytes")


def parse_view(args: Any, table: LanguageTable) -> View:
    script = str(args.get("script", ""))[:64]
    query = str(args.get("q", ""))[:100].strip()
    sort = args.get("sort", "premium")
    by = args.get("by", "0")
    return View(
        script=script,
        query=query,
        sort=sort if sort in SORT_KEYS else "premium",
        by=int(by) if str(by).isdigit() and len(str(by)) < 3 and int(by) < len(table.names) else 0,
        descending=args.get("order", "desc") != "asc",
    )


def filtered(table: LanguageTable, view: View) -> list[LanguageRow]:
    query = view.query.casefold()
    rows = [
        row
        for row in table.rows
        if (not view.script or (row.script or "none") == view.script)
        and (not query or query in row.name.casefold() or query in row.code.casefold())
    ]
    base, name = table.baseline, table.names[view.by] if table.names else ""

    def key(row: LanguageRow) -> Any:
        if view.sort == "name":
            return row.name.casefold()
        if view.sort == "code":
            return row.code
        if view.sort == "bytes":
            return row.bytes
        premium = row.premium(name, base)
        return premium if premium is not None else -1.0

    return sorted(rows, key=key, reverse=view.descending)


def scripts_of(table: LanguageTable) -> list[tuple[str, int]]:
    """(script, languages) for the filter, the most languages first."""
    counts: dict[str, int] = {}
    for row in table.rows:
        counts[row.script or "none"] = counts.get(row.script or "none", 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def grouped(rows: Sequence[LanguageRow]) -> list[tuple[str, list[LanguageRow]]]:
    """The rows by script (the groups ordered by their size, then name), each in row order."""
    groups: dict[str, list[LanguageRow]] = {}
    for row in rows:
        groups.setdefault(row.script or "none", []).append(row)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def worst_and_best(
    table: LanguageTable,
) -> list[tuple[str, list[LanguageRow], list[LanguageRow]]]:
    return [(name, *extremes(table, name, count=EXTREMES_SHOWN)) for name in table.names]


# ----- the chart ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mark:
    style: str  # a-d
    hollow: bool  # tokenisers 5-8 reuse the four shapes, unfilled
    y: float
    x: float  # the median (a script) or the value (a language)
    low: float  # the range's ends (equal to x for a language)
    high: float
    ticks: tuple[float, ...]  # each language of a script, a short tick
    value: float


@dataclass(frozen=True)
class ChartRow:
    label: str
    y: float
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x_ticks: list[tuple[float, str]]
    one_x: float  # English's price, the line every premium is read against
    row_height: int
    rows: list[ChartRow]
    per: str  # "language" or "script"
    names: list[str]


LANE = 9  # px between two tokenisers' lanes in a row
LABEL_WIDTH = 230


def chart(table: LanguageTable, rows: Sequence[LanguageRow], *, width: int = 960) -> Chart | None:
    """The premium chart of these rows (see the module docstring); None if nothing is priced."""
    base, names = table.baseline, table.names
    if len(rows) <= CHART_LANGUAGES:
        per = "language"
        entries = [(row.name, [row]) for row in rows]
    else:
        per = "script"
        entries = [(f"{script} ({len(group)})", group) for script, group in grouped(rows)]
    values = [
        [[p for r in group if (p := r.premium(name, base)) is not None] for name in names]
        for _, group in entries
    ]
    every = [v for row in values for lane in row for v in lane]
    if not every:
        return None
    low = 2.0 ** math.floor(math.log2(min(min(every), 1.0)))
    high = 2.0 ** math.ceil(math.log2(max(max(every), 1.0) * 1.0001))
    row_height = max(18, LANE * len(names) + 8)
    left, right, top = LABEL_WIDTH, width - 24, 14
    bottom = top + row_height * len(entries)

    def sx(v: float) -> float:
        return round(left + (right - left) * math.log2(v / low) / math.log2(high / low), 1)

    chart_rows = []
    for n, ((label, _), lanes) in enumerate(zip(entries, values, strict=True)):
        y0 = top + n * row_height + row_height / 2 - LANE * (len(names) - 1) / 2
        marks = []
        for i, lane in enumerate(lanes):
            if not lane:
                continue
            middle = statistics.median(lane)
            marks.append(
                Mark(
                    style=STYLES[i % len(STYLES)],
                    hollow=i >= len(STYLES),
                    y=round(y0 + i * LANE, 1),
                    x=sx(middle),
                    low=sx(min(lane)),
                    high=sx(max(lane)),
                    ticks=tuple(sx(v) for v in lane) if len(lane) > 1 else (),
                    value=middle,
                )
            )
        chart_rows.append(
            ChartRow(label, round(top + n * row_height + row_height / 2, 1), tuple(marks))
        )
    ticks = []
    t = low
    while t <= high * 1.0001:
        ticks.append((sx(t), f"{t:g}×"))
        t *= 2
    return Chart(
        width=width,
        height=bottom + 48,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        x_ticks=ticks,
        one_x=sx(1.0),
        row_height=row_height,
        rows=chart_rows,
        per=per,
        names=list(names),
    )


# ----- downloads ---------------------------------------------------------------------------------
def table_csv(table: LanguageTable) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for record in long_rows(table):
        # A cell that starts with = + - @ is a formula to a spreadsheet: names come from a
        # package, but a tokeniser's name is its owner's to choose.
        writer.writerow({k: _cell(v) for k, v in record.items()})
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def table_json(table: LanguageTable, tokenizers: Sequence[Tokenizer]) -> dict[str, Any]:
    return {
        "baseline": BASELINE,
        "tokenizers": [
            {"name": name, "slug": t.slug, "reference": t.reference}
            for name, t in zip(table.names, tokenizers, strict=True)
        ],
        "languages": list(long_rows(table)),
    }
