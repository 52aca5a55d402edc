"""The Celery backend: jobs run on Celery workers, on any machine that reaches the database
and the broker (BPE_JOB_BACKEND=celery). Flask's "Background Tasks with Celery" pattern: the
Celery app is made from the Flask app's config, and its task runs inside an app context.

- Only the job id travels through the broker; the worker reads everything else from the
  database, so a message carries nothing a user sent.
- Late acknowledgement, `task_reject_on_worker_lost` and prefetch 1: a worker that dies
  mid-job gives its message back instead of losing it.
- The task claims the job first (webapp/jobs/store.py `claim`): a duplicate or redelivered
  message for a job someone is running (fresh heartbeat) or has finished does nothing, and
  the result is stored only once, so one job never makes two tokenisers.
- The task supervises a training child (webapp/jobs/process.py), exactly as the embedded
  runner does: the child writes progress and heartbeats to the row a few times a second and
  sees a cancel flag set by any web process at its next write; the task terminates a child
  that has not stopped `JOBS_KILL_AFTER` seconds after the flag.
- A sweep (in each web process that runs jobs, and at each worker's start) marks running jobs whose
  heartbeat is older than `JOBS_STALE_AFTER` `interrupted`, so nothing stays running forever.

Imported only when BPE_JOB_BACKEND=celery: the embedded web process never imports Celery.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import Celery, Task
from flask import Flask, current_app

from webapp.jobs.backend import JobBackend
from webapp.jobs.process import Supervisor
from webapp.jobs.store import JobStore
from webapp.refusals import UserError
from webapp.storage.models import JobStatus

log = logging.getLogger(__name__)
TASK_NAME = "bpe.train"
EVALUATE_TASK = "bpe.evaluate"


class JobQueueUnreachable(UserError):
    status = 503


def task_id(job_id: int) -> str:
    return f"bpe-job-{job_id}"


def make_celery(app: Flask) -> Celery:
    """The Celery app for this Flask app (Flask's pattern), with the training task."""

    class FlaskTask(Task):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            with app.app_context():
                return self.run(*args, **kwargs)

    celery = Celery(app.import_name, task_cls=FlaskTask)
    celery.conf.update(
        broker_url=app.config["CELERY_BROKER_URL"],
        task_default_queue=app.config["JOB_QUEUE"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # The task only supervises a child process (training holds the GIL for seconds), so
        # threads are enough, and a prefork pool's daemonic processes may not have children.
        worker_pool="threads",
        worker_concurrency=1,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        # An unacknowledged message comes back after this long (a worker that vanished).
        broker_transport_options={"visibility_timeout": 300},
        worker_hijack_root_logger=False,
    )
    celery.task(name=TASK_NAME, bind=True)(_train)
    celery.task(name=EVALUATE_TASK, bind=True)(_evaluate)
    app.extensions["celery"] = celery
    return celery


def _train(task: Task, job_id: int) -> str:
    """The task: run one job by its id, if nobody else has it. Returns how it ended."""
    backend: CeleryBackend = current_app.extensions["bpe_jobs"]
    status = backend.execute(int(job_id))
    return "skipped" if status is None else str(status)


def send_evaluation(celery: Celery, evaluation_id: int) -> None:
    """Queue an evaluation for a worker: only its id travels (webapp/jobs/evaluation_runner.py)."""
    celery.send_task(
        EVALUATE_TASK,
        args=[evaluation_id],
        task_id=f"bpe-evaluation-{evaluation_id}-{time.time_ns()}",
    )


def _evaluate(task: Task, evaluation_id: int) -> str:
    """The task: run one evaluation by its id, if it is still queued. Returns how it ended."""
    status = current_app.extensions["bpe_evaluations"].execute(int(evaluation_id))
    return "skipped" if status is None else str(status)


class CeleryBackend(JobBackend):
    name = "celery"

    def __init__(
        self,
        store: JobStore,
        celery: Celery,
        *,
        mode: str = "thread",
        progress_interval: float = 0.25,
        kill_after: float = 1.0,
        niceness: int = 0,
        stale_after: float = 30.0,
        sweep_interval: float = 5.0,
    ) -> None:
        super().__init__(store, mode=mode, progress_interval=progress_interval)
        self.celery = celery
        self.stale_after = stale_after
        self.sweep_interval = sweep_interval
        self.supervisor = Supervisor(
            store, interval=progress_interval / 2, kill_after=kill_after, niceness=niceness
        )
        self._stopping = threading.Event()
        self._sweeper: threading.Thread | None = None

    # ----- the web side ------------------------------------------------------------------------
    def _dispatch(self, job_ids: list[int]) -> None:
        for job_id in job_ids:
            try:
                self.celery.send_task(TASK_NAME, args=[job_id], task_id=task_id(job_id))
            except Exception as exc:
                log.exception("could not queue job %s", job_id)
                for queued in job_ids:
                    self.store.request_cancel(queued)
                raise JobQueueUnreachable(
                    "The job queue cannot be reached right now, so nothing was started."
                    " Try again in a minute."
                ) from exc

    def start(self) -> None:
        """In a web process that runs jobs: sweep for lost jobs every few seconds."""
        if self._sweeper is not None or self.mode != "thread":
            return
        self._stopping.clear()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="bpe-job-sweep", daemon=True)
        self._sweeper.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout)
            self._sweeper = None

    def sweep(self) -> int:
        swept = self.store.sweep_stale(self.stale_after)
        if swept:
            log.warning("marked %d job(s) without a heartbeat interrupted", swept)
        return swept

    def _sweep_loop(self) -> None:
        while not self._stopping.wait(self.sweep_interval):
            try:
                self.sweep()
            except Exception:
                log.exception("job sweep failed; retrying")

    # ----- the worker side ---------------------------------------------------------------------
    def execute(self, job_id: int) -> JobStatus | None:
        """Claim the job and supervise its training child until it has ended; None if the
        job was not ours to run (finished, cancelled, or running elsewhere)."""
        if not self.store.claim(job_id, stale_after=self.stale_after):
            return None
        child = self.supervisor.spawn(job_id)
        try:
            while not self.supervisor.look(child, cancel=self.store.cancel_requested(job_id)):
                time.sleep(self.progress_interval / 2)
        except BaseException:
            self.supervisor.interrupt(child)  # the worker is shutting down
            raise
        return self.store.status(job_id)
