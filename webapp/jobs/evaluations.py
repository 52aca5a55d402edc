"""Evaluations: one tokeniser measured on one corpus (`bpe.evaluate`), as a job kind.

- `EVALUATION` is the kind (`evaluations` rows; webapp/jobs/kind.py): the runner and the Celery
  task run it like any other job, in a child process, one at a time in the embedded runner.
- `request_evaluation` queues one (again, unless it is queued or running now) within the
  queue's `Limits`; `run_evaluation` is the task: read the corpus and the tokeniser, evaluate
  with progress (characters done) and a heartbeat, stop when the row's `cancel_requested` is
  set, record the figures or the reason.
- `Evaluations` is what the pages ask (`get_evaluations()`): queue one and hand it to the
  app's job backend, cancel one.

What the pages read of an evaluation is `webapp.storage.evaluations`, and how it is shown
`webapp.rendering.evaluations`. An evaluation left `running` by a dead process is shown as
`interrupted` once its heartbeat is older than STALE_AFTER, and can be asked for again.
"""

from __future__ import annotations

import json
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bpe.evaluate import EvaluationCancelled, evaluate
from webapp.jobs.backend import JobBackend
from webapp.jobs.kind import DEFAULT_LIMITS, JobKind, QueueLimits
from webapp.jobs.store import JobRows
from webapp.refusals import UserError
from webapp.storage.convert import load_tokenizer
from webapp.storage.db import Database
from webapp.storage.models import (
    ACTIVE_STATUSES,
    Corpus,
    EvaluationRow,
    JobStatus,
    Tokenizer,
    utcnow,
)

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
        row.script = row.spaced = None
        row.status, row.chars_done, row.chars_total = JobStatus.QUEUED.value, 0, total
        row.cancel_requested, row.created_at = False, utcnow()
        row.started_at = row.finished_at = row.heartbeat_at = None
        session.flush()
        return row.id


def _admit(session: Session, owner_id: int | None, limits: Limits) -> None:
    """Refuse one more evaluation beyond the owner's limit or the queue's (one visitor
    may not fill the queue for everyone). Runs inside the inserting transaction."""
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


def status_of(row: EvaluationRow) -> JobStatus:
    """The row's status, with a `running` row whose heartbeat went stale shown interrupted."""
    status = JobStatus(row.status)
    beat = row.heartbeat_at or row.started_at
    if status == JobStatus.RUNNING and beat is not None and utcnow() - beat > STALE_AFTER:
        return JobStatus.INTERRUPTED
    return status


def request_cancel(database: Database, evaluation_id: int) -> bool:
    """Stop a running evaluation (its process sees the flag) or drop a queued one at once; a
    finished one is left as it is (False)."""
    return EvaluationRows(database).request_cancel(evaluation_id)


def claim_next(database: Database) -> int | None:
    return EvaluationRows(database).claim_next()


def claim(database: Database, evaluation_id: int) -> bool:
    """Take this queued evaluation to run it; False if it is not queued any more (cancelled, or
    a duplicate message for one that ran)."""
    return EvaluationRows(database).claim(evaluation_id, stale_after=STALE_AFTER.total_seconds())


# ----- the task ----------------------------------------------------------------------------------
def run_evaluation(
    database: Database,
    evaluation_id: int,
    *,
    interval: float = 0.25,
    stop: Callable[[], bool] | None = None,
) -> JobStatus | None:
    """Evaluate (the row is `running`) and record how it ended; returns that status."""
    with database.read_scope() as session:
        row = session.get(EvaluationRow, evaluation_id)
        if row is None:
            return None
        tokenizer = session.get_one(Tokenizer, row.tokenizer_id)
        tok = load_tokenizer(session, tokenizer)
        text = session.execute(select(Corpus.text).where(Corpus.id == row.corpus_id)).scalar_one()
    rows = EvaluationRows(database)
    last = [0.0]

    def write(values: dict[str, Any]) -> None:
        with database.session_scope() as session:
            session.execute(
                update(EvaluationRow).where(EvaluationRow.id == evaluation_id).values(**values)
            )

    cancelled = [False]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            cancelled[0] = rows.beat(evaluation_id, chars_done=done)

    def should_stop() -> bool:
        return cancelled[0] or (stop is not None and stop())

    try:
        result = evaluate(tok, [text], progress=progress, should_stop=should_stop)
    except EvaluationCancelled:
        write({"status": JobStatus.CANCELLED.value, "finished_at": utcnow()})
        return JobStatus.CANCELLED
    except Exception as exc:  # noqa: BLE001 - recorded for the reader of the corpus page
        error = f"evaluation failed: {type(exc).__name__}: {exc}"
        write({"status": JobStatus.FAILED.value, "error": error, "finished_at": utcnow()})
        return JobStatus.FAILED
    write(
        {
            "status": JobStatus.SUCCEEDED.value,
            "finished_at": utcnow(),
            "chars_done": result.characters,
            "byte_count": result.bytes,
            "characters": result.characters,
            "words": result.words,
            "tokens": result.tokens,
            "vocab_size": result.vocab_size,
            "used": result.used,
            "bytes_per_token": result.bytes_per_token,
            "seconds": result.seconds,
            "never_used": array("I", result.never_used).tobytes(),
            "longest": json.dumps([list(pair) for pair in result.longest]),
            "script": result.script,
            "spaced": result.spaced,
        }
    )
    return JobStatus.SUCCEEDED


# ----- the kind ----------------------------------------------------------------------------------
class EvaluationRows(JobRows):
    """The `evaluations` rows as a queue, with its own admission (`Limits`)."""

    def __init__(self, database: Database, *, limits: Limits = Limits()) -> None:
        super().__init__(
            database, EvaluationRow, interrupted_message="The server stopped during it."
        )
        self.limits = limits

    def submit(self, *, tokenizer_id: int, corpus_id: int, owner_id: int | None = None) -> int:
        return request_evaluation(
            self.database,
            tokenizer_id=tokenizer_id,
            corpus_id=corpus_id,
            owner_id=owner_id,
            limits=self.limits,
        )


class EvaluationKind(JobKind):
    name = "evaluation"
    model = EvaluationRow
    process_name = "evaluate"
    noun = "evaluation"
    # The tests' manual execution steps trainings only; an evaluation runs when it is asked for.
    waits_in_manual = False
    interrupted_message = "The server stopped during it."

    def make_rows(self, database: Database, limits: QueueLimits = DEFAULT_LIMITS) -> EvaluationRows:
        # The training queue's limits, for a queue of its own.
        return EvaluationRows(
            database,
            limits=Limits(
                per_owner=limits.per_owner, max_queued=limits.max_running + limits.max_queued
            ),
        )

    def run(
        self,
        rows: JobRows,
        job_id: int,
        *,
        interval: float,
        stop: Callable[[], bool] | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> JobStatus | None:
        return run_evaluation(rows.database, job_id, interval=interval, stop=stop)

    def died(self, exitcode: int | None) -> tuple[JobStatus, str]:
        return JobStatus.INTERRUPTED, f"The evaluation process ended early (exit code {exitcode})."

    def unsent(self, rows: JobRows, job_id: int) -> None:
        rows.mark_unsent(job_id, "The job queue could not be reached; evaluate again.")


EVALUATION = EvaluationKind()


class Evaluations:
    """What the pages ask of evaluations; the app's job backend runs them."""

    def __init__(self, backend: JobBackend) -> None:
        self.backend = backend

    @property
    def rows(self) -> EvaluationRows:
        return self.backend.rows_of(EVALUATION.name, EvaluationRows)

    def submit(self, *, tokenizer_id: int, corpus_id: int, owner_id: int | None = None) -> int:
        """Queue (or re-queue) this tokeniser on this corpus; EvaluationQueueFull (429) beyond
        the limits, a 503 if the broker cannot take it or no job can run now."""
        self.backend.admit()
        evaluation_id = self.rows.submit(
            tokenizer_id=tokenizer_id, corpus_id=corpus_id, owner_id=owner_id
        )
        self.backend.queued(EVALUATION.name, [evaluation_id])
        return evaluation_id

    def request_cancel(self, evaluation_id: int) -> bool:
        return self.backend.cancel(EVALUATION.name, evaluation_id)
