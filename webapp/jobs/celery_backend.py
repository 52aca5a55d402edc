"""The Celery backend: jobs of every kind run on Celery workers, on any machine that reaches
the database and the broker (BPE_JOB_BACKEND=celery). Flask's "Background Tasks with Celery"
pattern: the Celery app is made from the Flask app's config, and its one task (`bpe.run`) runs
inside an app context.

- Only the job's id and its kind's name travel through the broker; the worker reads everything
  else from the database, so a message carries nothing a user sent.
- Late acknowledgement, `task_reject_on_worker_lost` and prefetch 1: a worker that dies
  mid-job gives its message back instead of losing it.
- The task claims the job first (webapp/jobs/store.py `JobRows.claim`): a duplicate or
  redelivered message for a job someone is running (fresh heartbeat) or has finished does
  nothing, and a training's result is stored only once, so one job never makes two tokenisers.
- The task supervises the job's child (webapp/jobs/process.py), exactly as the embedded
  runner does: the child writes progress and heartbeats to the row a few times a second and
  sees a cancel flag set by any web process at its next write; the task terminates a child
  that has not stopped `JOBS_KILL_AFTER` seconds after the flag.
- A sweep (in each web process that runs jobs, and at each worker's start) marks running jobs
  of every kind whose heartbeat is older than `JOBS_STALE_AFTER` `interrupted`, so nothing
  stays running forever.

Imported only when BPE_JOB_BACKEND=celery: the embedded web process never imports Celery.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import Celery, Task
from flask import Flask, current_app
from sqlalchemy.exc import OperationalError

from webapp import logs
from webapp.jobs.backend import JobBackend
from webapp.jobs.kind import DEFAULT_LIMITS, JobKind, JobKinds, QueueLimits
from webapp.jobs.shard_counting import COUNT_TASK, count_one
from webapp.jobs.shard_store import ShardStore
from webapp.jobs.task import TRAINING
from webapp.refusals import UserError
from webapp.storage.db import Database
from webapp.storage.models import JobStatus

log = logging.getLogger(__name__)
TASK_NAME = "bpe.run"
# The names training's and evaluation's tasks had before there was one task for all: messages
# a web process queued under them before an upgrade are run by the upgraded workers, not lost.
OLD_TRAIN_TASK, OLD_EVALUATE_TASK = "bpe.train", "bpe.evaluate"


class JobQueueUnreachable(UserError):
    status = 503


def task_id(kind: str, job_id: int) -> str:
    # One per sending: a kind may queue the same row again (an evaluation asked for anew).
    return f"bpe-{kind}-{job_id}-{time.time_ns()}"


def make_celery(app: Flask) -> Celery:
    """The Celery app for this Flask app (Flask's pattern), with the one task of every job."""

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
        # BPE_WORKER_CONCURRENCY; the worker's own `-c N` wins over it.
        worker_concurrency=app.config["WORKER_CONCURRENCY"],
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        # An unacknowledged message comes back after this long (a worker that vanished).
        broker_transport_options={"visibility_timeout": redeliver_after(app.config)},
        worker_hijack_root_logger=False,
    )
    # A worker that cannot reach the database does not drop the job: it tries again later,
    # waiting longer each time (and the sweep sends a still-queued job again anyway). A
    # training's shard (webapp/jobs/shard_counting.py) is tried again the same way, a few
    # times: the training counts a shard itself if no task does.
    retried = {"bind": True, "autoretry_for": (OperationalError,), "retry_backoff": True}
    celery.task(name=TASK_NAME, retry_backoff_max=60, max_retries=None, **retried)(_run)
    celery.task(name=COUNT_TASK, retry_backoff_max=30, max_retries=10, **retried)(_count_shard)
    celery.task(name=OLD_TRAIN_TASK, bind=True)(_train_sent_before_upgrade)
    celery.task(name=OLD_EVALUATE_TASK, bind=True)(_evaluate_sent_before_upgrade)
    app.extensions["celery"] = celery
    return celery


def redeliver_after(config: Any) -> float:
    """The broker's visibility timeout: longer than any job may run, so a job still running is
    not handed to a second worker (which would find it taken and skip it, a wasted slot)."""
    if config["JOBS_REDELIVER_AFTER"] > 0:
        return float(config["JOBS_REDELIVER_AFTER"])
    cap = config["JOBS_MAX_SECONDS"]
    return cap + 300.0 if cap > 0 else 86400.0


def _run(task: Task, job_id: int, kind: str = TRAINING.name) -> str:
    """The task: run one job of this kind by its id, if nobody else has it. How it ended."""
    backend: CeleryBackend = current_app.extensions["bpe_jobs"]
    with logs.job_context(str(kind), int(job_id)):
        status = backend.execute(int(job_id), str(kind))
        # Celery's own line says the task "succeeded" whatever became of the job; this says.
        outcome = "skipped" if status is None else str(status)
        log.info("%s job %s %s", kind, job_id, outcome, extra={"outcome": outcome})
    return outcome


def _count_shard(task: Task, job_id: int, position: int) -> str:
    """Count one shard of a training, if it is still to count; what became of it."""
    backend: CeleryBackend = current_app.extensions["bpe_jobs"]
    with logs.job_context(TRAINING.name, int(job_id)):
        outcome = count_one(
            ShardStore(backend.database),
            int(job_id),
            int(position),
            stale_after=backend.stale_after,
        )
        log.info(
            "shard %s of training %s %s", position, job_id, outcome, extra={"outcome": outcome}
        )
    return outcome


def _train_sent_before_upgrade(task: Task, job_id: int) -> str:
    return _run(task, job_id, TRAINING.name)


def _evaluate_sent_before_upgrade(task: Task, evaluation_id: int) -> str:
    return _run(task, evaluation_id, "evaluation")


class CeleryBackend(JobBackend):
    name = "celery"

    def __init__(
        self,
        database: Database,
        celery: Celery,
        *,
        kinds: JobKinds | None = None,
        limits: QueueLimits = DEFAULT_LIMITS,
        execution: str = "thread",
        progress_interval: float = 0.25,
        kill_after: float = 1.0,
        niceness: int = 0,
        max_seconds: float | None = None,
        stale_after: float = 30.0,
        sweep_interval: float = 5.0,
        resend_after: float = 60.0,
    ) -> None:
        super().__init__(
            database,
            kinds=kinds,
            limits=limits,
            execution=execution,
            progress_interval=progress_interval,
            kill_after=kill_after,
            niceness=niceness,
            max_seconds=max_seconds,
        )
        self.celery = celery
        self.stale_after = stale_after
        self.sweep_interval = sweep_interval
        self.resend_after = resend_after
        self._stopping = threading.Event()
        self._sweeper: threading.Thread | None = None

    # ----- the web side ------------------------------------------------------------------------
    def _dispatch(self, kind: JobKind, job_ids: list[int]) -> None:
        for job_id in job_ids:
            try:
                self._send(kind, job_id)
            except Exception as exc:
                log.exception("could not queue %s %s", kind.noun, job_id)
                for queued in job_ids:
                    kind.unsent(self.rows[kind.name], queued)
                raise JobQueueUnreachable(
                    "The job queue cannot be reached right now, so nothing was started."
                    " Try again in a minute."
                ) from exc

    def _send(self, kind: JobKind, job_id: int) -> None:
        self.celery.send_task(
            TASK_NAME, args=[job_id, kind.name], task_id=task_id(kind.name, job_id)
        )
        self.rows[kind.name].mark_sent([job_id])

    def not_ready(self) -> str | None:
        try:
            with self.celery.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, interval_start=0, timeout=2)
        except Exception as exc:  # noqa: BLE001 - whatever kombu raises, not ready
            return f"the job queue (broker) cannot be reached: {type(exc).__name__}"
        return None

    def start(self) -> None:
        """In a web process that runs jobs: sweep for lost jobs every few seconds."""
        if self._sweeper is not None or self.execution != "thread":
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
        """Running jobs without a heartbeat -> `interrupted`, and queued jobs whose message
        seems lost sent again (the database decides; a duplicate message is harmless, since
        only one claim of a job can win). Returns how many were interrupted."""
        swept = sum(rows.sweep_stale(self.stale_after) for rows in self.rows.values())
        if swept:
            log.warning("marked %d job(s) without a heartbeat interrupted", swept)
        self.resend()
        return swept

    def resend(self) -> int:
        """Send again every queued job unclaimed for longer than `resend_after`; how many."""
        sent = 0
        for name, rows in self.rows.items():
            for job_id in rows.to_resend(self.resend_after):
                self._send(self.kinds[name], job_id)
                log.warning("sent %s %d again: queued and unclaimed", name, job_id)
                sent += 1
        return sent

    def _sweep_loop(self) -> None:
        while not self._stopping.wait(self.sweep_interval):
            try:
                self.sweep()
            except Exception:
                log.exception("job sweep failed; retrying")

    # ----- the worker side ---------------------------------------------------------------------
    def execute(self, job_id: int, kind: str = TRAINING.name) -> JobStatus | None:
        """Claim the job and supervise its child until it has ended; None if the job was not
        ours to run (finished, cancelled, or running elsewhere)."""
        rows, supervisor = self.rows[kind], self.supervisors[kind]
        if not rows.claim(job_id, stale_after=self.stale_after):
            return None
        child = supervisor.spawn(job_id)
        try:
            while not supervisor.look(child, cancel=rows.cancel_requested(job_id)):
                time.sleep(self.progress_interval / 2)
        except BaseException:
            supervisor.interrupt(child)  # the worker is shutting down
            raise
        return rows.status(job_id)
