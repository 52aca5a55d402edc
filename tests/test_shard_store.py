"""The shards of a training in the database (webapp/jobs/shard_store.py): each claimed by one
counter, a dead counter's claim taken over once stale, the counts of a lost claim refused, and
the sum in shard order. On SQLite and PostgreSQL, without Celery (tests/test_celery.py runs
the counting tasks on real workers)."""

from __future__ import annotations

import time

from sqlalchemy import update

from webapp.jobs.settings import JobSettings
from webapp.jobs.shard_counting import count_one
from webapp.jobs.shard_store import ShardStore
from webapp.storage.models import CountShard

SETTINGS = JobSettings(mode="words", pattern=None, trainer="efficient", vocab_size=300)


def running_job(app, make_corpus) -> int:
    jobs = app.extensions["bpe_jobs"]
    job_id = jobs.submit(make_corpus().id, SETTINGS)
    assert jobs.store.claim_next() == job_id
    return job_id


def test_a_shard_is_claimed_once_and_summed_in_order(app, make_corpus):
    job_id = running_job(app, make_corpus)
    store = ShardStore(app.extensions["bpe_db"])
    store.put(job_id, ["b a", "c b", "a"])
    assert store.claim(job_id, 1, stale_after=60) == "c b"
    assert store.claim(job_id, 1, stale_after=60) is None  # one counter per shard
    assert store.claim_next(job_id, stale_after=60) == (0, "b a")  # the first left
    assert store.done(job_id, 1, {"c": 1, "b": 1})
    assert store.done(job_id, 0, {"b": 1, "a": 1})
    assert store.progress(job_id) == (2, 3)
    assert count_one(store, job_id, 2, stale_after=60) == "counted"  # a task's way
    assert count_one(store, job_id, 2, stale_after=60) == "skipped"  # counted already
    assert store.progress(job_id) == (3, 3)
    assert [list(c.items()) for c in store.counted(job_id)] == [
        [("b", 1), ("a", 1)],
        [("c", 1), ("b", 1)],
        [("a", 1)],
    ]
    store.clear(job_id)
    assert store.progress(job_id) == (0, 0)


def test_a_stale_claim_is_taken_over_and_the_lost_claims_counts_refused(app, make_corpus):
    job_id = running_job(app, make_corpus)
    database = app.extensions["bpe_db"]
    store = ShardStore(database)
    store.put(job_id, ["x y"])
    assert store.claim(job_id, 0, stale_after=60) == "x y"
    assert store.claim_next(job_id, stale_after=60) is None  # held, and fresh
    time.sleep(1.1)  # the database clock's resolution is a second on SQLite
    assert store.claim_next(job_id, stale_after=0.5) == (0, "x y")  # its counter died
    with database.session_scope() as session:  # ...and someone else holds it now
        session.execute(update(CountShard).values(counted_by="elsewhere:1"))
    assert not store.done(job_id, 0, {"x": 1})  # so this late count does not land
    assert store.progress(job_id) == (0, 1)


def test_a_counting_task_for_a_job_no_longer_running_counts_nothing(app, make_corpus):
    job_id = running_job(app, make_corpus)
    store = ShardStore(app.extensions["bpe_db"])
    store.put(job_id, ["a b"])
    assert app.extensions["bpe_jobs"].request_cancel(job_id)
    app.extensions["bpe_jobs"].store.finish(job_id, "cancelled")
    assert count_one(store, job_id, 0, stale_after=60) == "skipped"
    assert store.progress(job_id) == (0, 1)
