"""The one job interface the app uses, whichever backend runs the jobs, for every kind of job.

A kind's rows are written through its queue (`rows[kind]`, webapp/jobs/store.py) first, then
the backend is told (`queued`, `cancel`), so what a page reads never depends on where jobs run.
Views and the API queue trainings with `submit`, `submit_many` and `rerun`, and stop them with
`request_cancel`; other kinds have fronts of their own (`webapp.jobs.evaluations.Evaluations`)
that call `queued` and `cancel` with their kind's name.

Executions (BPE_JOBS_EXECUTION): `thread` runs jobs in the background (the embedded runner's
thread, or Celery workers); the tests' `inline` runs a job in the request that queues it, and
`manual` only when a test calls `run_next(kind)` (except kinds with `waits_in_manual` off).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from webapp.jobs.kind import DEFAULT_LIMITS, JobKind, JobKinds, QueueLimits
from webapp.jobs.process import Supervisor
from webapp.jobs.settings import JobSettings
from webapp.jobs.store import JobRows, JobStore
from webapp.jobs.task import TRAINING
from webapp.storage.db import Database

EXECUTIONS = ("thread", "inline", "manual")
RowsT = TypeVar("RowsT", bound=JobRows)


class JobBackend:
    name = "base"

    def __init__(
        self,
        database: Database,
        *,
        kinds: JobKinds | None = None,
        limits: QueueLimits = DEFAULT_LIMITS,
        execution: str = "thread",
        progress_interval: float = 0.25,
        kill_after: float = 1.0,
        niceness: int = 0,
        max_seconds: float | None = None,
    ) -> None:
        if execution not in EXECUTIONS:
            raise ValueError(f"execution must be one of {', '.join(EXECUTIONS)}, not {execution!r}")
        self.kinds = kinds if kinds is not None else JobKinds([TRAINING])
        if TRAINING.name not in self.kinds:
            self.kinds.register(TRAINING)  # the pages' `submit` and `rerun` are trainings
        self.execution = execution
        self.progress_interval = progress_interval
        self.rows: dict[str, JobRows] = {
            name: kind.make_rows(database, limits) for name, kind in self.kinds.items()
        }
        self.supervisors: dict[str, Supervisor] = {
            name: Supervisor(
                self.rows[name],
                kind=kind,
                interval=progress_interval / 2,
                kill_after=kill_after,
                niceness=niceness,
                max_seconds=max_seconds,
            )
            for name, kind in self.kinds.items()
        }
        # Tests: called with the job id after each progress write of an in-process run.
        self.progress_hook: Callable[[int], None] | None = None

    def rows_of(self, kind: str, rows_class: type[RowsT]) -> RowsT:
        """One kind's rows as the class its front queries (a TypeError if the kind's
        `make_rows` made something else)."""
        rows = self.rows[kind]
        if not isinstance(rows, rows_class):
            raise TypeError(f"the {kind!r} kind's rows are {rows!r}")
        return rows

    @property
    def store(self) -> JobStore:
        """The training jobs' rows (what the pages and the API query)."""
        return self.rows_of(TRAINING.name, JobStore)

    @property
    def supervisor(self) -> Supervisor:
        return self.supervisors[TRAINING.name]

    @property
    def database(self) -> Database:
        return self.store.database

    @property
    def max_running(self) -> int:
        return self.store.max_running

    @property
    def max_queued(self) -> int:
        return self.store.max_queued

    # ----- called from requests (any thread): only ids and plain settings come in ------------
    def submit(
        self,
        corpus_id: int,
        settings: JobSettings | Mapping[str, Any],
        *,
        rerun_of: int | None = None,
        owner_id: int | None = None,
    ) -> int:
        return self.submit_many(corpus_id, [settings], rerun_of=rerun_of, owner_id=owner_id)[0]

    def submit_many(
        self,
        corpus_id: int,
        settings: Sequence[JobSettings | Mapping[str, Any]],
        *,
        rerun_of: int | None = None,
        owner_id: int | None = None,
    ) -> list[int]:
        """All of these trainings queued, or none (JobQueueFull, 429)."""
        self.admit()
        job_ids = self.store.submit_many(corpus_id, settings, rerun_of=rerun_of, owner_id=owner_id)
        self.queued(TRAINING.name, job_ids)
        return job_ids

    def request_cancel(self, job_id: int) -> bool:
        """Ask a queued or running training to stop; False if it had already finished."""
        return self.cancel(TRAINING.name, job_id)

    def rerun(self, job_id: int, *, owner_id: int | None = None) -> int:
        corpus_id, settings = self.store.rerun_source(job_id)
        return self.submit(corpus_id, settings, rerun_of=job_id, owner_id=owner_id)

    def queued(self, kind: str, job_ids: list[int]) -> None:
        """These jobs of this kind are queued (their rows are committed): run or hand them on."""
        if self.execution == "inline" or (
            self.execution == "manual" and not self.kinds[kind].waits_in_manual
        ):
            while self.run_next(kind) is not None:
                pass
            return
        self._dispatch(self.kinds[kind], job_ids)

    def cancel(self, kind: str, job_id: int) -> bool:
        """Ask a queued or running job to stop; False if it had already finished."""
        asked = self.rows[kind].request_cancel(job_id)
        if asked:
            self._cancelled(self.kinds[kind], job_id)
        return asked

    # ----- what each backend adds -----------------------------------------------------------
    # Why no job can run now (the embedded runner's lock cannot be written), or None.
    unavailable: str | None = None

    def not_ready(self) -> str | None:
        """Why this process could not hand a job on right now (/readyz), or None."""
        return None

    def admit(self) -> None:
        """Before any job row is written: UserError (503) when no job could run now."""

    def _dispatch(self, kind: JobKind, job_ids: list[int]) -> None:
        """New queued jobs exist (their rows are committed)."""

    def _cancelled(self, kind: JobKind, job_id: int) -> None:
        """A cancel was requested (the row's flag is set and committed)."""

    def start(self) -> None:
        """Take over running jobs in this process, if this backend runs any here."""

    def stop(self, timeout: float = 5.0) -> None:
        """Stop whatever `start` started."""

    # ----- in-process runs (tests: the manual and inline executions) -------------------------
    def run_next(self, kind: str = TRAINING.name) -> int | None:
        """Run the oldest queued job of this kind in this thread, start to finish; its id.

        The same task a child runs (the kind's `run`), without a child process."""
        rows = self.rows[kind]
        job_id = rows.claim_next()
        if job_id is None:
            return None
        self.kinds[kind].run(
            rows, job_id, interval=self.progress_interval, on_write=self.progress_hook
        )
        return job_id
