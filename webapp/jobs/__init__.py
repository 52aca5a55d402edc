"""Training jobs: one interface for the app, whichever backend runs them.

- `settings.py`: the train form parsed once into a `JobSettings` value.
- `store.py`: every query on the job rows; statuses as `JobStatus`; admission in the database.
- `task.py`: the training itself (read the corpus, train, record), wherever it runs.
- `process.py`: a training in a child process, and its supervision.
- `embedded.py`: the default backend, a runner thread in the serving process.
- `celery_backend.py`: jobs on Celery workers (imported only when configured).

Views call `get_jobs()` and its `submit`, `submit_many`, `request_cancel` and `rerun`; they
read jobs through the store's query functions. Only job ids cross to whatever runs a job.

May import: `bpe`, `webapp.config`, `webapp.refusals`, `webapp.storage`. Nothing that renders or
answers a request: a job runs the same in a worker with no request at all.
"""

from __future__ import annotations

from flask import Flask, current_app

from webapp.jobs.backend import JobBackend
from webapp.jobs.embedded import EmbeddedRunner, runner_lock_path
from webapp.jobs.settings import JobSettings, parse_settings
from webapp.jobs.store import JobQueueFull, JobStore
from webapp.storage.models import JobStatus

__all__ = [
    "JobBackend",
    "JobQueueFull",
    "JobSettings",
    "JobStatus",
    "JobStore",
    "get_jobs",
    "init_app",
    "parse_settings",
]


def make_store(app: Flask) -> JobStore:
    return JobStore(
        app.extensions["bpe_db"],
        max_running=app.config["JOBS_MAX_RUNNING"],
        max_queued=app.config["JOBS_MAX_QUEUED"],
        per_owner=app.config["JOBS_PER_OWNER"],
    )


def init_app(app: Flask, *, run_jobs: bool = False) -> JobBackend:
    """Wire the job backend into the app; `run_jobs` makes this process run the jobs (the
    embedded runner), or sweep for lost ones (celery: the workers run them)."""
    backend = (
        _celery_backend(app)
        if app.config["JOB_BACKEND"] == "celery"
        else EmbeddedRunner(
            make_store(app),
            mode=app.config["JOBS_MODE"],
            lock_path=runner_lock_path(app.extensions["bpe_db"].url, app.instance_path),
            progress_interval=app.config["JOBS_PROGRESS_INTERVAL"],
            kill_after=app.config["JOBS_KILL_AFTER"],
            niceness=app.config["JOBS_NICE"],
        )
    )
    app.extensions["bpe_jobs"] = backend
    if run_jobs:
        backend.start()
    return backend


def _celery_backend(app: Flask) -> JobBackend:
    # Imported here so that a web process on the embedded backend never imports Celery.
    from webapp.jobs.celery_backend import CeleryBackend, make_celery

    return CeleryBackend(
        make_store(app),
        make_celery(app),
        mode=app.config["JOBS_MODE"],
        progress_interval=app.config["JOBS_PROGRESS_INTERVAL"],
        kill_after=app.config["JOBS_KILL_AFTER"],
        niceness=app.config["JOBS_NICE"],
        stale_after=app.config["JOBS_STALE_AFTER"],
        sweep_interval=app.config["JOBS_SWEEP_INTERVAL"],
    )


def get_jobs() -> JobBackend:
    return current_app.extensions["bpe_jobs"]
