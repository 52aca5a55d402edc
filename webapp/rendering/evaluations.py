"""Evaluations as the pages show them: a row of the corpus page's table (`EvaluationView`), the
table sorted by any of its columns, and the longest and never-used tokens as chips.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

import bpe
from bpe.evaluate import Evaluation as BpeEvaluation
from webapp.jobs.evaluations import status_of
from webapp.rendering.token_display import token_infos, token_view
from webapp.storage.browse import Page
from webapp.storage.evaluations import candidates, rows_of_corpus
from webapp.storage.list_queries import Paging
from webapp.storage.models import Corpus, EvaluationRow, JobStatus, Tokenizer

SORTS = {  # query value -> (label, key on an EvaluationView); the best first
    "bpt": ("bytes/token", lambda v: -(v.row.bytes_per_token or 0)),
    "cpt": ("chars/token", lambda v: -(v.chars_per_token or 0)),
    # Tokens per word where the corpus spaces its words, else per character (`fertility`).
    "tpw": ("tokens/word", lambda v: v.fertility[1] or float("inf")),
    "used": ("vocab used", lambda v: -(v.vocab_share or 0)),
    "tokens": ("tokens", lambda v: v.row.tokens or float("inf")),
    "name": ("tokeniser", lambda v: v.name.lower()),
}


@dataclass(frozen=True)
class EvaluationView:
    """A row of the corpus page's table."""

    row: EvaluationRow
    tokenizer: Tokenizer
    status: JobStatus

    @property
    def name(self) -> str:
        t = self.tokenizer
        if t.imported:
            return t.reference or t.source_name or t.source_filename or "imported"
        return f"{t.mode} · {t.vocab_size:,}"

    @property
    def chars_per_token(self) -> float | None:
        r = self.row
        return r.characters / r.tokens if r.tokens and r.characters is not None else None

    @property
    def tokens_per_word(self) -> float | None:
        """None where the corpus does not separate words with spaces (bpe.scripts)."""
        r = self.row
        if r.spaced is False:
            return None
        return r.tokens / r.words if r.words and r.tokens is not None else None

    @property
    def fertility(self) -> tuple[str, float | None]:
        """("tokens/word", value) where words are spaced, else ("tokens/char", value)."""
        r = self.row
        if r.spaced is False:
            chars = r.characters
            return "tokens/char", (r.tokens / chars if chars and r.tokens is not None else None)
        return "tokens/word", self.tokens_per_word

    @property
    def vocab_share(self) -> float | None:
        r = self.row
        return r.used / r.vocab_size if r.vocab_size and r.used is not None else None

    @property
    def never_used_count(self) -> int | None:
        return None if self.row.never_used is None else len(self.row.never_used) // 4


def evaluations_of_corpus(
    session: Session, corpus_id: int, *, sort: str = "bpt", owner_id: int | None = None
) -> list[EvaluationView]:
    views = [
        EvaluationView(r, r.tokenizer, status_of(r))
        for r in rows_of_corpus(session, corpus_id, owner_id=owner_id)
    ]
    key = SORTS.get(sort, SORTS["bpt"])[1]
    done = sorted((v for v in views if v.row.tokens is not None), key=key)
    return done + [v for v in views if v.row.tokens is None]


def table_context(
    session: Session, corpus: Corpus, sort: str, *, owner_id: int | None = None
) -> dict[str, Any]:
    """What the corpus page's evaluation table needs; an unknown sort is the default one."""
    if sort not in SORTS:
        sort = "bpt"
    views = evaluations_of_corpus(session, corpus.id, sort=sort, owner_id=owner_id)
    unspaced = any(v.row.spaced is False for v in views)
    sorts = dict(SORTS)
    if unspaced:  # one corpus: every finished row is measured on the same text
        sorts["tpw"] = ("tokens/char", SORTS["tpw"][1])
    return {
        "evaluations": views,
        "sort": sort,
        "sorts": sorts,
        "best_bpt": max((v.row.bytes_per_token or 0 for v in views), default=0),
        "active": any(v.status in (JobStatus.QUEUED, JobStatus.RUNNING) for v in views),
        "candidates": candidates(session, owner_id=owner_id),
    }


NEVER_USED_PER_PAGE = 200  # a page of the never-used grid: a screen or two of chips


def never_page_arg(values: Any) -> int:
    """The never-used grid's page (`never_page`, from 1); a 400 for anything else."""
    return Paging.from_args({"page": values.get("never_page", "")}).page


def token_lists(
    tok: bpe.Tokenizer, figures: BpeEvaluation | None, *, never_page: int = 1
) -> dict[str, Any]:
    """The longest tokens used (with counts) and one page of the never-used ones (by id), as
    chips; what an evaluation's page lists under its figures. A page past the last is a 404."""
    if figures is None:
        return {"longest": [], "never_views": [], "never_total": 0, "never_page": None}
    longest_ids = [i for i, _ in figures.longest]
    page = Page(
        rows=[],
        total=len(figures.never_used),
        paging=Paging(page=never_page, per_page=NEVER_USED_PER_PAGE),
    )
    if page.total:
        page = page.must_exist()
    first = (never_page - 1) * NEVER_USED_PER_PAGE
    shown = figures.never_used[first : first + NEVER_USED_PER_PAGE]
    return {
        "longest": [
            (token_view(info, whitespace=True), count)
            for info, (_, count) in zip(token_infos(tok, longest_ids), figures.longest, strict=True)
        ],
        "never_views": [token_view(info, whitespace=True) for info in token_infos(tok, shown)],
        "never_total": page.total,
        "never_page": page,
        "never_first": first + 1,
    }
