"""A job kind the web app does not have: count the lines of a corpus, a row per count in a
table of its own. It is defined here, outside webapp/jobs, and reaches the app only through
BPE_JOB_KINDS (`tests.toy_kind:LINE_COUNT`): a child process or a Celery worker imports it from
that name. tests/test_job_kinds.py runs it on both backends.

The table is not in the app's schema (no migration makes it): `create_table` makes it on the
test's database, as a kind's own migration would.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import Boolean, DateTime, Float, Integer, String, Text, select, update
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from webapp.jobs import JobKind
from webapp.jobs.store import JobRows
from webapp.storage.db import Database
from webapp.storage.models import Corpus, JobStatus, utcnow

SPEC = "tests.toy_kind:LINE_COUNT"


class ToyBase(DeclarativeBase):
    pass


class LineCountJob(ToyBase):
    __tablename__ = "toy_line_counts"

    # The job columns every kind's table has (webapp/jobs/store.py JobRows).
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    # Its own: the input, the pace (seconds per line, so a test can catch it running), the result.
    corpus_id: Mapped[int] = mapped_column(Integer)
    pause: Mapped[float] = mapped_column(Float, default=0.0)
    lines_done: Mapped[int] = mapped_column(Integer, default=0)
    lines: Mapped[int | None] = mapped_column(Integer)


def create_table(database: Database) -> None:
    ToyBase.metadata.drop_all(database.engine)  # a PostgreSQL test database keeps it otherwise
    ToyBase.metadata.create_all(database.engine)


def drop_table(url: str) -> None:
    """Leave no toy table behind: a PostgreSQL test database is shared by the tests after."""
    engine = sa.create_engine(url)
    try:
        ToyBase.metadata.drop_all(engine)
    finally:
        engine.dispose()


def queue(database: Database, corpus_id: int, *, pause: float = 0.0) -> int:
    with database.session_scope() as session:
        row = LineCountJob(corpus_id=corpus_id, pause=pause, status=JobStatus.QUEUED)
        session.add(row)
        session.flush()
        return row.id


def row(database: Database, job_id: int) -> LineCountJob:
    with database.read_scope() as session:
        return session.get_one(LineCountJob, job_id)


class LineCountKind(JobKind):
    name = "line-count"
    model = LineCountJob
    process_name = "count-lines"
    noun = "line count"

    def run(
        self,
        rows: JobRows,
        job_id: int,
        *,
        interval: float,
        stop: Callable[[], bool] | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> JobStatus | None:
        database = rows.database
        with database.read_scope() as session:
            job = session.get_one(LineCountJob, job_id)
            pause = job.pause
            text = session.scalar(select(Corpus.text).where(Corpus.id == job.corpus_id)) or ""
        last = time.monotonic()
        lines = 0
        for _ in text.splitlines():
            lines += 1
            time.sleep(pause)
            if time.monotonic() - last >= interval:
                last = time.monotonic()
                cancelled = rows.beat(job_id, lines_done=lines)
                if cancelled or (stop is not None and stop()):
                    rows.finish(job_id, JobStatus.CANCELLED)
                    return JobStatus.CANCELLED
        with database.session_scope() as session:
            session.execute(
                update(LineCountJob)
                .where(LineCountJob.id == job_id, LineCountJob.status == JobStatus.RUNNING)
                .values(
                    status=JobStatus.SUCCEEDED, lines=lines, lines_done=lines, finished_at=utcnow()
                )
            )
        return rows.status(job_id)


LINE_COUNT = LineCountKind()
