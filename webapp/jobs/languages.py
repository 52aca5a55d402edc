"""Languages: a set of tokenisers counted on every complete text of the parallel text (the
UDHR), as a job kind.

- `LANGUAGES` is the kind (`language_jobs` rows; webapp/jobs/kind.py): the embedded runner or a
  Celery worker runs it in a child process, like an evaluation.
- `LanguageRows.submit` queues one within the queue's limits; `run_languages` is the task: read
  the complete texts and the tokenisers, count each language's tokens with each tokeniser
  (`bpe.languages.count_tokens`) with progress (counts done) and a heartbeat, stop when the row
  asks, and store every count with the job's success in one transaction.
- `Languages` is what the pages ask (`get_languages()`): queue one, cancel one.

What the pages read of a job is `webapp.storage.languages`, and how it is shown
`webapp.rendering.languages`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from sqlalchemy import func, insert, select, update

from bpe.languages import count_tokens
from webapp.jobs.backend import JobBackend
from webapp.jobs.kind import DEFAULT_LIMITS, JobKind, QueueLimits
from webapp.jobs.store import JobQueueFull, JobRows
from webapp.refusals import UserError
from webapp.storage.convert import load_tokenizer
from webapp.storage.db import Database, execute_update
from webapp.storage.models import (
    ACTIVE_STATUSES,
    JobStatus,
    LanguageCount,
    LanguageJob,
    Tokenizer,
    utcnow,
)
from webapp.storage.parallel_texts import complete_count, complete_texts

MAX_TOKENIZERS = 8  # one job's tokenisers: a table and a chart people can still read


class NoParallelText(UserError):
    status = 409


class LanguageRows(JobRows):
    """The `language_jobs` rows as a queue, admitting as many as the training queue does."""

    def __init__(self, database: Database, *, limits: QueueLimits = DEFAULT_LIMITS) -> None:
        super().__init__(database, LanguageJob, interrupted_message="The server stopped during it.")
        self.limits = limits

    def _start_values(self) -> dict[str, object]:
        return {"counts_done": 0, "error": None}

    def submit(self, tokenizer_ids: Sequence[int], *, owner_id: int | None = None) -> int:
        """Queue these tokenisers (1 to MAX_TOKENIZERS, distinct) for `owner_id`; 409 when the
        site has no parallel text yet, 429 beyond the limits."""
        ids = list(dict.fromkeys(tokenizer_ids))
        if not 1 <= len(ids) <= MAX_TOKENIZERS:
            raise UserError(
                f"Choose 1 to {MAX_TOKENIZERS} tokenisers ({len(ids)} chosen).", status=400
            )
        with self.database.session_scope() as session:
            texts = complete_count(session)
            if not texts:
                raise NoParallelText(
                    "This site has no parallel text yet: its operator runs "
                    "`flask --app webapp fetch-udhr` to fetch it."
                )
            active = LanguageJob.status.in_([s.value for s in ACTIVE_STATUSES])
            if owner_id is not None and self.limits.per_owner is not None:
                mine = session.scalar(
                    select(func.count())
                    .select_from(LanguageJob)
                    .where(active, LanguageJob.owner_id == owner_id)
                )
                if (mine or 0) >= self.limits.per_owner:
                    raise JobQueueFull(
                        f"You already have {mine} language table{'s' if mine != 1 else ''} "
                        f"queued or running, and one owner may have at most "
                        f"{self.limits.per_owner} at once. Wait for one to finish, or cancel one."
                    )
            waiting = session.scalar(select(func.count()).select_from(LanguageJob).where(active))
            limit = self.limits.max_running + self.limits.max_queued
            if (waiting or 0) >= limit:
                raise JobQueueFull(
                    f"The language queue is full ({limit} queued or running). Try again when "
                    "one has finished."
                )
            row = LanguageJob(
                owner_id=owner_id,
                status=JobStatus.QUEUED.value,
                tokenizer_ids=json.dumps(ids),
                counts_total=texts * len(ids),
            )
            session.add(row)
            session.flush()
            return row.id


def run_languages(
    rows: JobRows,
    job_id: int,
    *,
    interval: float = 0.25,
    stop: Callable[[], bool] | None = None,
) -> JobStatus | None:
    """Count every complete text with every tokeniser of the job (its row is `running`) and
    record how it ended."""
    database = rows.database
    started = time.monotonic()
    with database.read_scope() as session:
        job = session.get(LanguageJob, job_id)
        if job is None:
            return None
        tokenizers = []
        for tokenizer_id in job.tokenizer_id_list:
            row = session.get(Tokenizer, tokenizer_id)
            if row is not None and row.deleted_at is None:  # deleted since: left out
                tokenizers.append((row.id, load_tokenizer(session, row)))
        texts = [(t.id, t.text) for t in complete_texts(session, with_text=True)]
    total = len(texts) * len(tokenizers)
    counts: list[dict[str, int]] = []
    last = time.monotonic()
    try:
        for tokenizer_id, tok in tokenizers:
            for text_id, text in texts:
                counts.append(
                    {
                        "job_id": job_id,
                        "tokenizer_id": tokenizer_id,
                        "text_id": text_id,
                        "tokens": count_tokens(tok, text),
                    }
                )
                if time.monotonic() - last >= interval:
                    last = time.monotonic()
                    cancelled = rows.beat(job_id, counts_done=len(counts), counts_total=total)
                    if cancelled or (stop is not None and stop()):
                        rows.finish(job_id, JobStatus.CANCELLED, elapsed=time.monotonic() - started)
                        return JobStatus.CANCELLED
    except Exception as exc:  # noqa: BLE001 - recorded for the reader of the job's page
        rows.finish(
            job_id,
            JobStatus.FAILED,
            error=f"counting failed: {type(exc).__name__}: {exc}",
            elapsed=time.monotonic() - started,
        )
        return JobStatus.FAILED
    with database.session_scope() as session:
        # The counts and the job's success in one transaction: a killed child leaves neither.
        finished = execute_update(
            session,
            update(LanguageJob)
            .where(LanguageJob.id == job_id, LanguageJob.status == JobStatus.RUNNING)
            .values(
                status=JobStatus.SUCCEEDED.value,
                counts_done=len(counts),
                counts_total=total,
                finished_at=utcnow(),
                elapsed_seconds=time.monotonic() - started,
            ),
        )
        # Cancelled or taken over meanwhile: nothing is stored.
        if finished.rowcount and counts:
            session.execute(insert(LanguageCount), counts)
    return JobStatus.SUCCEEDED if finished.rowcount else rows.status(job_id)


class LanguagesKind(JobKind):
    name = "languages"
    model = LanguageJob
    process_name = "languages"
    noun = "language table"
    # The tests' manual execution steps trainings only; a table runs when it is asked for.
    waits_in_manual = False
    interrupted_message = "The server stopped during it."

    def make_rows(self, database: Database, limits: QueueLimits = DEFAULT_LIMITS) -> LanguageRows:
        return LanguageRows(database, limits=limits)

    def run(
        self,
        rows: JobRows,
        job_id: int,
        *,
        interval: float,
        stop: Callable[[], bool] | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> JobStatus | None:
        return run_languages(rows, job_id, interval=interval, stop=stop)

    def died(self, exitcode: int | None) -> tuple[JobStatus, str]:
        return JobStatus.FAILED, f"The language process ended early (exit code {exitcode})."

    def unsent(self, rows: JobRows, job_id: int) -> None:
        rows.mark_unsent(job_id, "The job queue could not be reached; ask for the table again.")


LANGUAGES = LanguagesKind()


class Languages:
    """What the pages ask of language tables; the app's job backend runs them."""

    def __init__(self, backend: JobBackend) -> None:
        self.backend = backend

    @property
    def rows(self) -> LanguageRows:
        return self.backend.rows_of(LANGUAGES.name, LanguageRows)

    def submit(self, tokenizer_ids: Sequence[int], *, owner_id: int | None = None) -> int:
        """Queue a table of these tokenisers; 400, 409, 429 as `LanguageRows.submit` says, a
        503 if the broker cannot take it."""
        job_id = self.rows.submit(tokenizer_ids, owner_id=owner_id)
        self.backend.queued(LANGUAGES.name, [job_id])
        return job_id

    def request_cancel(self, job_id: int) -> bool:
        return self.backend.cancel(LANGUAGES.name, job_id)
