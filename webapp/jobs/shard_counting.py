"""Counting one training's pre-tokens on every Celery worker (docs/operations.md, "Counting on
every worker"): the map over shards and the sum of `bpe.shards`, with the database between.

The training (in its child process, on the worker that claimed the job) cuts the corpus where
no pre-token can straddle a cut, writes the shards to `count_shards` and sends a Celery group
of counting tasks, one per shard, that any worker may run (`count_one`). It then waits for the
shards to be counted, counting one itself whenever none has been finished for `help_after`
seconds (every worker busy, this one's slot included: so a site with one worker still trains),
and adds the counts up in shard order: the unsharded count, the same merges. A cancel is seen
between shards; a counter that dies holds its shard until the claim is `stale_after` seconds
old, then anyone counts it again; the counts of a claim that was taken over are refused.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from bpe.shards import ShardCounter, ShardRule, add_counts, cut_text, rule_for
from bpe.training_types import StopFn, TrainingCancelled
from webapp.jobs.settings import JobSettings
from webapp.jobs.shard_store import ShardStore

log = logging.getLogger(__name__)
COUNT_TASK = "bpe.count_shard"
_POLL = 0.05  # seconds between looks at the shards while others count them


@dataclass(frozen=True)
class ShardCounting:
    """How a Celery training counts: carried to the job's child with its kind."""

    broker_url: str
    queue: str
    shard_chars: int  # a shard is cut at the first safe place after this many characters
    help_after: float = 1.0
    stale_after: float = 30.0

    def send(self, job_id: int, shards: int) -> None:
        """One Celery group of counting tasks, a shard each (only ids travel)."""
        from celery import Celery, group

        app = Celery("bpe-count", broker=self.broker_url)
        try:
            tasks = [
                app.signature(COUNT_TASK, args=(job_id, position), queue=self.queue)
                for position in range(shards)
            ]
            group(tasks, app=app).apply_async()
        finally:
            app.close()


def counter_for(counting: ShardCounting, store: ShardStore, job_id: int) -> ShardCounter:
    """A `bpe.train(shard_counter=...)` that counts this job's shards on the workers."""

    def count(
        text: str, rule: ShardRule, should_stop: StopFn | None, advanced: Callable[[int], None]
    ) -> Counter[str]:
        shards = cut_text(text, rule, shard_chars=counting.shard_chars)
        if len(shards) < 2:  # nothing to share out
            return add_counts(rule.count(shard) for shard in shards)
        total = len(shards)
        store.put(job_id, shards)
        del shards
        try:
            counting.send(job_id, total)
            _wait_for_counts(counting, store, job_id, rule, should_stop, advanced, len(text))
            counts = add_counts(store.counted(job_id))
            log.info(
                "counted %d shards of training %d: %s",
                total,
                job_id,
                store.counters(job_id),
                extra={"shards": total},
            )
            return counts
        finally:
            store.clear(job_id)

    return count


def _wait_for_counts(
    counting: ShardCounting,
    store: ShardStore,
    job_id: int,
    rule: ShardRule,
    should_stop: StopFn | None,
    advanced: Callable[[int], None],
    chars: int,
) -> None:
    seen, since = -1, time.monotonic()
    helping = False  # once it has had to help, it goes on counting beside the workers
    while True:
        if should_stop is not None and should_stop():
            raise TrainingCancelled(0)
        done, total = store.progress(job_id)
        advanced(chars * done // max(total, 1))
        if done == total:
            return
        now = time.monotonic()
        if done != seen:
            seen, since = done, now
        if helping or now - since >= counting.help_after:
            claimed = store.claim_next(job_id, stale_after=counting.stale_after)
            if claimed is not None:
                position, text = claimed
                store.done(job_id, position, dict(rule.count(text)))
                helping = True
                continue
        time.sleep(_POLL)


def count_one(store: ShardStore, job_id: int, position: int, *, stale_after: float) -> str:
    """A counting task: count this shard if it is still to count; what became of it."""
    settings_json = store.job_settings(job_id)
    if settings_json is None:
        return "skipped"  # the job ended (cancelled, failed): nothing to count for
    text = store.claim(job_id, position, stale_after=stale_after)
    if text is None:
        return "skipped"  # counted, or being counted, by someone else
    counts = rule_of(JobSettings.from_json(settings_json)).count(text)
    return "counted" if store.done(job_id, position, dict(counts)) else "superseded"


def rule_of(settings: JobSettings) -> ShardRule:
    """The rule the job's training cuts and counts by (as webapp/jobs/task.py resolves it)."""
    return rule_for(settings.mode, settings.split_regex())
