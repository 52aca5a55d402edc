"""Evaluations: one tokeniser measured on one corpus (`bpe.evaluate`), as a background job.

This module owns every query on the `evaluations` table: asking for one (with the queue's
limits), cancelling, claiming, and what the corpus page's table and an evaluation's page read.
The task and the runner that executes it live with the other jobs, in
`webapp/jobs/evaluation_runner.py`. An evaluation left `running` by a dead process is shown as
`interrupted` once its heartbeat is older than STALE_AFTER, and can be asked for again.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, joinedload

from bpe.evaluate import Evaluation as BpeEvaluation
from webapp.db import Database, execute_update
from webapp.errors import UserError
from webapp.models import ACTIVE_STATUSES, Corpus, Evaluation, JobStatus, Tokenizer, utcnow
from webapp.token_display import token_infos, token_view

STALE_AFTER = timedelta(seconds=30)
SORTS = {  # query value -> (label, key on an EvaluationView); the best first
    "bpt": ("bytes/token", lambda v: -(v.row.bytes_per_token or 0)),
    "cpt": ("chars/token", lambda v: -(v.chars_per_token or 0)),
    "tpw": ("tokens/word", lambda v: v.tokens_per_word or float("inf")),
    "used": ("vocab used", lambda v: -(v.vocab_share or 0)),
    "tokens": ("tokens", lambda v: v.row.tokens or float("inf")),
    "name": ("tokeniser", lambda v: v.name.lower()),
}


class EvaluationQueueFull(UserError):
    status = 429


@dataclass(frozen=True)
class Limits:
    """How many evaluations may wait: one owner's (None: no limit) and everyone's together."""

    per_owner: int | None = None
    max_queued: int | None = None


# ----- the store ---------------------------------------------------------------------------------
def request_evaluation(
    database: Database,
    *,
    tokenizer_id: int,
    corpus_id: int,
    owner_id: int | None = None,
    limits: Limits = Limits(),
) -> int:
    """Queue this tokeniser on this corpus (again, unless it is queued or running now), asked
    for by `owner_id`; EvaluationQueueFull (429) beyond `limits`, nothing queued then."""
    with database.session_scope() as session:
        row = session.scalar(
            select(Evaluation).where(
                Evaluation.tokenizer_id == tokenizer_id, Evaluation.corpus_id == corpus_id
            )
        )
        if row is not None and status_of(row) in (JobStatus.QUEUED, JobStatus.RUNNING):
            return row.id
        _admit(session, owner_id, limits)
        if row is None:
            row = Evaluation(tokenizer_id=tokenizer_id, corpus_id=corpus_id)
            session.add(row)
        row.owner_id = owner_id
        total = session.scalar(select(Corpus.char_count).where(Corpus.id == corpus_id)) or 0
        for name in ("byte_count", "characters", "words", "tokens", "vocab_size", "used"):
            setattr(row, name, None)
        row.bytes_per_token = row.seconds = row.never_used = row.longest = row.error = None
        row.status, row.chars_done, row.chars_total = JobStatus.QUEUED.value, 0, total
        row.cancel_requested, row.created_at = False, utcnow()
        row.started_at = row.finished_at = row.heartbeat_at = None
        session.flush()
        return row.id


def _admit(session: Session, owner_id: int | None, limits: Limits) -> None:
    """Refuse one more evaluation beyond the owner's limit or the queue's (issue 8: one
    visitor may not fill the queue for everyone). Runs inside the inserting transaction."""
    active = Evaluation.status.in_([s.value for s in ACTIVE_STATUSES])
    if owner_id is not None and limits.per_owner is not None:
        mine = session.scalar(
            select(func.count())
            .select_from(Evaluation)
            .where(active, Evaluation.owner_id == owner_id)
        )
        if (mine or 0) >= limits.per_owner:
            raise EvaluationQueueFull(
                f"You already have {mine} evaluation{'s' if mine != 1 else ''} queued or running,"
                f" and one owner may have at most {limits.per_owner} at once. Wait for one to"
                " finish, or cancel one."
            )
    if limits.max_queued is not None:
        waiting = session.scalar(select(func.count()).select_from(Evaluation).where(active))
        if (waiting or 0) >= limits.max_queued:
            raise EvaluationQueueFull(
                f"The evaluation queue is full ({limits.max_queued} queued or running). Try"
                " again when one has finished."
            )


def request_cancel(database: Database, evaluation_id: int) -> None:
    """Stop a running evaluation (its process sees the flag) or drop a queued one at once; a
    finished one is left as it is."""
    with database.session_scope() as session:
        session.execute(
            update(Evaluation)
            .where(Evaluation.id == evaluation_id, Evaluation.status == JobStatus.QUEUED.value)
            .values(status=JobStatus.CANCELLED.value, finished_at=utcnow())
        )
        session.execute(
            update(Evaluation)
            .where(Evaluation.id == evaluation_id, Evaluation.status == JobStatus.RUNNING.value)
            .values(cancel_requested=True)
        )


def status_of(row: Evaluation) -> JobStatus:
    """The row's status, with a `running` row whose heartbeat went stale shown interrupted."""
    status = JobStatus(row.status)
    beat = row.heartbeat_at or row.started_at
    if status == JobStatus.RUNNING and beat is not None and utcnow() - beat > STALE_AFTER:
        return JobStatus.INTERRUPTED
    return status


def claim_next(database: Database) -> int | None:
    with database.session_scope() as session:
        row = session.scalar(
            select(Evaluation)
            .where(Evaluation.status == JobStatus.QUEUED.value)
            .order_by(Evaluation.created_at, Evaluation.id)
            .limit(1)
        )
        if row is None:
            return None
        row.status, row.started_at, row.heartbeat_at = JobStatus.RUNNING.value, utcnow(), utcnow()
        return row.id


def claim(database: Database, evaluation_id: int) -> bool:
    """Take this queued evaluation to run it (a Celery worker); False if it is not queued any
    more (cancelled, or a duplicate message for one that ran). One UPDATE, so two workers
    given the same id cannot both run it."""
    with database.session_scope() as session:
        now = utcnow()
        taken = execute_update(
            session,
            update(Evaluation)
            .where(Evaluation.id == evaluation_id, Evaluation.status == JobStatus.QUEUED.value)
            .values(status=JobStatus.RUNNING.value, started_at=now, heartbeat_at=now),
        )
        return taken.rowcount == 1


def mark_unsent(database: Database, evaluation_id: int) -> None:
    """The queue could not take it: the row says so instead of waiting forever."""
    with database.session_scope() as session:
        session.execute(
            update(Evaluation)
            .where(Evaluation.id == evaluation_id, Evaluation.status == JobStatus.QUEUED.value)
            .values(
                status=JobStatus.FAILED.value,
                error="The job queue could not be reached; evaluate again.",
                finished_at=utcnow(),
            )
        )


def recover(database: Database) -> None:
    """Start-up of the runner: what a dead runner left running is interrupted."""
    with database.session_scope() as session:
        session.execute(
            update(Evaluation)
            .where(Evaluation.status == JobStatus.RUNNING.value)
            .values(status=JobStatus.INTERRUPTED.value, error="The server stopped during it.")
        )


@dataclass(frozen=True)
class EvaluationView:
    """A row of the corpus page's table."""

    row: Evaluation
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
        r = self.row
        return r.tokens / r.words if r.words and r.tokens is not None else None

    @property
    def vocab_share(self) -> float | None:
        r = self.row
        return r.used / r.vocab_size if r.vocab_size and r.used is not None else None

    @property
    def never_used_count(self) -> int | None:
        return None if self.row.never_used is None else len(self.row.never_used) // 4


def _visible(owner_id: int | None):
    """References (public) and the visitor's own tokenisers: a corpus page lists no other's."""
    return Tokenizer.reference.is_not(None) | (
        (Tokenizer.owner_id == owner_id) if owner_id is not None else False
    )


def _evaluation_visible(owner_id: int | None):
    """An evaluation is shown to a visitor who may see its tokeniser, or who asked for it (they
    had the tokeniser's link then); to nobody else, so no list hands out another's link."""
    if owner_id is None:
        return _visible(owner_id)
    return _visible(owner_id) | (Evaluation.owner_id == owner_id)


def evaluations_of_corpus(
    session: Session, corpus_id: int, *, sort: str = "bpt", owner_id: int | None = None
) -> list:
    rows = session.scalars(
        select(Evaluation)
        .join(Tokenizer, Tokenizer.id == Evaluation.tokenizer_id)
        .where(
            Evaluation.corpus_id == corpus_id,
            Tokenizer.deleted_at.is_(None),
            _evaluation_visible(owner_id),
        )
        .options(joinedload(Evaluation.tokenizer))
    ).all()
    views = [EvaluationView(r, r.tokenizer, status_of(r)) for r in rows]
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
    return {
        "evaluations": views,
        "sort": sort,
        "sorts": SORTS,
        "best_bpt": max((v.row.bytes_per_token or 0 for v in views), default=0),
        "active": any(v.status in (JobStatus.QUEUED, JobStatus.RUNNING) for v in views),
        "candidates": candidates(session, owner_id=owner_id),
    }


def get_evaluation(
    session: Session, corpus_id: int, evaluation_id: int, *, owner_id: int | None | bool
) -> Evaluation | None:
    """The evaluation, if this visitor may see it (see `_evaluation_visible`): ids are
    sequential, so to anyone else it is missing, like another owner's job. `owner_id=True`:
    whoever may see it (a change then asks for its owner, and says 403 to anyone else)."""
    query = (
        select(Evaluation)
        .join(Tokenizer, Tokenizer.id == Evaluation.tokenizer_id)
        .where(
            Evaluation.id == evaluation_id,
            Evaluation.corpus_id == corpus_id,
            Tokenizer.deleted_at.is_(None),
        )
        .options(joinedload(Evaluation.tokenizer))
    )
    if owner_id is not True:
        query = query.where(_evaluation_visible(owner_id))
    return session.scalar(query)


def never_used_ids(row: Evaluation) -> list[int]:
    ids = array("I")
    ids.frombytes(row.never_used or b"")
    return ids.tolist()


def longest_pairs(row: Evaluation) -> list[tuple[int, int]]:
    return [(int(i), int(c)) for i, c in json.loads(row.longest or "[]")]


def candidates(session: Session, *, owner_id: int | None = None) -> list[Tokenizer]:
    """The references and the visitor's own live tokenisers, references first: what a corpus
    can be evaluated with (issue 8: no list hands out another owner's link)."""
    return list(
        session.scalars(
            select(Tokenizer)
            .where(Tokenizer.deleted_at.is_(None), _visible(owner_id))
            .order_by(Tokenizer.reference.is_(None), Tokenizer.id.desc())
            .limit(200)
        )
    )


# ----- figures, wherever they were measured -------------------------------------------------------
def figures_of(row: Evaluation) -> BpeEvaluation | None:
    """A finished evaluation's figures as `bpe.evaluate` returns them; None until then."""
    if row.tokens is None:
        return None
    return BpeEvaluation(
        bytes=row.byte_count or 0,
        characters=row.characters or 0,
        words=row.words or 0,
        tokens=row.tokens,
        vocab_size=row.vocab_size or 0,
        used=row.used or 0,
        never_used=never_used_ids(row),
        longest=longest_pairs(row),
        seconds=row.seconds or 0.0,
    )


FIGURE_KEYS = (
    "bytes",
    "characters",
    "words",
    "tokens",
    "bytes_per_token",
    "chars_per_token",
    "tokens_per_word",
    "vocab_size",
    "used",
    "vocab_share",
    "never_used",
    "longest",
    "seconds",
)


def figures_json(figures: BpeEvaluation | None) -> dict[str, Any]:
    """The figures as the JSON API gives them (nulls, and empty lists, until measured)."""
    if figures is None:
        return {k: [] if k in ("never_used", "longest") else None for k in FIGURE_KEYS}
    data = figures.to_dict()
    return {k: data[k] for k in FIGURE_KEYS}


NEVER_USED_SHOWN = 500


def token_lists(tok, figures: BpeEvaluation | None) -> dict[str, Any]:
    """The longest tokens used (with counts) and the first NEVER_USED_SHOWN never-used ones, as
    chips; what an evaluation's page lists under its figures."""
    if figures is None:
        return {"longest": [], "never_views": [], "never_total": 0}
    longest_ids = [i for i, _ in figures.longest]
    return {
        "longest": [
            (token_view(info, whitespace=True), count)
            for info, (_, count) in zip(token_infos(tok, longest_ids), figures.longest, strict=True)
        ],
        "never_views": [
            token_view(info, whitespace=True)
            for info in token_infos(tok, figures.never_used[:NEVER_USED_SHOWN])
        ],
        "never_total": len(figures.never_used),
    }
