"""A training's shards in the database, counted by whoever claims each first: the counting
tasks a Celery training sends to every worker, and the training itself when no worker takes
one (docs/operations.md, "Counting on every worker").

The database decides, as for jobs: a shard is claimed by one conditional UPDATE, so two
workers never count the same shard into the sum; a claim older than `stale_after` seconds by
the database's clock (its counter died) may be taken over; a shard's counts are written once,
by the claim that holds it. The training adds the counts up in shard order (bpe.shards), so the
sum is the unsharded count and the merges are the same.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from datetime import timedelta

from sqlalchemy import delete, func, select, update

from webapp.jobs.store import database_clock
from webapp.storage.db import Database, execute_update
from webapp.storage.models import CountShard, TrainingJob, db_now

TODO, COUNTING, DONE = "todo", "counting", "done"
_INSERT_BATCH = 64  # shards per INSERT (each up to a few MB of text)


def counter_name() -> str:
    """Who counted a shard: this machine and process."""
    return f"{socket.gethostname()}:{os.getpid()}"[:255]


class ShardStore:
    def __init__(self, database: Database) -> None:
        self.database = database

    def put(self, job_id: int, shards: list[str]) -> None:
        """The job's shards, in order, all to count (an earlier attempt's rows replaced)."""
        with self.database.session_scope() as session:
            session.execute(delete(CountShard).where(CountShard.job_id == job_id))
            for start in range(0, len(shards), _INSERT_BATCH):
                session.add_all(
                    CountShard(job_id=job_id, position=start + i, state=TODO, text=text)
                    for i, text in enumerate(shards[start : start + _INSERT_BATCH])
                )
                session.flush()

    def claim(self, job_id: int, position: int, *, stale_after: float) -> str | None:
        """This shard's text, now ours to count; None if it is counted or someone counts it."""
        with self.database.session_scope() as session:
            cutoff = database_clock(session) - timedelta(seconds=stale_after)
            claimable = (CountShard.state == TODO) | (
                (CountShard.state == COUNTING) & (CountShard.claimed_at < cutoff)
            )
            result = execute_update(
                session,
                update(CountShard)
                .where(CountShard.job_id == job_id, CountShard.position == position, claimable)
                .values(state=COUNTING, claimed_at=db_now(), counted_by=counter_name()),
            )
            if not result.rowcount:
                return None
            return session.scalar(
                select(CountShard.text).where(
                    CountShard.job_id == job_id, CountShard.position == position
                )
            )

    def claim_next(self, job_id: int, *, stale_after: float) -> tuple[int, str] | None:
        """The first shard left to count, claimed: (position, text); None when none is left."""
        while True:
            with self.database.read_scope() as session:
                cutoff = database_clock(session) - timedelta(seconds=stale_after)
                position = session.scalar(
                    select(CountShard.position)
                    .where(
                        CountShard.job_id == job_id,
                        (CountShard.state == TODO)
                        | ((CountShard.state == COUNTING) & (CountShard.claimed_at < cutoff)),
                    )
                    .order_by(CountShard.position)
                    .limit(1)
                )
            if position is None:
                return None
            text = self.claim(job_id, position, stale_after=stale_after)
            if text is not None:
                return position, text
            # Someone claimed it between the two statements: look again.

    def done(self, job_id: int, position: int, counts: dict[str, int]) -> bool:
        """Record a claimed shard's counts (its text is no longer needed); False if the claim
        was lost meanwhile (taken over as stale), so the counts of the one who holds it win."""
        with self.database.session_scope() as session:
            result = execute_update(
                session,
                update(CountShard)
                .where(
                    CountShard.job_id == job_id,
                    CountShard.position == position,
                    CountShard.state == COUNTING,
                    CountShard.counted_by == counter_name(),
                )
                .values(
                    state=DONE,
                    text="",
                    counts=json.dumps(counts, ensure_ascii=False, separators=(",", ":")),
                ),
            )
            return bool(result.rowcount)

    def progress(self, job_id: int) -> tuple[int, int]:
        """(shards counted, of all)."""
        with self.database.read_scope() as session:
            rows = session.execute(
                select(CountShard.state, func.count())
                .where(CountShard.job_id == job_id)
                .group_by(CountShard.state)
            ).all()
        by_state = {state: int(n) for state, n in rows}
        return by_state.get(DONE, 0), sum(by_state.values())

    def counted(self, job_id: int) -> Iterator[dict[str, int]]:
        """Each shard's counts in shard order (call once every shard is done)."""
        with self.database.read_scope() as session:
            for (counts,) in session.execute(
                select(CountShard.counts)
                .where(CountShard.job_id == job_id)
                .order_by(CountShard.position)
                .execution_options(yield_per=16)
            ):
                yield json.loads(counts or "{}")

    def counters(self, job_id: int) -> dict[str, int]:
        """Shards counted by each counter (host:pid): what the job's log line reports."""
        with self.database.read_scope() as session:
            rows = session.execute(
                select(CountShard.counted_by, func.count())
                .where(CountShard.job_id == job_id, CountShard.state == DONE)
                .group_by(CountShard.counted_by)
            ).all()
        return {str(name): int(n) for name, n in rows}

    def clear(self, job_id: int) -> None:
        with self.database.session_scope() as session:
            session.execute(delete(CountShard).where(CountShard.job_id == job_id))

    def job_settings(self, job_id: int) -> str | None:
        """The job's settings JSON (the counting task's rule), None if the job is gone or
        no longer running (a cancelled job's shards are not worth counting)."""
        with self.database.read_scope() as session:
            return session.scalar(
                select(TrainingJob.settings).where(
                    TrainingJob.id == job_id, TrainingJob.status == "running"
                )
            )
