"""The training kind of job (`TRAINING`): what runs one training, wherever it runs (a child
process of the embedded runner, a Celery worker, or the test's own thread).

`run_job(store, job_id)` reads the job's settings and its corpus from the database, trains
with progress and stop checks, and records the outcome: the tokeniser and the job's status in
one transaction, or the reason it stopped. It only writes to a job that is `running` and has
no tokeniser yet, so running it twice for one id stores one tokeniser.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import bpe
from bpe.modes import get_mode
from bpe.shards import ShardCounter
from webapp.jobs.kind import DEFAULT_LIMITS, JobKind, QueueLimits
from webapp.jobs.learning import LearningWatch
from webapp.jobs.progress import Estimate, MergeEstimator, phase_of
from webapp.jobs.settings import JobSettings
from webapp.jobs.shard_counting import ShardCounting, counter_for
from webapp.jobs.shard_store import ShardStore
from webapp.jobs.store import JobRows, JobStore, Update
from webapp.storage import faults
from webapp.storage.db import Database
from webapp.storage.models import JobStatus, TrainingJob

# Seconds between two estimates (each looks at every sample) and two snapshots of what the
# page draws of the learning.
ESTIMATE_EVERY = 0.25


class PairNamer:
    """The two parts of the pair merged last, as JSON `[[id, hex or null], [id, hex or null]]`
    for the job page to draw as tokens. Every report lists the merges made since the one
    before (`bpe.Progress.learned`), so every learned token's bytes are known; null remains
    only for a trainer that does not list them."""

    def __init__(self, alphabet: list[str] | None) -> None:
        if alphabet is not None:  # characters (sorted) and </w>, as words mode numbers them
            self.known = {i: c.encode("utf-8") for i, c in enumerate(alphabet)}
            self.known[len(alphabet)] = b"</w>"
            self.base = len(alphabet) + 1
        else:
            self.known = {i: bytes([i]) for i in range(256)}
            self.base = 256

    def name(self, progress: bpe.Progress) -> str | None:
        if progress.pair is None:
            return None
        known = self.known
        for a, b, new_id in progress.learned:
            if a in known and b in known:
                known[new_id] = known[a] + known[b]
        left, right = progress.pair
        parts = [known.get(left), known.get(right)]
        if not progress.learned and parts[0] is not None and parts[1] is not None:
            known[self.base + progress.merges_done - 1] = parts[0] + parts[1]
        return json.dumps(
            [
                [i, p.hex() if p is not None else None]
                for i, p in zip((left, right), parts, strict=True)
            ]
        )


def train_job(
    settings: JobSettings,
    text: str,
    *,
    report: Callable[[Update], None],
    should_stop: Callable[[], bool],
    shard_counter: ShardCounter | None = None,
) -> bpe.Tokenizer:
    """Run bpe.train for a job's settings; `report` gets every progress step, with its phase,
    how far splitting has got, (while merging) the estimate of the time left, and what the
    job page draws of the learning (webapp/jobs/learning.py)."""
    mode = get_mode(settings.mode)
    # Words mode numbers characters sorted, as `bpe.word_sequences` does.
    alphabet = sorted({c for c in set(text) if not c.isspace()}) if mode.uses_alphabet else None
    namer = PairNamer(alphabet)
    pattern = settings.split_regex()
    watch = LearningWatch(settings.mode, text, pattern=pattern, alphabet=alphabet)
    splits = mode.uses_pattern or mode.uses_alphabet
    estimator = MergeEstimator()
    started = time.monotonic()
    estimated_at = [float("-inf")]
    estimate: list[Estimate | None] = [None]
    learning: list[str | None] = [None]
    drawn = [-1]  # merges done at the last snapshot

    def progress(p: bpe.Progress) -> None:
        now = time.monotonic()
        # The trainer calls this in its own thread: that thread's CPU time is the trainer's.
        estimator.observe(
            now, p.merges_done, p.merges_target, p.count, p.total_tokens, cpu=time.thread_time()
        )
        phase = phase_of(p.merges_done, p.merges_target, p.total_tokens)
        if phase == "splitting" and not splits:
            phase = "counting"  # naive mode splits nothing: its set-up reads the byte sequence
        pair = namer.name(p)
        watch.observe(p, now - started, namer.known)
        last = p.merges_done == p.merges_target and drawn[0] != p.merges_done
        if now - estimated_at[0] >= ESTIMATE_EVERY or learning[0] is None or last:
            estimated_at[0], learning[0], drawn[0] = now, watch.snapshot(), p.merges_done
            if phase == "merging":
                estimate[0] = estimator.estimate()
        # Between two estimates the time left runs down from the last one (its end stays put).
        made = estimate[0] if phase == "merging" else None
        shown = None if made is None else made.aged(now)
        # A target of 0 means the text is still being split: the target is not known yet.
        report(
            Update(
                p.merges_done,
                p.merges_target or None,
                pair,
                p.count,
                phase=phase,
                estimate=None if shown is None else shown.seconds,
                estimate_range=None if shown is None else (shown.low, shown.high),
                split=(p.split_done, p.split_total) if p.split_total else None,
                learning=learning[0],
            )
        )

    return bpe.train(
        text,
        progress=progress,
        should_stop=should_stop,
        shard_counter=shard_counter,
        **settings.train_kwargs(),
    )


class _Ticker:
    """Writes progress and a heartbeat at most every `interval` seconds, and learns from the
    same write whether a cancel was asked for (so a stop is seen within one interval)."""

    def __init__(
        self,
        store: JobStore,
        job_id: int,
        interval: float,
        on_write: Callable[[int], None] | None,
    ) -> None:
        self.store, self.job_id, self.interval = store, job_id, interval
        self.on_write = on_write
        self.started = time.monotonic()
        self.last = float("-inf")
        self.latest: Update | None = None
        self.cancelled = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def report(self, update: Update) -> None:
        changed = self.latest is None or self.latest.phase != update.phase
        self.latest = update
        now = time.monotonic()
        # A new phase is written at once, so the page never shows one that is over.
        if (
            changed
            or now - self.last >= self.interval
            or update.merges_done == update.merges_target
        ):
            self.last = now
            self.cancelled = self.store.write_progress(self.job_id, update, now - self.started)
            if self.on_write is not None:
                self.on_write(self.job_id)

    def beat(self) -> bool:
        """Called from the stop check: a heartbeat when one is due; True once cancelled."""
        now = time.monotonic()
        if not self.cancelled and now - self.last >= self.interval:
            self.last = now
            elapsed = now - self.started
            self.cancelled = self.store.write_progress(self.job_id, self.latest, elapsed)
        return self.cancelled


def run_job(
    store: JobStore,
    job_id: int,
    *,
    interval: float,
    stop: Callable[[], bool] | None = None,
    on_write: Callable[[int], None] | None = None,
    counting: ShardCounting | None = None,
) -> JobStatus | None:
    """Train a job already claimed (`running`) and record how it ended; returns that status.

    `stop` is an extra, cheaper stop check (the embedded runner's flag); the row's
    `cancel_requested` is read with every progress write and heartbeat either way.
    `on_write` (tests) is called with the job id after each progress write. With `counting`
    (the Celery backend), chunked and words training count their shards on every worker
    (webapp/jobs/shard_counting.py).
    """
    ticker = _Ticker(store, job_id, interval, on_write)

    def should_stop() -> bool:
        return (stop is not None and stop()) or ticker.beat()

    try:
        ticker.report(Update(phase="reading"))
        settings, text = store.job_input(job_id)
        counter = _shard_counter(counting, store, job_id, settings.mode, len(text))
        tok = train_job(
            settings, text, report=ticker.report, should_stop=should_stop, shard_counter=counter
        )
    except LookupError:
        return None  # the job is gone: nothing to record
    except bpe.TrainingCancelled:
        return _finish(store, job_id, JobStatus.CANCELLED, None, ticker.elapsed())
    except ValueError as exc:
        return _finish(store, job_id, JobStatus.FAILED, str(exc), ticker.elapsed())
    except Exception as exc:  # noqa: BLE001 - recorded as the job's error, for its owner to read
        error = f"training failed: {type(exc).__name__}: {exc}"
        return _finish(store, job_id, JobStatus.FAILED, error, ticker.elapsed())
    try:
        merges = len(tok.merges)
        ticker.report(Update(merges, max(merges, 1), None, None, phase="storing", estimate=0.0))
        stored = store.store_result(job_id, tok, ticker.elapsed())
    except Exception as exc:  # noqa: BLE001 - the job fails with the reason instead
        fault = faults.classify(exc)
        reason = fault.message if fault else f"{type(exc).__name__}: {exc}"[:500]
        error = f"The trained tokeniser could not be stored. {reason}"
        return _finish(store, job_id, JobStatus.FAILED, error, ticker.elapsed())
    return JobStatus.SUCCEEDED if stored else store.status(job_id)


def _shard_counter(
    counting: ShardCounting | None, store: JobStore, job_id: int, mode: str, chars: int
) -> ShardCounter | None:
    """Where a training's shards are counted; None: by the library in this process (naive
    mode, and text of one shard, which keeps the finer splitting bar of that path)."""
    if counting is None or mode not in ("chunked", "words") or chars <= counting.shard_chars:
        return None
    return counter_for(counting, ShardStore(store.database), job_id)


def _finish(
    store: JobStore, job_id: int, status: JobStatus, error: str | None, elapsed: float
) -> JobStatus | None:
    store.finish(job_id, status, error=error, elapsed=elapsed)
    return store.status(job_id)


class TrainingKind(JobKind):
    """Training: `training_jobs` rows, each trains one tokeniser (`run_job`)."""

    name = "training"
    model = TrainingJob
    process_name = "train"
    noun = "training"

    def __init__(self, counting: ShardCounting | None = None) -> None:
        self.counting = counting  # count shards on every Celery worker (the Celery backend)

    def make_rows(self, database: Database, limits: QueueLimits = DEFAULT_LIMITS) -> JobStore:
        return JobStore(
            database,
            max_running=limits.max_running,
            max_queued=limits.max_queued,
            per_owner=limits.per_owner,
        )

    def run(
        self,
        rows: JobRows,
        job_id: int,
        *,
        interval: float,
        stop: Callable[[], bool] | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> JobStatus | None:
        if not isinstance(rows, JobStore):
            raise TypeError(f"a training runs on the rows of `make_rows`, not {rows!r}")
        return run_job(
            rows, job_id, interval=interval, stop=stop, on_write=on_write, counting=self.counting
        )

    def unsent(self, rows: JobRows, job_id: int) -> None:
        # Nothing ran, nothing failed: the job is cancelled, and can be run again.
        rows.request_cancel(job_id)


TRAINING = TrainingKind()
