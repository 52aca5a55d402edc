"""The one job interface the app uses, whichever backend runs the jobs.

Views and the API call `submit`, `submit_many`, `request_cancel` and `rerun` with ids and
settings; every one of them writes rows through the job store first, then tells the backend
(`_dispatch`, `_cancelled`), so what a page reads never depends on where jobs run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webapp.jobs.settings import JobSettings
from webapp.jobs.store import JobStore
from webapp.jobs.task import run_job


class JobBackend:
    name = "base"

    def __init__(self, store: JobStore, *, mode: str = "thread", progress_interval: float = 0.25):
        self.store = store
        self.mode = mode
        self.progress_interval = progress_interval
        # Tests: called with the job id after each progress write of an in-process run.
        self.progress_hook: Callable[[int], None] | None = None

    @property
    def database(self):
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
        """All of these jobs queued, or none (JobQueueFull, 429)."""
        job_ids = self.store.submit_many(corpus_id, settings, rerun_of=rerun_of, owner_id=owner_id)
        self._dispatch(job_ids)
        return job_ids

    def request_cancel(self, job_id: int) -> bool:
        """Ask a queued or running job to stop; False if it had already finished."""
        asked = self.store.request_cancel(job_id)
        if asked:
            self._cancelled(job_id)
        return asked

    def rerun(self, job_id: int, *, owner_id: int | None = None) -> int:
        corpus_id, settings = self.store.rerun_source(job_id)
        return self.submit(corpus_id, settings, rerun_of=job_id, owner_id=owner_id)

    # ----- what each backend adds -----------------------------------------------------------
    def _dispatch(self, job_ids: list[int]) -> None:
        """New queued jobs exist (their rows are committed)."""

    def _cancelled(self, job_id: int) -> None:
        """A cancel was requested (the row's flag is set and committed)."""

    def start(self) -> None:
        """Take over running jobs in this process, if this backend runs any here."""

    def stop(self, timeout: float = 5.0) -> None:
        """Stop whatever `start` started."""

    # ----- in-process runs (tests: manual and inline modes) ----------------------------------
    def run_next(self) -> int | None:
        """Train the oldest queued job in this thread, start to finish. Returns its id.

        The same task a worker runs (webapp/jobs/task.py), without a child process."""
        job_id = self.store.claim_next()
        if job_id is None:
            return None
        run_job(self.store, job_id, interval=self.progress_interval, on_write=self.progress_hook)
        return job_id
