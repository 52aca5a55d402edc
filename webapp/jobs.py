"""Training jobs: a queue in the database, one runner thread, training in child processes.

- Requests only write rows (`submit`, `request_cancel`, `rerun`) and wake the runner; the only
  thing that crosses from a request to the runner is a job id.
- The runner thread owns the queue: it claims the oldest queued job, starts a child process
  for it (pure-Python training would otherwise hold the GIL and starve page requests), reads
  the child's progress from a pipe, writes it to the job row a few times a second with a
  heartbeat, passes cancel requests on as a stop flag (terminating a child that does not stop
  in time), and writes the finished tokeniser, its merges and vocabulary in one transaction.
- On start-up a job left `running` by a crash or kill becomes `interrupted` (it can be run
  again); `queued` jobs are simply picked up, since the queue is the table.
- Tests use `manual` mode (nothing runs until `run_next()` trains the oldest queued job in the
  calling thread, in-process) or `inline` mode (`submit` runs the job before returning).
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from flask import Flask, current_app
from sqlalchemy import CursorResult, func, select, update

import bpe
from webapp.convert import store_tokenizer
from webapp.db import Database
from webapp.errors import UserError
from webapp.models import Corpus, TrainingJob, utcnow

log = logging.getLogger(__name__)

MAX_VOCAB_SIZE = 200_000
MAX_SPECIAL_TOKENS = 100
INTERRUPTED_MESSAGE = "The server stopped while this job was running. Run it again to retry."


class JobQueueFull(UserError):
    status = 429


# ----- settings ------------------------------------------------------------------------------
def parse_settings(form: dict[str, Any]) -> dict[str, Any]:
    """Check a train form (or JSON) and return the settings stored with the job.

    Raises UserError (422) with a message that says how to fix the field.
    """
    mode = str(form.get("mode") or "chunked")
    if mode not in bpe.MODES:
        raise UserError(f"Mode must be one of {', '.join(bpe.MODES)}.")
    trainer = str(form.get("trainer") or bpe.DEFAULT_TRAINER)
    if trainer not in bpe.TRAINERS:
        raise UserError(f"Trainer must be one of {', '.join(bpe.TRAINERS)}.")
    vocab_size = _int_field(form, "vocab_size", 1000, low=1, high=MAX_VOCAB_SIZE)
    min_frequency = _int_field(form, "min_frequency", 1, low=1, high=10**9)
    pattern = None
    if mode == "chunked":
        pattern = str(form.get("pattern") or "gpt4").strip()
        if pattern == "custom":
            pattern = str(form.get("custom_pattern") or "").strip()
        try:
            bpe.resolve_pattern(pattern)
        except ValueError as exc:
            raise UserError(f"The split pattern does not work: {exc}") from None
    specials = form.get("special_tokens") or []
    if isinstance(specials, str):
        specials = [s.strip() for s in specials.replace(",", "\n").splitlines()]
    specials = [s for s in specials if isinstance(s, str) and s]
    if len(specials) > MAX_SPECIAL_TOKENS:
        raise UserError(f"At most {MAX_SPECIAL_TOKENS} special tokens, please.")
    if len(set(specials)) != len(specials):
        raise UserError("A special token is listed twice.")
    if mode != "words" and vocab_size < 256 + len(specials):
        raise UserError(
            f"Vocab size must be at least {256 + len(specials)}: 256 byte tokens"
            f" + {len(specials)} special tokens."
        )
    return {
        "mode": mode,
        "pattern": pattern,
        "trainer": trainer,
        "vocab_size": vocab_size,
        "min_frequency": min_frequency,
        "special_tokens": specials,
    }


def _int_field(form: dict[str, Any], name: str, default: int, *, low: int, high: int) -> int:
    raw = form.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise UserError(f"{name.replace('_', ' ').capitalize()} must be a whole number.") from None
    if not low <= value <= high:
        raise UserError(f"{name.replace('_', ' ').capitalize()} must be between {low} and {high}.")
    return value


# ----- what a training run needs and gives -----------------------------------------------------
@dataclass
class Update:
    """The latest progress of a running job, as the runner writes it to the row."""

    merges_done: int = 0
    merges_target: int | None = None
    pair: str | None = None
    count: int | None = None


def load_job_input(database: Database, job_id: int) -> tuple[dict[str, Any], str]:
    with database.read_scope() as session:
        job = session.get(TrainingJob, job_id)
        if job is None:
            raise LookupError(f"job {job_id} does not exist")
        text = session.execute(select(Corpus.text).where(Corpus.id == job.corpus_id)).scalar_one()
        return job.settings_dict, text


class PairNamer:
    """Readable names for the pair merged last, built from the progress reports themselves."""

    def __init__(self, settings: dict[str, Any], text: str) -> None:
        if settings["mode"] == "words":
            alphabet = sorted({c for c in set(text) if not c.isspace()})
            self.known = {i: c.encode("utf-8") for i, c in enumerate(alphabet)}
            self.known[len(alphabet)] = b"</w>"
            self.base = len(alphabet) + 1
        else:
            self.known = {i: bytes([i]) for i in range(256)}
            self.base = 256

    def name(self, progress: bpe.Progress) -> str | None:
        if progress.pair is None:
            return None
        left, right = progress.pair
        parts = [self.known.get(left), self.known.get(right)]
        if parts[0] is not None and parts[1] is not None:
            self.known[self.base + progress.merges_done - 1] = parts[0] + parts[1]
        return " + ".join(
            repr(p.decode("utf-8", errors="replace")) if p is not None else f"#{i}"
            for p, i in zip(parts, (left, right), strict=False)
        )


def train_job(
    settings: dict[str, Any],
    text: str,
    *,
    report: Callable[[Update], None],
    should_stop: Callable[[], bool],
) -> bpe.Tokenizer:
    """Run bpe.train for a job's settings; `report` gets every progress step."""
    namer = PairNamer(settings, text)

    def progress(p: bpe.Progress) -> None:
        # A target of 0 means the text is still being split: the target is not known yet.
        report(Update(p.merges_done, p.merges_target or None, namer.name(p), p.count))

    kwargs: dict[str, Any] = {}
    if settings["mode"] == "chunked":
        kwargs["pattern"] = settings["pattern"]
    return bpe.train(
        text,
        vocab_size=settings["vocab_size"],
        mode=settings["mode"],
        trainer=settings["trainer"],
        special_tokens=settings["special_tokens"],
        min_frequency=settings["min_frequency"],
        progress=progress,
        should_stop=should_stop,
        **kwargs,
    )


def _child_main(job_id: int, database_url: str, conn, stop_event, interval: float) -> None:
    """Entry point of a training child process: reads its input, trains, reports on `conn`."""
    try:
        database = Database(database_url)
        settings, text = load_job_input(database, job_id)
        database.engine.dispose()
        last_sent = 0.0

        def report(update: Update) -> None:
            nonlocal last_sent
            now = time.monotonic()
            if now - last_sent >= interval or update.merges_done == update.merges_target:
                conn.send(("progress", update))
                last_sent = now

        tok = train_job(settings, text, report=report, should_stop=stop_event.is_set)
        conn.send(("result", bpe.formats.dumps(tok)))
    except bpe.TrainingCancelled as exc:
        conn.send(("cancelled", exc.merges_done))
    except ValueError as exc:
        conn.send(("error", str(exc)))
    except Exception as exc:  # noqa: BLE001 - the parent records it as the job's error
        conn.send(("error", f"training failed: {type(exc).__name__}: {exc}"))
    finally:
        conn.close()


@dataclass
class _Child:
    process: Any
    conn: Any
    stop_event: Any
    started: float = field(default_factory=time.monotonic)
    latest: Update = field(default_factory=Update)
    written: Update | None = None
    last_write: float = 0.0
    cancel_sent: float | None = None


# ----- the runner ----------------------------------------------------------------------------
class JobRunner:
    def __init__(
        self,
        database: Database,
        *,
        mode: str = "thread",
        max_running: int = 1,
        max_queued: int = 8,
        progress_interval: float = 0.25,
        kill_after: float = 1.0,
    ) -> None:
        self.database = database
        self.mode = mode
        self.max_running = max_running
        self.max_queued = max_queued
        self.progress_interval = progress_interval
        self.kill_after = kill_after
        # Tests: called with the job id after each progress write of an in-process run.
        self.progress_hook: Callable[[int], None] | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._cancels: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._context = multiprocessing.get_context("spawn")

    # ----- called from requests (any thread): only ids and plain settings come in ----------
    def submit(
        self, corpus_id: int, settings: dict[str, Any], *, rerun_of: int | None = None
    ) -> int:
        with self.database.session_scope() as session:
            active = session.execute(
                select(func.count())
                .select_from(TrainingJob)
                .where(TrainingJob.status.in_(("queued", "running")))
            ).scalar_one()
            if active >= self.max_running + self.max_queued:
                raise JobQueueFull(
                    f"The training queue is full ({self.max_running} running,"
                    f" {self.max_queued} waiting). Try again when a job has finished,"
                    " or cancel one."
                )
            job = TrainingJob(
                corpus_id=corpus_id,
                settings=json.dumps(settings, ensure_ascii=False),
                status="queued",
                rerun_of_id=rerun_of,
                created_at=utcnow(),
            )
            session.add(job)
            session.flush()
            job_id = job.id
        if self.mode == "inline":
            self.run_next()
        self._wake.set()
        return job_id

    def request_cancel(self, job_id: int) -> bool:
        """Ask a queued or running job to stop. A queued one is cancelled at once."""
        with self.database.session_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None or job.finished:
                return False
            job.cancel_requested = True
            if job.status == "queued":
                job.status = "cancelled"
                job.finished_at = utcnow()
        with self._lock:
            self._cancels.add(job_id)
        self._wake.set()
        return True

    def rerun(self, job_id: int) -> int:
        with self.database.read_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None:
                raise LookupError(job_id)
            if not job.finished or job.status == "succeeded":
                raise UserError("Only a failed, cancelled or interrupted job can be run again.")
            corpus_id, settings = job.corpus_id, job.settings_dict
        return self.submit(corpus_id, settings, rerun_of=job_id)

    # ----- start-up and shut-down ------------------------------------------------------------
    def recover(self) -> int:
        """Jobs left `running` by a previous process become `interrupted`; returns how many."""
        with self.database.session_scope() as session:
            # An UPDATE gives a CursorResult; Session.execute is typed for the SELECT case.
            result = cast(
                CursorResult[Any],
                session.execute(
                    update(TrainingJob)
                    .where(TrainingJob.status == "running")
                    .values(status="interrupted", error=INTERRUPTED_MESSAGE, finished_at=utcnow())
                ),
            )
            return result.rowcount or 0

    def start(self) -> None:
        if self.mode != "thread" or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="bpe-job-runner", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    # ----- the runner thread -----------------------------------------------------------------
    def _loop(self) -> None:
        children: dict[int, _Child] = {}
        try:
            while not self._stopping.is_set():
                try:
                    while len(children) < self.max_running:
                        job_id = self._claim_next()
                        if job_id is None:
                            break
                        try:
                            children[job_id] = self._spawn(job_id)
                        except Exception as exc:
                            log.exception("could not start a training process")
                            self._finish(
                                job_id,
                                "failed",
                                error=f"Could not start the training process: {exc}",
                            )
                    for job_id, child in list(children.items()):
                        if self._drive(job_id, child):
                            del children[job_id]
                except Exception:
                    log.exception("job runner iteration failed; retrying")
                    time.sleep(0.5)
                self._wake.wait(0.05 if children else 1.0)
                self._wake.clear()
        finally:
            for job_id, child in children.items():
                child.process.terminate()
                child.process.join(2)
                self._finish(job_id, "interrupted", error=INTERRUPTED_MESSAGE)

    def _claim_next(self) -> int | None:
        """Oldest queued job -> running. Returns its id, or None when the queue is empty."""
        with self.database.session_scope() as session:
            job = session.scalar(
                select(TrainingJob)
                .where(TrainingJob.status == "queued")
                .order_by(TrainingJob.id)
                .limit(1)
            )
            if job is None:
                return None
            now = utcnow()
            job.status, job.started_at, job.heartbeat_at = "running", now, now
            job.merges_done, job.elapsed_seconds = 0, 0.0
            return job.id

    def _spawn(self, job_id: int) -> _Child:
        parent_conn, child_conn = self._context.Pipe(duplex=False)
        stop_event = self._context.Event()
        process = self._context.Process(
            target=_child_main,
            args=(job_id, self.database.url, child_conn, stop_event, self.progress_interval / 2),
            name=f"bpe-train-{job_id}",
            daemon=True,
        )
        process.start()
        child_conn.close()
        return _Child(process, parent_conn, stop_event)

    def _drive(self, job_id: int, child: _Child) -> bool:
        """One look at a running child; True once the job is finished and recorded."""
        alive = child.process.is_alive()  # before draining, so a last message is not missed
        outcome, closed = None, False
        try:
            while outcome is None and child.conn.poll():
                kind, payload = child.conn.recv()
                if kind == "progress":
                    child.latest = payload
                else:
                    outcome = (kind, payload)
        except (EOFError, OSError):
            closed = True
        now = time.monotonic()
        if outcome is not None:
            child.process.join(5)
            self._record_outcome(job_id, child, outcome)
            return True
        with self._lock:
            cancel = job_id in self._cancels
        if now - child.last_write >= self.progress_interval:
            cancel = self._write_progress(job_id, child.latest, now - child.started) or cancel
            child.last_write = now
        if cancel and child.cancel_sent is None:
            child.stop_event.set()
            child.cancel_sent = now
        if child.cancel_sent is not None and now - child.cancel_sent > self.kill_after:
            child.process.terminate()  # it did not reach a stop check in time
            child.process.join(2)
            self._finish(job_id, "cancelled")
            return True
        if closed or not alive:
            child.process.join(2)
            if child.cancel_sent is not None:
                self._finish(job_id, "cancelled")
            else:
                code = child.process.exitcode
                self._finish(
                    job_id, "failed", error=f"The training process died (exit code {code})."
                )
            return True
        return False

    def _record_outcome(self, job_id: int, child: _Child, outcome: tuple[str, Any]) -> None:
        kind, payload = outcome
        elapsed = time.monotonic() - child.started
        if kind == "result":
            self._store_result(job_id, bpe.formats.loads(payload), elapsed)
        elif kind == "cancelled":
            self._finish(job_id, "cancelled", elapsed=elapsed)
        else:
            self._finish(job_id, "failed", error=str(payload), elapsed=elapsed)
        with self._lock:
            self._cancels.discard(job_id)

    # ----- writes shared by the thread and the in-process runs -------------------------------
    def _write_progress(self, job_id: int, update_: Update, elapsed: float) -> bool:
        """Write progress and a heartbeat; returns whether a cancel has been requested."""
        estimate = None
        if update_.merges_done and update_.merges_target:
            remaining = update_.merges_target - update_.merges_done
            estimate = elapsed / update_.merges_done * remaining
        with self.database.session_scope() as session:
            session.execute(
                update(TrainingJob)
                .where(TrainingJob.id == job_id, TrainingJob.status == "running")
                .values(
                    merges_done=update_.merges_done,
                    merges_target=update_.merges_target,
                    current_pair=update_.pair,
                    current_count=update_.count,
                    elapsed_seconds=elapsed,
                    estimate_seconds=estimate,
                    heartbeat_at=utcnow(),
                )
            )
            return bool(
                session.scalar(select(TrainingJob.cancel_requested).where(TrainingJob.id == job_id))
            )

    def _store_result(self, job_id: int, tok: bpe.Tokenizer, elapsed: float) -> None:
        """The tokeniser, its merges, its vocabulary and the job's status: one transaction."""
        with self.database.session_scope() as session:
            job = session.get(TrainingJob, job_id)
            if job is None or job.status != "running":
                return
            if job.cancel_requested:
                job.status, job.finished_at = "cancelled", utcnow()
                return
            row = store_tokenizer(session, tok, corpus_id=job.corpus_id)
            job.status = "succeeded"
            job.tokenizer_id = row.id
            job.merges_done = len(tok.merges)
            if tok.training is not None:
                job.merges_target = max(len(tok.merges), job.merges_target or 0)
            job.elapsed_seconds = elapsed
            job.estimate_seconds = 0.0
            job.finished_at = job.heartbeat_at = utcnow()

    def _finish(
        self, job_id: int, status: str, *, error: str | None = None, elapsed: float | None = None
    ) -> None:
        with self.database.session_scope() as session:
            values: dict[str, Any] = {"status": status, "finished_at": utcnow(), "error": error}
            if elapsed is not None:
                values["elapsed_seconds"] = elapsed
            session.execute(
                update(TrainingJob)
                .where(TrainingJob.id == job_id, TrainingJob.status == "running")
                .values(**values)
            )

    # ----- in-process runs: manual and inline modes ------------------------------------------
    def run_next(self) -> int | None:
        """Train the oldest queued job in this thread, start to finish. Returns its id."""
        job_id = self._claim_next()
        if job_id is None:
            return None
        started = time.monotonic()
        last_write = -1.0

        def report(update_: Update) -> None:
            nonlocal last_write
            now = time.monotonic()
            if now - last_write >= self.progress_interval:
                self._write_progress(job_id, update_, now - started)
                last_write = now
                if self.progress_hook is not None:
                    self.progress_hook(job_id)

        def should_stop() -> bool:
            with self.database.read_scope() as session:
                return bool(
                    session.scalar(
                        select(TrainingJob.cancel_requested).where(TrainingJob.id == job_id)
                    )
                )

        try:
            settings, text = load_job_input(self.database, job_id)
            tok = train_job(settings, text, report=report, should_stop=should_stop)
        except bpe.TrainingCancelled:
            self._finish(job_id, "cancelled", elapsed=time.monotonic() - started)
        except ValueError as exc:
            self._finish(job_id, "failed", error=str(exc), elapsed=time.monotonic() - started)
        else:
            self._store_result(job_id, tok, time.monotonic() - started)
        return job_id


# ----- Flask wiring --------------------------------------------------------------------------
def init_app(app: Flask, *, own_jobs: bool = True) -> JobRunner:
    runner = JobRunner(
        app.extensions["bpe_db"],
        mode=app.config["JOBS_MODE"],
        max_running=app.config["JOBS_MAX_RUNNING"],
        max_queued=app.config["JOBS_MAX_QUEUED"],
        progress_interval=app.config["JOBS_PROGRESS_INTERVAL"],
        kill_after=app.config["JOBS_KILL_AFTER"],
    )
    app.extensions["bpe_jobs"] = runner
    if own_jobs:
        runner.recover()
        runner.start()
        if runner.mode == "thread":
            atexit.register(runner.stop)
    return runner


def get_runner() -> JobRunner:
    return current_app.extensions["bpe_jobs"]
