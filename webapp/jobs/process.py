"""One job of any kind in a child process, and the supervision of it: shared by the embedded
runner (one thread supervising its children) and the Celery task (one child per task).

Pure-Python training and encoding hold the GIL for seconds at a time, so a job never runs in a
process that also answers requests or talks to a broker. The child does the whole task (the
kind's `run`, e.g. webapp/jobs/task.py: it reads its input, writes progress and the result
itself); its supervisor only passes a stop on, terminates a child that does not stop in time
or runs past the wall-time limit (BPE_JOB_MAX_SECONDS), and records a child that died without
recording anything. Whoever starts a child stops it,
and a child whose supervisor is gone (killed with -9) notices at its next stop check and leaves
quietly, marking the job `interrupted`.

A stop is asked through a pipe, not a multiprocessing Event: an Event is five named POSIX
semaphores, registered with multiprocessing's resource tracker and unregistered only by
finalizers at a clean exit. A server stopped with Ctrl-C (the terminal signals every process of
the group, and gunicorn's master signals its worker again) or killed skipped them, and the
tracker printed "leaked semaphore objects" at shutdown. A pipe is two file descriptors, which
the kernel closes whatever happens; its end closing also tells the child its supervisor is gone.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from webapp import logs
from webapp.jobs.kind import JobKind
from webapp.jobs.store import JobRows
from webapp.jobs.task import TRAINING
from webapp.storage.db import Database
from webapp.storage.models import JobStatus

log = logging.getLogger(__name__)
_CONTEXT = multiprocessing.get_context("spawn")


class SupervisorGone(BaseException):
    """Raised from the stop check of a child whose supervisor died. A BaseException, so no
    `except Exception` on the way (in the library or the task) records it as a failure."""


def child_main(
    job_id: int,
    database_url: str,
    stop_receiver: Any,
    interval: float,
    niceness: int = 0,
    kind: JobKind = TRAINING,
) -> None:
    """Entry point of a job's child process."""
    # Ctrl-C in the server's terminal reaches this process too; stopping it is the supervisor's
    # job (it marks the job interrupted), so no KeyboardInterrupt traceback here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if niceness > 0:
        # A job is batch work: on a busy machine the requests of the web process that started
        # it come first (the chunk-counting helpers a training starts inherit this).
        os.nice(niceness)
    supervisor = os.getppid()
    database = Database(database_url)
    rows = kind.make_rows(database)
    asked = False

    def stop() -> bool:
        nonlocal asked
        if os.getppid() != supervisor:
            raise SupervisorGone()
        if not asked and stop_receiver.poll():
            try:
                stop_receiver.recv_bytes()
            except EOFError:  # the supervisor's end closed before this process was reparented
                raise SupervisorGone() from None
            asked = True
        return asked

    try:
        with logs.job_context(kind.name, job_id):
            kind.run(rows, job_id, interval=interval, stop=stop)
    except SupervisorGone:
        # Nobody is left to record this job: say so on the row, then leave without a trace.
        # (If even that fails, the next start-up's recovery marks it.)
        with contextlib.suppress(Exception):
            rows.finish(job_id, JobStatus.INTERRUPTED, error=rows.interrupted_message)
    finally:
        database.dispose()


@dataclass
class JobChild:
    job_id: int
    process: Any
    stop_sender: Any  # a Connection: one message asks the child to stop
    started: float = field(default_factory=time.monotonic)
    cancel_sent: float | None = None

    def ended(self) -> None:
        self.stop_sender.close()


class Supervisor:
    """Starts the children of one kind's jobs and looks after them; used from one thread only."""

    def __init__(
        self,
        store: JobRows,
        *,
        interval: float,
        kill_after: float,
        niceness: int = 0,
        kind: JobKind = TRAINING,
        max_seconds: float | None = None,
    ) -> None:
        self.store = store  # the kind's rows (`kind.make_rows`)
        self.kind = kind
        self.interval = interval
        self.kill_after = kill_after
        self.niceness = niceness
        self.max_seconds = max_seconds  # a child running longer is killed (None: no limit)

    def spawn(self, job_id: int) -> JobChild:
        receiver, sender = _CONTEXT.Pipe(duplex=False)
        process = _CONTEXT.Process(
            target=child_main,
            args=(job_id, self.store.database.url, receiver, self.interval, self.niceness),
            kwargs={"kind": self.kind},
            name=f"bpe-{self.kind.process_name}-{job_id}",
            daemon=True,
        )
        try:
            process.start()
        except BaseException:
            sender.close()
            raise
        finally:
            receiver.close()  # the child has its own copy
        return JobChild(job_id, process, sender)

    def look(self, child: JobChild, *, cancel: bool) -> bool:
        """One look at a child; True once it has ended and its job is recorded."""
        now = time.monotonic()
        if cancel and child.cancel_sent is None:
            with contextlib.suppress(OSError):  # a child that already ended closed its end
                child.stop_sender.send_bytes(b"stop")
            child.cancel_sent = now
        if child.process.is_alive():
            if child.cancel_sent is not None and now - child.cancel_sent > self.kill_after:
                self._kill(child)  # it did not reach a stop check in time
                self.store.finish(child.job_id, JobStatus.CANCELLED, elapsed=self._age(child))
                return True
            if self.max_seconds is not None and now - child.started > self.max_seconds:
                # Killed, not asked: a job stuck inside one regex match or one long merge never
                # reaches its stop check, and the slot it holds is what the limit is for. Its
                # result cannot slip in after: `finish` and storing a result both want `running`.
                self._kill(child)
                status, error = self.kind.overran(self.max_seconds)
                self.store.finish(child.job_id, status, error=error, elapsed=self._age(child))
                return True
            return False
        child.process.join(2)
        child.ended()
        # The child records its own outcome; a job still running means it died first.
        if self.store.status(child.job_id) == JobStatus.RUNNING:
            if child.cancel_sent is not None:
                self.store.finish(child.job_id, JobStatus.CANCELLED, elapsed=self._age(child))
            elif child.process.exitcode == -signal.SIGTERM:
                # Stopped from outside, not crashed: a shut-down terminated it (multiprocessing's
                # exit handler ends daemonic children if the process exits before this runner
                # interrupts them; or the system's). It can be run again.
                self.store.finish(
                    child.job_id, JobStatus.INTERRUPTED, error=self.store.interrupted_message
                )
            else:
                status, error = self.kind.died(child.process.exitcode)
                self.store.finish(child.job_id, status, error=error, elapsed=self._age(child))
        return True

    def interrupt(self, child: JobChild) -> None:
        """Shut-down: stop the child and mark its job interrupted (it can be run again)."""
        self._kill(child)
        self.store.finish(child.job_id, JobStatus.INTERRUPTED, error=self.store.interrupted_message)

    def _kill(self, child: JobChild) -> None:
        child.process.terminate()
        child.process.join(2)
        if child.process.is_alive():
            child.process.kill()
            child.process.join(2)
        child.ended()

    @staticmethod
    def _age(child: JobChild) -> float:
        return time.monotonic() - child.started
