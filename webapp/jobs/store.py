"""The job store: every query on `training_jobs`, for the web and for whatever runs the jobs.

- Statuses are `JobStatus` values; a job moves queued -> running -> one finished status, and
  every move is a conditional UPDATE (`WHERE status = ...`), so two processes racing for the
  same job cannot both win.
- Admission (how many jobs may be running or waiting) is counted and enforced inside the same
  write transaction that inserts the jobs. The write path is serialised by the database (SQLite
  BEGIN IMMEDIATE, a PostgreSQL advisory lock; see webapp/storage/db.py), so the limits hold
  across any number of web processes and machines.
- Progress, heartbeats and the result are written by the training itself (webapp/jobs/task.py),
  in whichever process or machine runs it; the result and the job's status in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

import bpe
from webapp.jobs.settings import JobSettings, check_fits_corpus
from webapp.refusals import UserError
from webapp.storage.convert import store_tokenizer
from webapp.storage.db import Database, execute_update
from webapp.storage.models import (
    ACTIVE_STATUSES,
    Corpus,
    CorpusStats,
    JobStatus,
    TrainingJob,
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


class JobStore:
    """Job rows on one database. Safe to share between threads; holds no ORM objects."""

    def __init__(
        self,
        database: Database,
        *,
        max_running: int = 1,
        max_queued: int = 8,
        per_owner: int | None = None,
    ) -> None:
        self.database = database
        self.max_running = max_running
        self.max_queued = max_queued
        self.per_owner = per_owner  # jobs one owner may have queued or running (None: no limit)

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

        First the owner's own limit (issue 8): one visitor may not fill the queue for everyone.
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
        active = session.execute(
            select(func.count())
            .select_from(TrainingJob)
            .where(TrainingJob.status.in_(ACTIVE_STATUSES))
        ).scalar_one()
        free = self.max_running + self.max_queued - active
        if free >= wanted:
            return
        if wanted == 1:
            raise JobQueueFull(
                f"The training queue is full ({self.max_running} running,"
                f" {self.max_queued} waiting). Try again when a job has finished, or cancel one."
            )
        raise JobQueueFull(
            f"The training queue has room for {max(free, 0)} more job{'s' if free != 1 else ''},"
            f" and a comparison needs {wanted}. Try again when a job has finished,"
            " or cancel one."
        )

    def request_cancel(self, job_id: int) -> bool:
        """Flag a queued or running job to stop (a queued one is cancelled at once).

        Returns False for a finished or missing job. Whoever runs the job sees the flag.
        """
        with self.database.session_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None or job.finished:
                return False
            job.cancel_requested = True
            if job.status == JobStatus.QUEUED:
                job.status = JobStatus.CANCELLED
                job.finished_at = utcnow()
            return True

    def rerun_source(self, job_id: int) -> tuple[int, JobSettings]:
        """The corpus and settings of a job that may be run again (UserError if it may not)."""
        with self.database.read_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None:
                raise LookupError(job_id)
            if not job.finished or job.status == JobStatus.SUCCEEDED:
                raise UserError("Only a failed, cancelled or interrupted job can be run again.")
            return job.corpus_id, JobSettings.from_json(job.settings)

    # ----- for runners -----------------------------------------------------------------------
    def claim_next(self) -> int | None:
        """Oldest queued job -> running. Returns its id, or None when the queue is empty."""
        with self.database.session_scope() as session:
            job_id = session.scalar(
                select(TrainingJob.id)
                .where(TrainingJob.status == JobStatus.QUEUED)
                .order_by(TrainingJob.id)
                .limit(1)
            )
            if job_id is None:
                return None
            self._start(session, job_id)
            return job_id

    def claim(self, job_id: int, *, stale_after: float) -> bool:
        """This job -> running, for a worker handed its id. False if someone else has it.

        A job still `running` whose heartbeat is older than `stale_after` seconds was left by
        a worker that died (its message was delivered again): it is taken over.
        """
        with self.database.session_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None:
                return False
            if job.status == JobStatus.RUNNING:
                beat = job.heartbeat_at or job.started_at
                if beat is not None and utcnow() - beat < timedelta(seconds=stale_after):
                    return False
            elif job.status != JobStatus.QUEUED:
                return False
            self._start(session, job_id)
            return True

    def _start(self, session: Session, job_id: int) -> None:
        now = utcnow()
        session.execute(
            update(TrainingJob)
            .where(TrainingJob.id == job_id)
            .values(
                status=JobStatus.RUNNING,
                started_at=now,
                heartbeat_at=now,
                merges_done=0,
                elapsed_seconds=0.0,
            )
        )

    def queued_ids(self) -> list[int]:
        with self.database.read_scope() as session:
            return list(
                session.scalars(
                    select(TrainingJob.id)
                    .where(TrainingJob.status == JobStatus.QUEUED)
                    .order_by(TrainingJob.id)
                )
            )

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

    def status(self, job_id: int) -> JobStatus | None:
        with self.database.read_scope() as session:
            value = session.scalar(select(TrainingJob.status).where(TrainingJob.id == job_id))
            return None if value is None else JobStatus(value)

    def write_progress(self, job_id: int, update_: Update | None, elapsed: float) -> bool:
        """Progress (if any) and a heartbeat; returns whether a cancel has been requested."""
        values: dict[str, Any] = {"heartbeat_at": utcnow(), "elapsed_seconds": elapsed}
        if update_ is not None:
            values.update(
                merges_done=update_.merges_done,
                merges_target=update_.merges_target,
                current_pair=update_.pair,
                current_count=update_.count,
                estimate_seconds=update_.estimate,
                phase=update_.phase,
            )
        with self.database.session_scope() as session:
            session.execute(
                update(TrainingJob)
                .where(TrainingJob.id == job_id, TrainingJob.status == JobStatus.RUNNING)
                .values(**values)
            )
            return bool(
                session.scalar(select(TrainingJob.cancel_requested).where(TrainingJob.id == job_id))
            )

    def cancel_requested(self, job_id: int) -> bool:
        with self.database.read_scope() as session:
            return bool(
                session.scalar(select(TrainingJob.cancel_requested).where(TrainingJob.id == job_id))
            )

    def cancels_among(self, job_ids: Iterable[int]) -> set[int]:
        """Which of these jobs have a cancel request (one query for a runner's children)."""
        ids = list(job_ids)
        if not ids:
            return set()
        with self.database.read_scope() as session:
            return set(
                session.scalars(
                    select(TrainingJob.id).where(
                        TrainingJob.id.in_(ids), TrainingJob.cancel_requested.is_(True)
                    )
                )
            )

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
            job.tokenizer_id = row.id
            job.merges_done = len(tok.merges)
            if tok.training is not None:
                job.merges_target = max(len(tok.merges), job.merges_target or 0)
            job.elapsed_seconds = elapsed
            job.estimate_seconds = 0.0
            job.finished_at = job.heartbeat_at = utcnow()
            return True

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
        if elapsed is not None:
            values["elapsed_seconds"] = elapsed
        with self.database.session_scope() as session:
            result = execute_update(
                session,
                update(TrainingJob)
                .where(TrainingJob.id == job_id, TrainingJob.status == JobStatus.RUNNING)
                .values(**values),
            )
            return bool(result.rowcount)

    def recover(self) -> int:
        """Jobs left `running` by a previous process become `interrupted`; returns how many."""
        return self._interrupt(TrainingJob.status == JobStatus.RUNNING, INTERRUPTED_MESSAGE)

    def sweep_stale(self, older_than: float) -> int:
        """Running jobs whose heartbeat is older than `older_than` seconds -> `interrupted`."""
        cutoff = utcnow() - timedelta(seconds=older_than)
        beat = func.coalesce(TrainingJob.heartbeat_at, TrainingJob.started_at)
        return self._interrupt(
            (TrainingJob.status == JobStatus.RUNNING) & (beat < cutoff), STALE_MESSAGE
        )

    def _interrupt(self, condition, message: str) -> int:
        with self.database.session_scope() as session:
            result = execute_update(
                session,
                update(TrainingJob)
                .where(condition)
                .values(status=JobStatus.INTERRUPTED, error=message, finished_at=utcnow()),
            )
            return result.rowcount or 0


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
