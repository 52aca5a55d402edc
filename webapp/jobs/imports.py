"""Imports of tokeniser files, as a job kind: the form answers at once with the job's page.

- `IMPORT` is the kind (`import_jobs` rows; webapp/jobs/kind.py): the embedded runner or a
  Celery worker runs it in a child process, like a training.
- `ImportRows.submit` queues a file (its bytes wait in the row) within the queue's limits;
  `run_import` is the task: read the file (`bpe.importers`), store the tokeniser for the
  importer, record it; a refused file ends the job `failed` with the library's reason. A cancel
  is seen between the phases; one asked during a phase stops the child (the supervisor), and
  the store is one transaction, so no half tokeniser is ever left.
- `Imports` is what the pages ask (`get_imports()`): queue one, cancel one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import func, select, update

import bpe
from bpe.importers import import_bytes
from webapp.jobs.backend import JobBackend
from webapp.jobs.kind import DEFAULT_LIMITS, JobKind, QueueLimits
from webapp.jobs.store import JobQueueFull, JobRows
from webapp.storage.convert import store_imported
from webapp.storage.db import Database
from webapp.storage.models import ACTIVE_STATUSES, ImportJob, JobStatus, utcnow

PHASES = {"reading": "Reading the file", "storing": "Storing the tokeniser"}


class ImportRows(JobRows):
    """The `import_jobs` rows as a queue, admitting as many as the training queue does."""

    def __init__(self, database: Database, *, limits: QueueLimits = DEFAULT_LIMITS) -> None:
        super().__init__(database, ImportJob, interrupted_message="The server stopped during it.")
        self.limits = limits

    def _start_values(self) -> dict[str, object]:
        return {"phase": "reading", "error": None}

    def submit(
        self,
        raw: bytes,
        *,
        filename: str,
        sidecar: bytes | None = None,
        pattern: str | None = None,
        owner_id: int | None = None,
    ) -> int:
        """Queue this file's import for `owner_id`; JobQueueFull (429) beyond the limits."""
        with self.database.session_scope() as session:
            active = ImportJob.status.in_([s.value for s in ACTIVE_STATUSES])
            if owner_id is not None and self.limits.per_owner is not None:
                mine = session.scalar(
                    select(func.count())
                    .select_from(ImportJob)
                    .where(active, ImportJob.owner_id == owner_id)
                )
                if (mine or 0) >= self.limits.per_owner:
                    raise JobQueueFull(
                        f"You already have {mine} import{'s' if mine != 1 else ''} queued or "
                        f"running, and one owner may have at most {self.limits.per_owner} at "
                        "once. Wait for one to finish, or cancel one."
                    )
            waiting = session.scalar(select(func.count()).select_from(ImportJob).where(active))
            limit = self.limits.max_running + self.limits.max_queued
            if (waiting or 0) >= limit:
                raise JobQueueFull(
                    f"The import queue is full ({limit} queued or running). Try again when one "
                    "has finished."
                )
            row = ImportJob(
                owner_id=owner_id,
                status=JobStatus.QUEUED.value,
                filename=filename,
                size_bytes=len(raw),
                pattern=pattern,
                data=raw,
                sidecar=sidecar,
            )
            session.add(row)
            session.flush()
            return row.id

    def set_phase(self, job_id: int, phase: str) -> bool:
        """Move a running import to `phase`; whether a cancel has been asked for."""
        return self.beat(job_id, phase=phase)


def run_import(
    rows: ImportRows, job_id: int, *, stop: Callable[[], bool] | None = None
) -> JobStatus | None:
    """Import the row's file (the row is `running`) and record how it ended."""
    database = rows.database
    started = time.monotonic()
    with database.read_scope() as session:
        job = session.get(ImportJob, job_id)
        if job is None or job.data is None:
            return None
        raw, sidecar, filename, pattern = job.data, job.sidecar, job.filename, job.pattern
        owner_id = job.owner_id

    def stopped() -> bool:
        return rows.cancel_requested(job_id) or (stop is not None and stop())

    def end(status: JobStatus, error: str | None = None, tokenizer_id: int | None = None) -> None:
        # The file is not kept once the job is over, whatever the outcome.
        with database.session_scope() as session:
            session.execute(
                update(ImportJob)
                .where(ImportJob.id == job_id, ImportJob.status == JobStatus.RUNNING)
                .values(
                    status=status.value,
                    error=error,
                    tokenizer_id=tokenizer_id,
                    finished_at=utcnow(),
                    elapsed_seconds=time.monotonic() - started,
                    data=None,
                    sidecar=None,
                )
            )

    if stopped():
        end(JobStatus.CANCELLED)
        return JobStatus.CANCELLED
    try:
        tok = import_bytes(raw, filename=filename, sidecar=sidecar, pattern=pattern)
    except bpe.TokenizerFileError as exc:
        end(JobStatus.FAILED, str(exc))
        return JobStatus.FAILED
    if rows.set_phase(job_id, "storing") or (stop is not None and stop()):
        end(JobStatus.CANCELLED)
        return JobStatus.CANCELLED
    with database.session_scope() as session:
        # The tokeniser and the job's success in one transaction: a cancel that lands now
        # finds the job finished, and a killed child leaves neither.
        tokenizer = store_imported(session, tok, owner_id=owner_id)
        session.flush()
        session.execute(
            update(ImportJob)
            .where(ImportJob.id == job_id, ImportJob.status == JobStatus.RUNNING)
            .values(
                status=JobStatus.SUCCEEDED.value,
                tokenizer_id=tokenizer.id,
                finished_at=utcnow(),
                elapsed_seconds=time.monotonic() - started,
                data=None,
                sidecar=None,
            )
        )
    return JobStatus.SUCCEEDED


class ImportKind(JobKind):
    name = "import"
    model = ImportJob
    process_name = "import"
    noun = "import"
    # The tests' manual execution steps trainings only; an import runs when it is asked for.
    waits_in_manual = False
    interrupted_message = "The server stopped during it."

    def make_rows(self, database: Database, limits: QueueLimits = DEFAULT_LIMITS) -> ImportRows:
        return ImportRows(database, limits=limits)

    def run(
        self,
        rows: JobRows,
        job_id: int,
        *,
        interval: float,
        stop: Callable[[], bool] | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> JobStatus | None:
        if not isinstance(rows, ImportRows):
            raise TypeError(f"the {self.name!r} kind's rows are {rows!r}")
        return run_import(rows, job_id, stop=stop)

    def died(self, exitcode: int | None) -> tuple[JobStatus, str]:
        return JobStatus.FAILED, f"The import process ended early (exit code {exitcode})."

    def unsent(self, rows: JobRows, job_id: int) -> None:
        rows.mark_unsent(job_id, "The job queue could not be reached; import the file again.")


IMPORT = ImportKind()


class Imports:
    """What the pages ask of imports; the app's job backend runs them."""

    def __init__(self, backend: JobBackend) -> None:
        self.backend = backend

    @property
    def rows(self) -> ImportRows:
        return self.backend.rows_of(IMPORT.name, ImportRows)

    def submit(
        self,
        raw: bytes,
        *,
        filename: str,
        sidecar: bytes | None = None,
        pattern: str | None = None,
        owner_id: int | None = None,
    ) -> int:
        """Queue this file's import; JobQueueFull (429) beyond the limits, a 503 if the broker
        cannot take it."""
        job_id = self.rows.submit(
            raw, filename=filename, sidecar=sidecar, pattern=pattern, owner_id=owner_id
        )
        self.backend.queued(IMPORT.name, [job_id])
        return job_id

    def request_cancel(self, job_id: int) -> bool:
        return self.backend.cancel(IMPORT.name, job_id)
