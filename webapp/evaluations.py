"""Evaluations: one tokeniser measured on one corpus (`bpe.evaluate`), as a background job.

- The store functions own every query on the `evaluations` table.
- `run_evaluation(database, id)` is the task: read the corpus and the tokeniser, evaluate with
  progress (characters done) and a heartbeat written a few times a second, stop when the row's
  `cancel_requested` is set, record the figures or the reason.
- `EvaluationRunner` runs queued evaluations one at a time, each in a child process (pure-Python
  encoding holds the GIL for seconds), in the process that runs the training jobs; it is
  started and stopped with them. In the test modes (`inline`, `manual`) an evaluation runs in
  the request that asks for it. An evaluation left `running` by a dead process is shown as
  `interrupted` once its heartbeat is older than STALE_AFTER, and can be asked for again.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing
import threading
import time
from array import array
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flask import Flask
from sqlalchemy import select, update
from sqlalchemy.orm import Session, joinedload

from bpe.evaluate import EvaluationCancelled, evaluate
from webapp.convert import load_tokenizer
from webapp.db import Database
from webapp.models import Corpus, Evaluation, JobStatus, Tokenizer, utcnow

log = logging.getLogger(__name__)
STALE_AFTER = timedelta(seconds=30)
_CONTEXT = multiprocessing.get_context("spawn")
SORTS = {  # query value -> (label, key on an EvaluationView); the best first
    "bpt": ("bytes/token", lambda v: -(v.row.bytes_per_token or 0)),
    "cpt": ("chars/token", lambda v: -(v.chars_per_token or 0)),
    "tpw": ("tokens/word", lambda v: v.tokens_per_word or float("inf")),
    "used": ("vocab used", lambda v: -(v.vocab_share or 0)),
    "tokens": ("tokens", lambda v: v.row.tokens or float("inf")),
    "name": ("tokeniser", lambda v: v.name.lower()),
}


# ----- the store ---------------------------------------------------------------------------------
def request_evaluation(database: Database, *, tokenizer_id: int, corpus_id: int) -> int:
    """Queue this tokeniser on this corpus (again, unless it is queued or running now)."""
    with database.session_scope() as session:
        row = session.scalar(
            select(Evaluation).where(
                Evaluation.tokenizer_id == tokenizer_id, Evaluation.corpus_id == corpus_id
            )
        )
        if row is not None and status_of(row) in (JobStatus.QUEUED, JobStatus.RUNNING):
            return row.id
        if row is None:
            row = Evaluation(tokenizer_id=tokenizer_id, corpus_id=corpus_id)
            session.add(row)
        total = session.scalar(select(Corpus.char_count).where(Corpus.id == corpus_id)) or 0
        for name in ("byte_count", "characters", "words", "tokens", "vocab_size", "used"):
            setattr(row, name, None)
        row.bytes_per_token = row.seconds = row.never_used = row.longest = row.error = None
        row.status, row.chars_done, row.chars_total = JobStatus.QUEUED.value, 0, total
        row.cancel_requested, row.created_at = False, utcnow()
        row.started_at = row.finished_at = row.heartbeat_at = None
        session.flush()
        return row.id


def request_cancel(database: Database, evaluation_id: int) -> None:
    with database.session_scope() as session:
        session.execute(
            update(Evaluation).where(Evaluation.id == evaluation_id).values(cancel_requested=True)
        )


def status_of(row: Evaluation) -> JobStatus:
    """The row's status, with a `running` row whose heartbeat went stale shown interrupted."""
    status = JobStatus(row.status)
    beat = row.heartbeat_at or row.started_at
    if status == JobStatus.RUNNING and beat is not None and utcnow() - beat > STALE_AFTER:
        return JobStatus.INTERRUPTED
    return status


def claim_next(database: Database) -> int | None:
    with database.session_scope() as session:
        row = session.scalar(
            select(Evaluation)
            .where(Evaluation.status == JobStatus.QUEUED.value)
            .order_by(Evaluation.created_at, Evaluation.id)
            .limit(1)
        )
        if row is None:
            return None
        row.status, row.started_at, row.heartbeat_at = JobStatus.RUNNING.value, utcnow(), utcnow()
        return row.id


def recover(database: Database) -> None:
    """Start-up of the runner: what a dead runner left running is interrupted."""
    with database.session_scope() as session:
        session.execute(
            update(Evaluation)
            .where(Evaluation.status == JobStatus.RUNNING.value)
            .values(status=JobStatus.INTERRUPTED.value, error="The server stopped during it.")
        )


@dataclass(frozen=True)
class EvaluationView:
    """A row of the corpus page's table."""

    row: Evaluation
    tokenizer: Tokenizer
    status: JobStatus

    @property
    def name(self) -> str:
        t = self.tokenizer
        if t.imported:
            return t.reference or t.source_name or t.source_filename or "imported"
        return f"{t.mode} · {t.vocab_size:,}"

    @property
    def chars_per_token(self) -> float | None:
        r = self.row
        return r.characters / r.tokens if r.tokens and r.characters is not None else None

    @property
    def tokens_per_word(self) -> float | None:
        r = self.row
        return r.tokens / r.words if r.words and r.tokens is not None else None

    @property
    def vocab_share(self) -> float | None:
        r = self.row
        return r.used / r.vocab_size if r.vocab_size and r.used is not None else None

    @property
    def never_used_count(self) -> int | None:
        return None if self.row.never_used is None else len(self.row.never_used) // 4


def _visible(owner_id: int | None):
    """References (public) and the visitor's own tokenisers: a corpus page lists no other's."""
    return Tokenizer.reference.is_not(None) | (
        (Tokenizer.owner_id == owner_id) if owner_id is not None else False
    )


def evaluations_of_corpus(
    session: Session, corpus_id: int, *, sort: str = "bpt", owner_id: int | None = None
) -> list:
    rows = session.scalars(
        select(Evaluation)
        .join(Tokenizer, Tokenizer.id == Evaluation.tokenizer_id)
        .where(
            Evaluation.corpus_id == corpus_id,
            Tokenizer.deleted_at.is_(None),
            _visible(owner_id),
        )
        .options(joinedload(Evaluation.tokenizer))
    ).all()
    views = [EvaluationView(r, r.tokenizer, status_of(r)) for r in rows]
    key = SORTS.get(sort, SORTS["bpt"])[1]
    done = sorted((v for v in views if v.row.tokens is not None), key=key)
    return done + [v for v in views if v.row.tokens is None]


def table_context(
    session: Session, corpus: Corpus, sort: str, *, owner_id: int | None = None
) -> dict[str, Any]:
    """What the corpus page's evaluation table needs; an unknown sort is the default one."""
    if sort not in SORTS:
        sort = "bpt"
    views = evaluations_of_corpus(session, corpus.id, sort=sort, owner_id=owner_id)
    return {
        "evaluations": views,
        "sort": sort,
        "sorts": SORTS,
        "best_bpt": max((v.row.bytes_per_token or 0 for v in views), default=0),
        "active": any(v.status in (JobStatus.QUEUED, JobStatus.RUNNING) for v in views),
        "candidates": candidates(session, owner_id=owner_id),
    }


def get_evaluation(session: Session, corpus_id: int, evaluation_id: int) -> Evaluation | None:
    return session.scalar(
        select(Evaluation)
        .where(Evaluation.id == evaluation_id, Evaluation.corpus_id == corpus_id)
        .options(joinedload(Evaluation.tokenizer))
    )


def never_used_ids(row: Evaluation) -> list[int]:
    ids = array("I")
    ids.frombytes(row.never_used or b"")
    return ids.tolist()


def longest_pairs(row: Evaluation) -> list[tuple[int, int]]:
    return [(int(i), int(c)) for i, c in json.loads(row.longest or "[]")]


def candidates(session: Session, *, owner_id: int | None = None) -> list[Tokenizer]:
    """The references and the visitor's own live tokenisers, references first: what a corpus
    can be evaluated with (issue 8: no list hands out another owner's link)."""
    return list(
        session.scalars(
            select(Tokenizer)
            .where(Tokenizer.deleted_at.is_(None), _visible(owner_id))
            .order_by(Tokenizer.reference.is_(None), Tokenizer.id.desc())
            .limit(200)
        )
    )


# ----- the task ----------------------------------------------------------------------------------
def run_evaluation(database: Database, evaluation_id: int, *, interval: float = 0.25) -> None:
    """Evaluate (the row is `running`) and record how it ended."""
    with database.read_scope() as session:
        row = session.get(Evaluation, evaluation_id)
        if row is None:
            return
        tokenizer = session.get_one(Tokenizer, row.tokenizer_id)
        tok = load_tokenizer(session, tokenizer)
        text = session.execute(select(Corpus.text).where(Corpus.id == row.corpus_id)).scalar_one()
    last = [0.0]

    def write(values: dict[str, Any]) -> bool:
        with database.session_scope() as session:
            session.execute(
                update(Evaluation).where(Evaluation.id == evaluation_id).values(**values)
            )
            return bool(
                session.scalar(
                    select(Evaluation.cancel_requested).where(Evaluation.id == evaluation_id)
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


def _child_main(evaluation_id: int, database_url: str) -> None:
    database = Database(database_url)
    try:
        run_evaluation(database, evaluation_id)
    finally:
        database.dispose()


# ----- the runner --------------------------------------------------------------------------------
class EvaluationRunner:
    """One thread, one child process at a time; inline (tests) runs in the caller's thread."""

    def __init__(self, database: Database, *, inline: bool) -> None:
        self.database = database
        self.inline = inline
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._child: Any = None

    def submit(self, *, tokenizer_id: int, corpus_id: int) -> int:
        evaluation_id = request_evaluation(
            self.database, tokenizer_id=tokenizer_id, corpus_id=corpus_id
        )
        if self.inline:
            claimed = claim_next(self.database)
            while claimed is not None:
                run_evaluation(self.database, claimed)
                claimed = claim_next(self.database)
        self._wake.set()
        return evaluation_id

    def start(self) -> None:
        if self.inline or self._thread is not None:
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
            args=(evaluation_id, self.database.url),
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
            row = session.get(Evaluation, evaluation_id)
            if row is not None and row.status == JobStatus.RUNNING.value:
                row.status = JobStatus.INTERRUPTED.value
                row.error = f"The evaluation process ended early (exit code {child.exitcode})."
                row.finished_at = utcnow()


def init_app(app: Flask, *, run_jobs: bool) -> EvaluationRunner:
    runner = EvaluationRunner(
        app.extensions["bpe_db"], inline=app.config["JOBS_MODE"] in ("inline", "manual")
    )
    app.extensions["bpe_evaluations"] = runner
    if run_jobs:
        runner.start()
    return runner
