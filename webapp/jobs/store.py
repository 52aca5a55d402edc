"""The job store: every query on job rows, for the web and for whatever runs the jobs.

- `JobRows` is one kind's queue on its table (webapp/jobs/kind.py): claim, heartbeat, cancel,
  finish, recovery and the stale sweep, written once for every kind. `JobStore` adds what is
  the training jobs' own (`training_jobs`): admission, re-runs, progress, the result.
- Statuses are `JobStatus` values; a job moves queued -> running -> one finished status, and
  every move is a conditional UPDATE (`WHERE status = ...`), so two processes racing for the
  same job cannot both win.
- Admission (how many jobs may be running or waiting) is counted and enforced inside the same
  write transaction that inserts the jobs. The write path is serialised by the database (SQLite
  BEGIN IMMEDIATE, a PostgreSQL advisory lock; see webapp/storage/db.py), so the limits hold
  across any number of web processes and machines.
- Progress, heartbeats and the result are written by the job itself (e.g. webapp/jobs/task.py),
  in whichever process or machine runs it; a training's result and its status in one
  transaction.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.orm import Session

import bpe
from webapp.jobs.settings import JobSettings, check_fits_corpus
from webapp.refusals import UserError
from webapp.storage.convert import store_tokenizer
from webapp.storage.db import Database, execute_update
from webapp.storage.models import (
    ACTIVE_STATUSES,
    FINISHED_STATUSES,
    Corpus,
    CorpusStats,
    JobStatus,
    TrainingJob,
    db_now,
    utcnow,
)

INTERRUPTED_MESSAGE = "The server stopped while this job was running. Run it again to retry."
STALE_MESSAGE = (
    "The worker running this job stopped answering (no heartbeat). Run it again to retry."
)


class JobQueueFull(UserError):
    status = 429


@dataclass
class Update:
    """The latest progress of a running job, as it is written to the row."""

    merges_done: int = 0
    merges_target: int | None = None
    pair: str | None = None
    count: int | None = None
    phase: str | None = None  # webapp/jobs/progress.py PHASES
    estimate: float | None = None  # seconds of merging left; None until it can be honest
    estimate_range: tuple[float, float] | None = None  # (low, high) seconds, with estimate
    split: tuple[int, int] | None = None  # characters split so far, of all (while splitting)
    learning: str | None = None  # JSON: what the page draws (webapp/jobs/learning.py)


@dataclass
class Census:
    """One kind's jobs as /metrics reports them, all measured by the database's clock."""

    by_status: dict[str, int]
    durations: list[float]  # seconds from start to finish of each finished job that started
    heartbeat_ages: dict[str, float]  # "host:pid" of each worker running one -> its newest beat


def database_clock(session: Session) -> datetime:
    """The database's time now: every machine's heartbeats and claims are judged by this one
    clock."""
    return session.execute(select(db_now())).scalar_one()


class JobRows:
    """The queue of one kind of job: its table's rows, as every kind's machinery moves them.

    A kind's table has the job columns: `id`, `status` (a `JobStatus` value),
    `cancel_requested`, `created_at`, `started_at`, `heartbeat_at`, `finished_at`, `error`
    (and `elapsed_seconds` if it keeps one). Claiming, finishing, cancelling, recovery and the
    stale sweep are written here once for all of them (docs/internals.md, "Jobs"). Safe to
    share between threads; holds no ORM objects.
    """

    def __init__(
        self,
        database: Database,
        model: type[Any],
        *,
        max_running: int = 1,
        interrupted_message: str = INTERRUPTED_MESSAGE,
    ) -> None:
        self.database = database
        self.model = model
        self.max_running = max_running  # how many of this kind one runner runs at once
        self.interrupted_message = interrupted_message
        self._keeps_elapsed = hasattr(model, "elapsed_seconds")
        # Optional job columns (migration 0018): where a job ran, and its message's sendings
        # (a kind without them is never sent again by the sweep).
        self._keeps_worker = hasattr(model, "worker_host") and hasattr(model, "worker_pid")
        self._keeps_sends = hasattr(model, "sent_at") and hasattr(model, "send_count")

    def _start_values(self) -> dict[str, Any]:
        """Columns a claim resets besides the status and times (a kind's progress)."""
        return {}

    def _queue_order(self) -> tuple[Any, ...]:
        return (self.model.created_at, self.model.id)

    # ----- for runners -----------------------------------------------------------------------
    def claim_next(self) -> int | None:
        """Oldest queued job -> running. Returns its id, or None when the queue is empty."""
        model = self.model
        with self.database.session_scope() as session:
            job_id = session.scalar(
                select(model.id)
                .where(model.status == JobStatus.QUEUED)
                .order_by(*self._queue_order())
                .limit(1)
            )
            if job_id is None:
                return None
            if not self._start(session, job_id, model.status == JobStatus.QUEUED):
                return None
            return int(job_id)

    def claim(self, job_id: int, *, stale_after: float) -> bool:
        """This job -> running, for a worker handed its id. False if someone else has it.

        A job still `running` whose heartbeat is older than `stale_after` seconds was left by
        a worker that died (its message was delivered again): it is taken over. One
        conditional UPDATE, so of two deliveries of the same message only one wins.
        """
        model = self.model
        with self.database.session_scope() as session:
            cutoff = self._clock(session) - timedelta(seconds=stale_after)
            beat = func.coalesce(model.heartbeat_at, model.started_at)
            claimable = (model.status == JobStatus.QUEUED) | (
                (model.status == JobStatus.RUNNING) & (beat < cutoff)
            )
            return self._start(session, job_id, claimable)

    @staticmethod
    def _clock(session: Session) -> datetime:
        return database_clock(session)

    def _start(
        self, session: Session, job_id: int, condition: ColumnElement[bool] | None = None
    ) -> bool:
        model = self.model
        statement = update(model).where(model.id == job_id)
        if condition is not None:
            statement = statement.where(condition)
        values = self._start_values()
        if self._keeps_worker:
            values.update(worker_host=socket.gethostname()[:255], worker_pid=os.getpid())
        result = execute_update(
            session,
            statement.values(
                status=JobStatus.RUNNING, started_at=db_now(), heartbeat_at=db_now(), **values
            ),
        )
        return bool(result.rowcount)

    def status(self, job_id: int) -> JobStatus | None:
        with self.database.read_scope() as session:
            value = session.scalar(select(self.model.status).where(self.model.id == job_id))
            return None if value is None else JobStatus(value)

    def beat(self, job_id: int, **progress: Any) -> bool:
        """A heartbeat on a running job, with any progress columns of its kind's; returns
        whether a cancel has been requested (so a job sees a cancel at its next write)."""
        model = self.model
        with self.database.session_scope() as session:
            session.execute(
                update(model)
                .where(model.id == job_id, model.status == JobStatus.RUNNING)
                .values(heartbeat_at=db_now(), **progress)
            )
            return bool(session.scalar(select(model.cancel_requested).where(model.id == job_id)))

    def cancel_requested(self, job_id: int) -> bool:
        model = self.model
        with self.database.read_scope() as session:
            return bool(session.scalar(select(model.cancel_requested).where(model.id == job_id)))

    def cancels_among(self, job_ids: Iterable[int]) -> set[int]:
        """Which of these jobs have a cancel request (one query for a runner's children)."""
        ids = list(job_ids)
        if not ids:
            return set()
        model = self.model
        with self.database.read_scope() as session:
            return set(
                session.scalars(
                    select(model.id).where(model.id.in_(ids), model.cancel_requested.is_(True))
                )
            )

    def finish(
        self,
        job_id: int,
        status: JobStatus,
        *,
        error: str | None = None,
        elapsed: float | None = None,
    ) -> bool:
        """A running job -> a finished status. False if it was not running any more."""
        values: dict[str, Any] = {"status": status, "finished_at": utcnow(), "error": error}
        if elapsed is not None and self._keeps_elapsed:
            values["elapsed_seconds"] = elapsed
        model = self.model
        with self.database.session_scope() as session:
            result = execute_update(
                session,
                update(model)
                .where(model.id == job_id, model.status == JobStatus.RUNNING)
                .values(**values),
            )
            return bool(result.rowcount)

    # ----- from requests -------------------------------------------------------------------------
    def request_cancel(self, job_id: int) -> bool:
        """Flag a queued or running job to stop (a queued one is cancelled at once).

        Returns False for a finished or missing job. Whoever runs the job sees the flag.
        """
        with self.database.session_scope() as session:
            job = session.get(self.model, job_id)
            if job is None or JobStatus(job.status) not in ACTIVE_STATUSES:
                return False
            job.cancel_requested = True
            if job.status == JobStatus.QUEUED:
                job.status = JobStatus.CANCELLED
                job.finished_at = utcnow()
            return True

    def mark_unsent(self, job_id: int, message: str) -> None:
        """The job queue (the broker) could not take it: the row says so instead of waiting."""
        model = self.model
        with self.database.session_scope() as session:
            session.execute(
                update(model)
                .where(model.id == job_id, model.status == JobStatus.QUEUED)
                .values(status=JobStatus.FAILED, error=message, finished_at=utcnow())
            )

    def mark_sent(self, job_ids: Iterable[int]) -> None:
        """Their messages went to the broker just now (what `to_resend` counts from)."""
        ids, model = list(job_ids), self.model
        if not ids or not self._keeps_sends:
            return
        with self.database.session_scope() as session:
            session.execute(
                update(model)
                .where(model.id.in_(ids), model.status == JobStatus.QUEUED)
                .values(sent_at=db_now(), send_count=model.send_count + 1)
            )

    def to_resend(self, after: float) -> list[int]:
        """Queued jobs whose message may have been lost: still unclaimed `after` seconds after
        their last sending, the wait doubling with each sending (up to 16 times `after`), so a
        job merely waiting its turn gets a few duplicates, not one per sweep."""
        model = self.model
        if not self._keeps_sends:
            return []
        with self.database.read_scope() as session:
            now = self._clock(session)
            rows = session.execute(
                select(model.id, func.coalesce(model.sent_at, model.created_at), model.send_count)
                .where(model.status == JobStatus.QUEUED)
                .order_by(*self._queue_order())
            ).all()
        return [
            int(job_id)
            for job_id, sent, count in rows
            if (now - sent).total_seconds() > after * 2 ** min(max(count - 1, 0), 4)
        ]

    # ----- for operators ------------------------------------------------------------------------
    def census(self) -> Census:
        model = self.model
        with self.database.read_scope() as session:
            now = self._clock(session)
            counted = session.execute(select(model.status, func.count()).group_by(model.status))
            by_status = {str(status): int(n) for status, n in counted.all()}
            spans = session.execute(
                select(model.started_at, model.finished_at).where(
                    model.status.in_([s.value for s in FINISHED_STATUSES]),
                    model.started_at.is_not(None),
                    model.finished_at.is_not(None),
                )
            ).all()
            beats: dict[str, float] = {}
            if self._keeps_worker:
                newest = session.execute(
                    select(model.worker_host, model.worker_pid, func.max(model.heartbeat_at))
                    .where(model.status == JobStatus.RUNNING, model.heartbeat_at.is_not(None))
                    .group_by(model.worker_host, model.worker_pid)
                ).all()
                beats = {
                    f"{host}:{pid}": (now - beat).total_seconds() for host, pid, beat in newest
                }
        durations = [max((end - start).total_seconds(), 0.0) for start, end in spans]
        return Census(by_status, durations, beats)

    # ----- recovery ----------------------------------------------------------------------------
    def recover(self) -> int:
        """Jobs left `running` by a previous process become `interrupted`; returns how many."""
        running = self.model.status == JobStatus.RUNNING
        return self._interrupt(lambda now: running, self.interrupted_message)

    def sweep_stale(self, older_than: float) -> int:
        """Running jobs whose heartbeat is older than `older_than` seconds -> `interrupted`."""
        model = self.model
        beat = func.coalesce(model.heartbeat_at, model.started_at)
        return self._interrupt(
            lambda now: (
                (model.status == JobStatus.RUNNING) & (beat < now - timedelta(seconds=older_than))
            ),
            STALE_MESSAGE,
        )

    def _interrupt(self, condition: Callable[[datetime], ColumnElement[bool]], message: str) -> int:
        """Jobs matching `condition(the database's time now)` -> `interrupted`."""
        with self.database.session_scope() as session:
            result = execute_update(
                session,
                update(self.model)
                .where(condition(self._clock(session)))
                .values(status=JobStatus.INTERRUPTED, error=message, finished_at=utcnow()),
            )
            return result.rowcount or 0


class JobStore(JobRows):
    """The training jobs' rows (`training_jobs`): their queue, and what a training reads and
    writes."""

    def __init__(
        self,
        database: Database,
        *,
        max_running: int = 1,
        max_queued: int = 8,
        per_owner: int | None = None,
    ) -> None:
        super().__init__(database, TrainingJob, max_running=max_running)
        self.max_queued = max_queued
        self.per_owner = per_owner  # jobs one owner may have queued or running (None: no limit)

    def _start_values(self) -> dict[str, Any]:
        # "reading" at once: the first report comes only after the corpus is read (seconds
        # for a large one), and a running job with no phase says nothing at all.
        # A job run again (a redelivered message) starts its drawings afresh.
        return {
            "merges_done": 0,
            "elapsed_seconds": 0.0,
            "phase": "reading",
            "split_done": None,
            "split_total": None,
            "learning": None,
        }

    def _queue_order(self) -> tuple[Any, ...]:
        return (TrainingJob.id,)

    # ----- from requests -------------------------------------------------------------------------
    def submit_many(
        self,
        corpus_id: int,
        settings: Sequence[JobSettings | Mapping[str, Any]],
        *,
        rerun_of: int | None = None,
        owner_id: int | None = None,
    ) -> list[int]:
        """Queue all of these jobs or none (JobQueueFull, 429): a half-queued pair only confuses."""
        values = [JobSettings.coerce(one) for one in settings]
        with self.database.session_scope() as session:
            alphabet = session.scalar(
                select(CorpusStats.word_alphabet_size).where(CorpusStats.corpus_id == corpus_id)
            )
            for one in values:
                check_fits_corpus(one, alphabet)
            self._admit(session, len(values), owner_id=owner_id)
            now = utcnow()
            jobs = [
                TrainingJob(
                    corpus_id=corpus_id,
                    owner_id=owner_id,
                    settings=one.to_json(),
                    status=JobStatus.QUEUED,
                    rerun_of_id=rerun_of,
                    created_at=now,
                )
                for one in values
            ]
            session.add_all(jobs)
            session.flush()
            return [job.id for job in jobs]

    def _admit(self, session: Session, wanted: int, *, owner_id: int | None) -> None:
        """Refuse `wanted` more jobs beyond the limits. Runs inside the inserting transaction.

        First the owner's own limit: one visitor may not fill the queue for everyone.
        """
        if owner_id is not None and self.per_owner is not None:
            mine = session.execute(
                select(func.count())
                .select_from(TrainingJob)
                .where(TrainingJob.owner_id == owner_id, TrainingJob.status.in_(ACTIVE_STATUSES))
            ).scalar_one()
            if mine + wanted > self.per_owner:
                raise JobQueueFull(
                    f"You already have {mine} job{'s' if mine != 1 else ''} queued or running,"
                    f" and one owner may have at most {self.per_owner} at once"
                    f"{f' (this needs {wanted})' if wanted > 1 else ''}. Wait for one to finish,"
                    " or cancel one."
                )
        counts = dict(
            session.execute(
                select(TrainingJob.status, func.count())
                .where(TrainingJob.status.in_(ACTIVE_STATUSES))
                .group_by(TrainingJob.status)
            ).all()
        )
        running, waiting = counts.get(JobStatus.RUNNING, 0), counts.get(JobStatus.QUEUED, 0)
        free = self.max_running + self.max_queued - running - waiting
        if free >= wanted:
            return
        if wanted == 1:
            # What the rows say, not the limits: under Celery the workers decide how many run,
            # so "1 running" could be false (docs/operations.md, "How many jobs run").
            raise JobQueueFull(
                f"The training queue is full ({running} running, {waiting} waiting; at most"
                f" {self.max_running + self.max_queued} at once). Try again when a job has"
                " finished, or cancel one."
            )
        raise JobQueueFull(
            f"The training queue has room for {max(free, 0)} more job{'s' if free != 1 else ''},"
            f" and a comparison needs {wanted}. Try again when a job has finished,"
            " or cancel one."
        )

    def rerun_source(self, job_id: int) -> tuple[int, JobSettings]:
        """The corpus and settings of a job that may be run again (UserError if it may not)."""
        with self.database.read_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None:
                raise LookupError(job_id)
            if not job.finished or job.status == JobStatus.SUCCEEDED:
                raise UserError("Only a failed, cancelled or interrupted job can be run again.")
            return job.corpus_id, JobSettings.from_json(job.settings)

    # ----- for the training -------------------------------------------------------------------
    def job_input(self, job_id: int) -> tuple[JobSettings, str]:
        """What a training needs: the settings and the corpus text, read from the database."""
        with self.database.read_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None:
                raise LookupError(f"job {job_id} does not exist")
            text = session.execute(
                select(Corpus.text).where(Corpus.id == job.corpus_id)
            ).scalar_one()
            return JobSettings.from_json(job.settings), text

    def write_progress(self, job_id: int, update_: Update | None, elapsed: float) -> bool:
        """Progress (if any) and a heartbeat; returns whether a cancel has been requested."""
        values: dict[str, Any] = {"elapsed_seconds": elapsed}
        if update_ is not None:
            values.update(
                merges_done=update_.merges_done,
                merges_target=update_.merges_target,
                current_pair=update_.pair,
                current_count=update_.count,
                estimate_seconds=update_.estimate,
                estimate_low=None if update_.estimate_range is None else update_.estimate_range[0],
                estimate_high=None if update_.estimate_range is None else update_.estimate_range[1],
                phase=update_.phase,
            )
            if update_.split is not None:
                values.update(split_done=update_.split[0], split_total=update_.split[1])
            if update_.learning is not None:
                values["learning"] = update_.learning
        return self.beat(job_id, **values)

    def store_result(self, job_id: int, tok: bpe.Tokenizer, elapsed: float) -> bool:
        """The tokeniser, its merges, its vocabulary and the job's status: one transaction.

        Idempotent on the job id: only a job still `running` without a tokeniser gets one, so
        a second delivery of the same job stores nothing. Returns whether this call stored it.
        """
        with self.database.session_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None or job.status != JobStatus.RUNNING or job.tokenizer_id is not None:
                return False
            if job.cancel_requested:
                job.status, job.finished_at = JobStatus.CANCELLED, utcnow()
                return False
            row = store_tokenizer(session, tok, corpus_id=job.corpus_id, owner_id=job.owner_id)
            job.status = JobStatus.SUCCEEDED
            job.phase = None  # a phase is what a running job is doing; this one is done
            job.tokenizer_id = row.id
            job.merges_done = len(tok.merges)
            if tok.training is not None:
                job.merges_target = max(len(tok.merges), job.merges_target or 0)
            job.elapsed_seconds = elapsed
            job.estimate_seconds = job.estimate_low = job.estimate_high = 0.0
            job.finished_at = job.heartbeat_at = utcnow()
            return True


# ----- reads for pages, on the request's session ---------------------------------------------
def job_of_corpus(session: Session, corpus_id: int, job_id: int) -> TrainingJob | None:
    return session.scalar(
        select(TrainingJob).where(TrainingJob.id == job_id, TrainingJob.corpus_id == corpus_id)
    )


def jobs_of_corpus(
    session: Session, corpus_id: int, *, owner_id: int, limit: int = 50
) -> list[TrainingJob]:
    """One owner's jobs on a corpus, newest first (a page lists nobody else's)."""
    return list(
        session.scalars(
            select(TrainingJob)
            .where(TrainingJob.corpus_id == corpus_id, TrainingJob.owner_id == owner_id)
            .order_by(TrainingJob.id.desc())
            .limit(limit)
        )
    )


def fresh_job(session: Session, job_id: int) -> TrainingJob:
    """The job as it is now, after another session's write (ends this session's snapshot)."""
    session.rollback()
    return session.get_one(TrainingJob, job_id, populate_existing=True)
