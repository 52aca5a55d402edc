"""Background jobs of every kind, on one machinery, whichever backend runs them.

- `kind.py`: what a kind of job adds (`JobKind`: its table, its task) and the registry
  (`JobKinds`); BPE_JOB_KINDS adds kinds from other modules.
- `store.py`: every query on job rows: `JobRows`, one kind's queue (claim, heartbeat, cancel,
  stale recovery) written once; `JobStore`, the training jobs' own (admission in the database,
  progress, the result); statuses as `JobStatus`.
- `settings.py`: the train form parsed once into a `JobSettings` value.
- `task.py`: the training kind (`TRAINING`): read the corpus, train, record, wherever it runs.
- `progress.py`: a training's phases and its honest time left.
- `shard_counting.py`, `shard_store.py`: under Celery, one training's shards counted by every
  worker, through the database.
- `evaluations.py`: the evaluation kind (`EVALUATION`): its queue, its task, its front.
- `imports.py`: the import kind (`IMPORT`): a tokeniser file read and stored in the background.
- `languages.py`: the languages kind (`LANGUAGES`): tokenisers counted on the parallel text.
- `process.py`: a job in a child process, and its supervision.
- `backend.py`: the one interface the app uses (`JobBackend`).
- `embedded.py`: the default backend, a runner thread in the serving process.
- `celery_backend.py`: jobs on Celery workers, one task for every kind (imported only when
  configured).

Views call `get_jobs()` (trainings: `submit`, `submit_many`, `request_cancel`, `rerun`),
`get_evaluations()`, `get_imports()` and `get_languages()`; they read jobs through the store's
query functions.
Only a job's id and its kind's name cross to whatever runs it (docs/internals.md, "Jobs").

May import: `bpe`, `webapp.config`, `webapp.refusals`, `webapp.logs`, `webapp.storage`. Nothing
that renders or answers a request: a job runs the same in a worker with no request at all.
"""

from __future__ import annotations

from typing import Any, cast

from flask import Flask, current_app

from webapp.jobs.backend import JobBackend
from webapp.jobs.embedded import EmbeddedRunner, runner_lock_path
from webapp.jobs.evaluations import EVALUATION, Evaluations
from webapp.jobs.imports import IMPORT, Imports
from webapp.jobs.kind import JobKind, JobKinds, QueueLimits, load_kind
from webapp.jobs.languages import LANGUAGES, Languages
from webapp.jobs.settings import JobSettings, parse_settings
from webapp.jobs.shard_counting import ShardCounting
from webapp.jobs.store import JobQueueFull, JobStore
from webapp.jobs.task import TRAINING, TrainingKind
from webapp.storage.models import JobStatus

__all__ = [
    "JobBackend",
    "JobKind",
    "JobKinds",
    "JobQueueFull",
    "JobSettings",
    "JobStatus",
    "JobStore",
    "get_evaluations",
    "get_imports",
    "get_jobs",
    "get_languages",
    "init_app",
    "job_kinds",
    "parse_settings",
]


def job_kinds(app: Flask) -> JobKinds:
    """The built-in kinds, then those BPE_JOB_KINDS names (`package.module:NAME`). Under
    Celery, training counts its shards on every worker (webapp/jobs/shard_counting.py)."""
    training = TRAINING
    if app.config["JOB_BACKEND"] == "celery":
        training = TrainingKind(
            ShardCounting(
                broker_url=app.config["CELERY_BROKER_URL"],
                queue=app.config["JOB_QUEUE"],
                shard_chars=app.config["SHARD_CHARS"],
                help_after=app.config["SHARD_HELP_AFTER"],
                stale_after=app.config["JOBS_STALE_AFTER"],
            )
        )
    kinds = JobKinds([training, EVALUATION, IMPORT, LANGUAGES])
    for spec in app.config["JOB_KINDS"]:
        kinds.register(load_kind(spec))
    return kinds


def init_app(app: Flask, *, run_jobs: bool = False) -> JobBackend:
    """Wire the job backend into the app; `run_jobs` makes this process run the jobs (the
    embedded runner), or sweep for lost ones (celery: the workers run them)."""
    database = app.extensions["bpe_db"]
    options: dict[str, Any] = {
        "kinds": job_kinds(app),
        "limits": QueueLimits(
            max_running=app.config["JOBS_MAX_RUNNING"],
            max_queued=app.config["JOBS_MAX_QUEUED"],
            per_owner=app.config["JOBS_PER_OWNER"],
        ),
        "execution": app.config["JOBS_EXECUTION"],
        "progress_interval": app.config["JOBS_PROGRESS_INTERVAL"],
        "kill_after": app.config["JOBS_KILL_AFTER"],
        "niceness": app.config["JOBS_NICE"],
        "max_seconds": app.config["JOBS_MAX_SECONDS"] or None,  # 0: no limit
    }
    backend = (
        _celery_backend(app, options)
        if app.config["JOB_BACKEND"] == "celery"
        else EmbeddedRunner(
            database, lock_path=runner_lock_path(database.url, app.instance_path), **options
        )
    )
    app.extensions["bpe_jobs"] = backend
    app.extensions["bpe_evaluations"] = Evaluations(backend)
    app.extensions["bpe_imports"] = Imports(backend)
    app.extensions["bpe_languages"] = Languages(backend)
    if run_jobs:
        backend.start()
    return backend


def _celery_backend(app: Flask, options: dict[str, Any]) -> JobBackend:
    # Imported here so that a web process on the embedded backend never imports Celery.
    from webapp.jobs.celery_backend import CeleryBackend, make_celery

    return CeleryBackend(
        app.extensions["bpe_db"],
        make_celery(app),
        stale_after=app.config["JOBS_STALE_AFTER"],
        sweep_interval=app.config["JOBS_SWEEP_INTERVAL"],
        resend_after=app.config["JOBS_RESEND_AFTER"],
        **options,
    )


def get_jobs() -> JobBackend:
    return cast(JobBackend, current_app.extensions["bpe_jobs"])


def get_evaluations() -> Evaluations:
    return cast(Evaluations, current_app.extensions["bpe_evaluations"])


def get_imports() -> Imports:
    return cast(Imports, current_app.extensions["bpe_imports"])


def get_languages() -> Languages:
    return cast(Languages, current_app.extensions["bpe_languages"])
