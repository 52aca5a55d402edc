"""Job kinds: what one kind of background job adds to the machinery every job shares.

The machinery (queue, claim, heartbeat, cancel, stale recovery: `webapp/jobs/store.py`
`JobRows`; the runner thread and child-process supervision: `embedded.py`, `process.py`; the
one Celery task: `celery_backend.py`) is written once. A kind says only what is its own:

- `model`, its table (with the job columns `JobRows` names), and `make_rows`, its queue on a
  database (a kind may subclass `JobRows` to add its own queries, as training and evaluations do);
- `run(rows, job_id, ...)`, the task: read what the job needs from the database, work with a
  heartbeat and a stop check, record the outcome. It runs in a child process (embedded runner or
  Celery worker), or in the caller's thread in the test executions;
- a few words for its rows: the child's process name, what a dead child, a shut-down or a job
  stopped at the time limit (BPE_JOB_MAX_SECONDS) leaves.

A kind is a module-level object of an importable module: the child process and the Celery
worker get it by pickling (by reference). The app's registry holds the built-in kinds plus the
ones named in BPE_JOB_KINDS (`package.module:NAME`), so a new kind needs no edit here
(docs/internals.md, "Jobs").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webapp.jobs.store import INTERRUPTED_MESSAGE, JobRows
from webapp.storage.db import Database
from webapp.storage.models import JobStatus


@dataclass(frozen=True)
class QueueLimits:
    """The app's job limits (BPE_JOBS_RUNNING, BPE_JOBS_QUEUED, BPE_JOBS_PER_OWNER), for each
    kind's queue to apply as it needs."""

    max_running: int = 1
    max_queued: int = 8
    per_owner: int | None = None


DEFAULT_LIMITS = QueueLimits()


class JobKind:
    """One kind of job. Subclass it, set the class attributes, write `run`."""

    name = ""  # the registry's key and what a Celery message names
    model: type[Any]  # the ORM class of its table
    process_name = "job"  # a child is named bpe-<process_name>-<job id>
    noun = "job"  # in messages: "The <noun> process died ..."
    # In the `manual` execution (tests), its jobs wait for `run_next(kind)`; False: they run
    # in the request that queues them, as in `inline`.
    waits_in_manual = True
    interrupted_message = INTERRUPTED_MESSAGE

    def make_rows(self, database: Database, limits: QueueLimits = DEFAULT_LIMITS) -> JobRows:
        """This kind's queue on `database`."""
        return JobRows(database, self.model, interrupted_message=self.interrupted_message)

    def run(
        self,
        rows: JobRows,
        job_id: int,
        *,
        interval: float,
        stop: Callable[[], bool] | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> JobStatus | None:
        """Do the job (its row is `running`) and record how it ended; the status it ended in.

        Write a heartbeat at least every `interval` seconds and stop when the row's
        `cancel_requested` is set or `stop()` says so; `on_write` (tests) gets the id after each
        progress write.
        """
        raise NotImplementedError

    def died(self, exitcode: int | None) -> tuple[JobStatus, str]:
        """What a child that died without recording anything leaves on the row."""
        return JobStatus.FAILED, f"The {self.noun} process died (exit code {exitcode})."

    def overran(self, limit: float) -> tuple[JobStatus, str]:
        """What a job stopped for running past BPE_JOB_MAX_SECONDS leaves on the row."""
        return JobStatus.FAILED, (
            f"Stopped: ran past the {limit:g} s limit on how long a {self.noun} may run."
            " Try a smaller input, or ask the site's operator to raise the limit."
        )

    def unsent(self, rows: JobRows, job_id: int) -> None:
        """The broker could not take the job: the row must not wait for a worker forever."""
        rows.mark_unsent(job_id, "The job queue could not be reached; run it again.")

    def __repr__(self) -> str:
        return f"<job kind {self.name}>"


class JobKinds(Mapping[str, JobKind]):
    """The registry: kind name -> kind object."""

    def __init__(self, kinds: Iterable[JobKind] = ()) -> None:
        self._kinds: dict[str, JobKind] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: JobKind) -> JobKind:
        if not kind.name:
            raise ValueError(f"{kind!r} has no name; set the class attribute `name`")
        if kind.name in self._kinds and self._kinds[kind.name] is not kind:
            raise ValueError(f"two job kinds are named {kind.name!r}; give one another name")
        self._kinds[kind.name] = kind
        return kind

    def __getitem__(self, name: str) -> JobKind:
        try:
            return self._kinds[name]
        except KeyError:
            known = ", ".join(sorted(self._kinds))
            raise KeyError(f"no job kind {name!r} is registered (known: {known})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)


def load_kind(spec: str) -> JobKind:
    """`package.module:NAME` -> the job kind that module defines as NAME (BPE_JOB_KINDS)."""
    module_name, _, attribute = spec.strip().partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a job kind is named as package.module:NAME, not {spec!r}")
    kind = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(kind, JobKind):
        raise ValueError(f"{spec} is {kind!r}, not a JobKind")
    return kind
