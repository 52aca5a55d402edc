"""Running evaluations (the rows and their queries are `webapp.jobs.evaluations`'s):

- `run_evaluation(database, id)` is the task: read the corpus and the tokeniser, evaluate with
  progress (characters done) and a heartbeat written a few times a second, stop when the row's
  `cancel_requested` is set, record the figures or the reason.
- `EvaluationRunner` runs queued evaluations one at a time, each in a child process (pure-Python
  encoding holds the GIL for seconds), in the process that runs the training jobs; it is
  started and stopped with them. In the test modes (`inline`, `manual`) an evaluation runs in
  the request that asks for it.
- On the Celery backend (BPE_JOB_BACKEND=celery) the web process only sends the evaluation's
  id (task `bpe.evaluate`, registered with the training task in
  webapp/jobs/celery_backend.py); a worker claims it (`evaluations.claim`: a duplicate message
  does nothing) and runs the same child process. The child sees a cancel at its next progress
  write, whichever process set the flag.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing
import os
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Flask
from sqlalchemy import select, update

from bpe.evaluate import EvaluationCancelled, evaluate
from webapp.jobs.embedded import RunnerLock, runner_lock_path
from webapp.jobs.evaluations import (
    Limits,
    claim,
    claim_next,
    mark_unsent,
    recover,
    request_evaluation,
)
from webapp.refusals import UserError
from webapp.storage.convert import load_tokenizer
from webapp.storage.db import Database
from webapp.storage.models import Corpus, EvaluationRow, JobStatus, Tokenizer, utcnow

log = logging.getLogger(__name__)
_CONTEXT = multiprocessing.get_context("spawn")


# ----- the task ----------------------------------------------------------------------------------
def run_evaluation(database: Database, evaluation_id: int, *, interval: float = 0.25) -> None:
    """Evaluate (the row is `running`) and record how it ended."""
    with database.read_scope() as session:
        row = session.get(EvaluationRow, evaluation_id)
        if row is None:
            return
        tokenizer = session.get_one(Tokenizer, row.tokenizer_id)
        tok = load_tokenizer(session, tokenizer)
        text = session.execute(select(Corpus.text).where(Corpus.id == row.corpus_id)).scalar_one()
    last = [0.0]

    def write(values: dict[str, Any]) -> bool:
        with database.session_scope() as session:
            session.execute(
                update(EvaluationRow).where(EvaluationRow.id == evaluation_id).values(**values)
            )
            return bool(
                session.scalar(
                    select(EvaluationRow.cancel_requested).where(EvaluationRow.id == evaluation_id)
                )
            )

    cancelled = [False]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            cancelled[0] = write({"chars_done": done, "heartbeat_at": utcnow()})

    try:
        result = evaluate(tok, [text], progress=progress, should_stop=lambda: cancelled[0])
    except EvaluationCancelled:
        write({"status": JobStatus.CANCELLED.value, "finished_at": utcnow()})
        return
    except Exception as exc:  # noqa: BLE001 - recorded for the reader of the corpus page
        error = f"evaluation failed: {type(exc).__name__}: {exc}"
        write({"status": JobStatus.FAILED.value, "error": error, "finished_at": utcnow()})
        return
    write(
        {
            "status": JobStatus.SUCCEEDED.value,
            "finished_at": utcnow(),
            "chars_done": result.characters,
            "byte_count": result.bytes,
            "characters": result.characters,
            "words": result.words,
            "tokens": result.tokens,
            "vocab_size": result.vocab_size,
            "used": result.used,
            "bytes_per_token": result.bytes_per_token,
            "seconds": result.seconds,
            "never_used": array("I", result.never_used).tobytes(),
            "longest": json.dumps([list(pair) for pair in result.longest]),
        }
    )


def _child_main(evaluation_id: int, database_url: str, niceness: int = 0) -> None:
    if niceness > 0:
        # An evaluation is batch work, like a training: requests come first (BPE_JOBS_NICE).
        os.nice(niceness)
    database = Database(database_url)
    try:
        run_evaluation(database, evaluation_id)
    finally:
        database.dispose()


# ----- the runner --------------------------------------------------------------------------------
class EvaluationRunner:
    """One thread, one child process at a time; inline (tests) runs in the caller's thread."""

    def __init__(
        self,
        database: Database,
        *,
        inline: bool,
        limits: Limits | None = None,
        lock_path: Path | None = None,
        send: Callable[[int], None] | None = None,
        niceness: int = 0,
    ) -> None:
        self.database = database
        self.niceness = niceness
        self.inline = inline
        self.limits = limits or Limits()
        # Several serving processes (gunicorn workers) each start a runner: the lock lets one
        # run the queue, so no start-up marks another process's running evaluation interrupted.
        self._lock = RunnerLock(lock_path) if lock_path is not None else None
        self.send = None if inline else send  # Celery: hand the id to a worker
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._child: Any = None

    def submit(self, *, tokenizer_id: int, corpus_id: int, owner_id: int | None = None) -> int:
        evaluation_id = request_evaluation(
            self.database,
            tokenizer_id=tokenizer_id,
            corpus_id=corpus_id,
            owner_id=owner_id,
            limits=self.limits,
        )
        if self.inline:
            claimed = claim_next(self.database)
            while claimed is not None:
                run_evaluation(self.database, claimed)
                claimed = claim_next(self.database)
        elif self.send is not None:
            try:
                self.send(evaluation_id)
            except Exception as exc:
                log.exception("could not queue evaluation %s", evaluation_id)
                mark_unsent(self.database, evaluation_id)
                raise UserError(
                    "The job queue cannot be reached right now, so nothing was started."
                    " Try again in a minute.",
                    status=503,
                ) from exc
        self._wake.set()
        return evaluation_id

    def execute(self, evaluation_id: int) -> JobStatus | None:
        """A worker's part: claim the evaluation and run it in a child process; None if it was
        not queued any more."""
        if not claim(self.database, evaluation_id):
            return None
        self._run_child(evaluation_id)
        with self.database.read_scope() as session:
            row = session.get(EvaluationRow, evaluation_id)
            return None if row is None else JobStatus(row.status)

    def start(self) -> None:
        # Celery: the workers run evaluations, and a running one may be a live worker's.
        if self.inline or self.send is not None or self._thread is not None:
            return
        if self._lock is not None and not self._lock.acquire():
            log.info("another process runs this database's evaluations (%s)", self._lock.path)
            return
        recover(self.database)
        self._thread = threading.Thread(target=self._loop, name="bpe-evaluations", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        child = self._child
        if child is not None and child.is_alive():
            child.terminate()
            child.join(2)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._lock is not None:
            self._lock.release()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                evaluation_id = claim_next(self.database)
                if evaluation_id is not None:
                    self._run_child(evaluation_id)
                    continue
            except Exception:
                log.exception("evaluation runner iteration failed; retrying")
            self._wake.wait(1.0)
            self._wake.clear()

    def _run_child(self, evaluation_id: int) -> None:
        child = _CONTEXT.Process(
            target=_child_main,
            args=(evaluation_id, self.database.url, self.niceness),
            name=f"bpe-evaluate-{evaluation_id}",
            daemon=True,
        )
        self._child = child
        child.start()
        while child.is_alive() and not self._stopping.is_set():
            child.join(0.5)
        if child.is_alive():
            child.terminate()
            child.join(2)
        self._child = None
        with self.database.session_scope() as session:
            row = session.get(EvaluationRow, evaluation_id)
            if row is not None and row.status == JobStatus.RUNNING.value:
                row.status = JobStatus.INTERRUPTED.value
                row.error = f"The evaluation process ended early (exit code {child.exitcode})."
                row.finished_at = utcnow()


def init_app(app: Flask, *, run_jobs: bool) -> EvaluationRunner:
    send = None
    if app.config["JOB_BACKEND"] == "celery":
        from webapp.jobs.celery_backend import send_evaluation

        celery = app.extensions["celery"]  # made by webapp.jobs.init_app, which runs first

        def send(evaluation_id: int) -> None:
            send_evaluation(celery, evaluation_id)

    runner = EvaluationRunner(
        app.extensions["bpe_db"],
        inline=app.config["JOBS_MODE"] in ("inline", "manual"),
        # The training queue's limits, for a queue of its own.
        limits=Limits(
            per_owner=app.config["JOBS_PER_OWNER"],
            max_queued=app.config["JOBS_MAX_RUNNING"] + app.config["JOBS_MAX_QUEUED"],
        ),
        lock_path=runner_lock_path(
            app.extensions["bpe_db"].url, app.instance_path, kind="evaluations"
        ),
        send=send,
        niceness=app.config["JOBS_NICE"],
    )
    app.extensions["bpe_evaluations"] = runner
    if run_jobs:
        runner.start()
    return runner
