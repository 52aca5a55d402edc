"""The embedded backend: the queues are the tables, and one runner thread in the serving
process drives a child process per job, of every kind (webapp/jobs/process.py): up to
BPE_JOBS_RUNNING trainings and one job of each other kind at once.

- Exactly one process runs it: the one started by the README's run command (`webapp.wsgi`,
  `create_app(run_jobs=True)`), and only while it holds the runner lock, a file lock next to
  the database. `flask` commands and extra web processes never take it, so they never start,
  recover or interrupt anyone's jobs.
- On start-up a job left `running` by a crash or kill becomes `interrupted` (it can be run
  again); `queued` jobs are simply picked up.
- A lock that cannot even be opened (the folder is read-only, the disk full) does not stop
  the server: pages are served, new jobs are refused with 503 (`admit`), and the runner thread
  tries the lock again every LOCK_RETRY_SECONDS until it has it, or sees another process has.
- Tests use the `manual` execution (nothing runs until `run_next()` trains the oldest queued job
  in the calling thread, in-process) or `inline` (`submit` runs the job before returning).
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
from webapp.jobs.kind import DEFAULT_LIMITS, JobKind, JobKinds, QueueLimits
from webapp.jobs.process import JobChild
from webapp.refusals import UserError
from webapp.storage import faults
from webapp.storage.db import Database
from webapp.storage.models import JobStatus

log = logging.getLogger(__name__)
LOCK_RETRY_SECONDS = 2.0
NO_RUNNER = (
    "Jobs cannot run right now: the server cannot write to its storage, so nothing was queued."
    " Pages can still be viewed; try again later."
)


def runner_lock_path(database_url: str, instance_path: str) -> Path:
    """The lock that makes one process the runner of one database's jobs."""
    if database_url.startswith("sqlite:///") and ":memory:" not in database_url:
        return Path(database_url[len("sqlite:///") :] + ".runner.lock")
    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    return Path(instance_path) / f"job-runner-{digest}.lock"


class RunnerLock:
    """An exclusive, non-blocking file lock; the OS drops it when the process dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """True when held; False when another process holds it; OSError when it cannot be
        opened at all."""
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
        database: Database,
        *,
        kinds: JobKinds | None = None,
        limits: QueueLimits = DEFAULT_LIMITS,
        execution: str = "thread",
        lock_path: Path | None = None,
        progress_interval: float = 0.25,
        kill_after: float = 1.0,
        niceness: int = 0,
        max_seconds: float | None = None,
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
        self._lock = RunnerLock(lock_path) if lock_path is not None else None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._cancels: set[tuple[str, int]] = set()  # (kind, job id)
        self._cancels_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def admit(self) -> None:
        if self.unavailable is not None:
            raise UserError(self.unavailable, status=503)

    def _dispatch(self, kind: JobKind, job_ids: list[int]) -> None:
        self._wake.set()

    def _cancelled(self, kind: JobKind, job_id: int) -> None:
        with self._cancels_lock:
            self._cancels.add((kind.name, job_id))
        self._wake.set()

    # ----- start-up and shut-down ------------------------------------------------------------
    def start(self) -> None:
        """Become this database's job runner: recover what a dead runner left, start the thread.

        In the thread execution only the process holding the runner lock does this; another
        one logs why and leaves the jobs alone.
        """
        if self._thread is not None:
            return
        if self.execution == "thread" and self._lock is not None:
            held = self._try_lock()
            if held is None:  # the runner thread keeps trying
                self._start_thread()
                return
            if not held:
                return
        self._become_runner()

    def _try_lock(self) -> bool | None:
        """Take the runner lock: held, another process holds it (False), or it cannot be
        opened (None, and `unavailable` says why)."""
        assert self._lock is not None
        try:
            held = self._lock.acquire()
        except OSError as exc:
            if faults.classify(exc) is None:
                raise
            if self.unavailable is None:
                log.warning("jobs cannot run until the runner lock can be written: %s", exc)
            self.unavailable = NO_RUNNER
            return None
        self.unavailable = None
        if not held:
            # The other gunicorn workers of the README's server, or a second server by mistake.
            log.info("another process runs this database's jobs (%s is locked)", self._lock.path)
        return held

    def _become_runner(self) -> None:
        try:
            self.recover()
        except Exception as exc:
            if faults.classify(exc) is None:
                raise
            # A read-only or full database: pages are still served; jobs wait until it heals.
            log.warning("jobs left running could not be marked interrupted: %s", exc)
        if self.execution != "thread":
            return
        if self._thread is None:
            self._start_thread()

    def _start_thread(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="bpe-job-runner", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def _run(self) -> None:
        # Without the lock (it could not be opened): wait until it can be, then run.
        while self.unavailable is not None:
            if self._stopping.wait(LOCK_RETRY_SECONDS):
                return
            held = self._try_lock()
            if held is False:
                return  # another process took over: it runs the jobs
            if held:
                self._become_runner()
        self._loop()

    def recover(self) -> int:
        """Every kind's jobs left `running` by a dead runner -> `interrupted`; how many."""
        return sum(rows.recover() for rows in self.rows.values())

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
        # kind -> job id -> its child
        children: dict[str, dict[int, JobChild]] = {name: {} for name in self.kinds}
        last_cancel_check = 0.0
        try:
            while not self._stopping.is_set():
                try:
                    self._fill(children)
                    now = time.monotonic()
                    with self._cancels_lock:
                        cancels, self._cancels = self._cancels, set()
                    check_rows = now - last_cancel_check >= self.progress_interval
                    if check_rows and any(children.values()):
                        # Cancels asked through another process arrive only through the rows.
                        for name, mine in children.items():
                            cancels |= {(name, i) for i in self.rows[name].cancels_among(mine)}
                        last_cancel_check = now
                    for name, mine in children.items():
                        for job_id, child in list(mine.items()):
                            cancel = (name, job_id) in cancels
                            if self.supervisors[name].look(child, cancel=cancel):
                                del mine[job_id]
                                self._wake.set()  # a slot is free: start the next job now
                except Exception:
                    log.exception("job runner iteration failed; retrying")
                    time.sleep(0.5)
                self._wake.wait(0.05 if any(children.values()) else 1.0)
                self._wake.clear()
        finally:
            for name, mine in children.items():
                for child in mine.values():
                    self.supervisors[name].interrupt(child)

    def _fill(self, children: dict[str, dict[int, JobChild]]) -> None:
        for name, kind in self.kinds.items():
            rows, mine = self.rows[name], children[name]
            while len(mine) < rows.max_running:
                job_id = rows.claim_next()
                if job_id is None:
                    break
                try:
                    mine[job_id] = self._spawn(job_id, kind)
                except Exception as exc:
                    log.exception("could not start a %s process", kind.noun)
                    rows.finish(
                        job_id,
                        JobStatus.FAILED,
                        error=f"Could not start the {kind.noun} process: {exc}",
                    )

    def _spawn(self, job_id: int, kind: JobKind) -> JobChild:
        return self.supervisors[kind.name].spawn(job_id)
