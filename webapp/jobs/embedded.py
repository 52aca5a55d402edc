"""The embedded backend: the queue is the table, and one runner thread in the serving process
drives a child process per job (webapp/jobs/process.py).

- Exactly one process runs it: the one started by the README's run command (`webapp.wsgi`,
  `create_app(run_jobs=True)`), and only while it holds the runner lock, a file lock next to
  the database. `flask` commands and extra web processes never take it, so they never start,
  recover or interrupt anyone's jobs.
- On start-up a job left `running` by a crash or kill becomes `interrupted` (it can be run
  again); `queued` jobs are simply picked up.
- Tests use `manual` mode (nothing runs until `run_next()` trains the oldest queued job in the
  calling thread, in-process) or `inline` mode (`submit` runs the job before returning).
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import logging
import os
import threading
import time
from pathlib import Path

from webapp.jobs.backend import JobBackend
from webapp.jobs.process import Supervisor, TrainingChild
from webapp.jobs.store import JobStore
from webapp.storage import faults
from webapp.storage.models import JobStatus

log = logging.getLogger(__name__)
MODES = ("thread", "inline", "manual")


def runner_lock_path(database_url: str, instance_path: str, kind: str = "runner") -> Path:
    """The lock that makes one process the runner of one database's jobs (kind "runner") or
    of its evaluations (kind "evaluations")."""
    if database_url.startswith("sqlite:///") and ":memory:" not in database_url:
        return Path(database_url[len("sqlite:///") :] + f".{kind}.lock")
    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    return Path(instance_path) / f"job-{kind}-{digest}.lock"


class RunnerLock:
    """An exclusive, non-blocking file lock; the OS drops it when the process dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


class EmbeddedRunner(JobBackend):
    name = "embedded"

    def __init__(
        self,
        store: JobStore,
        *,
        mode: str = "thread",
        lock_path: Path | None = None,
        progress_interval: float = 0.25,
        kill_after: float = 1.0,
        niceness: int = 0,
    ) -> None:
        super().__init__(store, mode=mode, progress_interval=progress_interval)
        self.supervisor = Supervisor(
            store, interval=progress_interval / 2, kill_after=kill_after, niceness=niceness
        )
        self._lock = RunnerLock(lock_path) if lock_path is not None else None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._cancels: set[int] = set()
        self._cancels_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _dispatch(self, job_ids: list[int]) -> None:
        if self.mode == "inline":
            for _ in job_ids:
                self.run_next()
        self._wake.set()

    def _cancelled(self, job_id: int) -> None:
        with self._cancels_lock:
            self._cancels.add(job_id)
        self._wake.set()

    # ----- start-up and shut-down ------------------------------------------------------------
    def start(self) -> None:
        """Become this database's job runner: recover what a dead runner left, start the thread.

        In thread mode only the process holding the runner lock does this; another one logs
        why and leaves the jobs alone.
        """
        if self._thread is not None:
            return
        if self.mode == "thread" and self._lock is not None and not self._lock.acquire():
            # The other gunicorn workers of the README's server, or a second server by mistake.
            log.info("another process runs this database's jobs (%s is locked)", self._lock.path)
            return
        try:
            self.recover()
        except Exception as exc:
            if faults.classify(exc) is None:
                raise
            # A read-only or full database: pages are still served; jobs wait until it heals.
            log.warning("jobs left running could not be marked interrupted: %s", exc)
        if self.mode != "thread":
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="bpe-job-runner", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def recover(self) -> int:
        return self.store.recover()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._lock is not None:
            self._lock.release()

    # ----- the runner thread -----------------------------------------------------------------
    def _loop(self) -> None:
        children: dict[int, TrainingChild] = {}
        last_cancel_check = 0.0
        try:
            while not self._stopping.is_set():
                try:
                    self._fill(children)
                    now = time.monotonic()
                    with self._cancels_lock:
                        cancels, self._cancels = self._cancels, set()
                    if children and now - last_cancel_check >= self.progress_interval:
                        # Cancels asked through another process arrive only through the rows.
                        cancels |= self.store.cancels_among(children)
                        last_cancel_check = now
                    for job_id, child in list(children.items()):
                        if self.supervisor.look(child, cancel=job_id in cancels):
                            del children[job_id]
                            self._wake.set()  # a slot is free: start the next job now, not in 1 s
                except Exception:
                    log.exception("job runner iteration failed; retrying")
                    time.sleep(0.5)
                self._wake.wait(0.05 if children else 1.0)
                self._wake.clear()
        finally:
            for child in children.values():
                self.supervisor.interrupt(child)

    def _fill(self, children: dict[int, TrainingChild]) -> None:
        while len(children) < self.store.max_running:
            job_id = self.store.claim_next()
            if job_id is None:
                return
            try:
                children[job_id] = self._spawn(job_id)
            except Exception as exc:
                log.exception("could not start a training process")
                self.store.finish(
                    job_id, JobStatus.FAILED, error=f"Could not start the training process: {exc}"
                )

    def _spawn(self, job_id: int) -> TrainingChild:
        return self.supervisor.spawn(job_id)
