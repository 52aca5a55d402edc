"""Evaluations: one tokeniser measured on one corpus (`bpe.evaluate`), as a background job.

This module is the evaluations' queue: asking for one (with the queue's limits), cancelling,
claiming, recovering. What the pages read of an evaluation is `webapp.storage.evaluations`, and
how it is shown `webapp.rendering.evaluations`.
The task and the runner that executes it live with the other jobs, in
`webapp/jobs/evaluation_runner.py`. An evaluation left `running` by a dead process is shown as
`interrupted` once its heartbeat is older than STALE_AFTER, and can be asked for again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from webapp.refusals import UserError
from webapp.storage.db import Database, execute_update
from webapp.storage.models import ACTIVE_STATUSES, Corpus, EvaluationRow, JobStatus, utcnow

STALE_AFTER = timedelta(seconds=30)


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
            select(EvaluationRow).where(
                EvaluationRow.tokenizer_id == tokenizer_id, EvaluationRow.corpus_id == corpus_id
            )
        )
        if row is not None and status_of(row) in (JobStatus.QUEUED, JobStatus.RUNNING):
            return row.id
        _admit(session, owner_id, limits)
        if row is None:
            row = EvaluationRow(tokenizer_id=tokenizer_id, corpus_id=corpus_id)
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
    active = EvaluationRow.status.in_([s.value for s in ACTIVE_STATUSES])
    if owner_id is not None and limits.per_owner is not None:
        mine = session.scalar(
            select(func.count())
            .select_from(EvaluationRow)
            .where(active, EvaluationRow.owner_id == owner_id)
        )
        if (mine or 0) >= limits.per_owner:
            raise EvaluationQueueFull(
                f"You already have {mine} evaluation{'s' if mine != 1 else ''} queued or running,"
                f" and one owner may have at most {limits.per_owner} at once. Wait for one to"
                " finish, or cancel one."
            )
    if limits.max_queued is not None:
        waiting = session.scalar(select(func.count()).select_from(EvaluationRow).where(active))
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
            update(EvaluationRow)
            .where(
                EvaluationRow.id == evaluation_id, EvaluationRow.status == JobStatus.QUEUED.value
            )
            .values(status=JobStatus.CANCELLED.value, finished_at=utcnow())
        )
        session.execute(
            update(EvaluationRow)
            .where(
                EvaluationRow.id == evaluation_id, EvaluationRow.status == JobStatus.RUNNING.value
            )
            .values(cancel_requested=True)
        )


def status_of(row: EvaluationRow) -> JobStatus:
    """The row's status, with a `running` row whose heartbeat went stale shown interrupted."""
    status = JobStatus(row.status)
    beat = row.heartbeat_at or row.started_at
    if status == JobStatus.RUNNING and beat is not None and utcnow() - beat > STALE_AFTER:
        return JobStatus.INTERRUPTED
    return status


def claim_next(database: Database) -> int | None:
    with database.session_scope() as session:
        row = session.scalar(
            select(EvaluationRow)
            .where(EvaluationRow.status == JobStatus.QUEUED.value)
            .order_by(EvaluationRow.created_at, EvaluationRow.id)
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
            update(EvaluationRow)
            .where(
                EvaluationRow.id == evaluation_id, EvaluationRow.status == JobStatus.QUEUED.value
            )
            .values(status=JobStatus.RUNNING.value, started_at=now, heartbeat_at=now),
        )
        return taken.rowcount == 1


def mark_unsent(database: Database, evaluation_id: int) -> None:
    """The queue could not take it: the row says so instead of waiting forever."""
    with database.session_scope() as session:
        session.execute(
            update(EvaluationRow)
            .where(
                EvaluationRow.id == evaluation_id, EvaluationRow.status == JobStatus.QUEUED.value
            )
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
            update(EvaluationRow)
            .where(EvaluationRow.status == JobStatus.RUNNING.value)
            .values(status=JobStatus.INTERRUPTED.value, error="The server stopped during it.")
        )
