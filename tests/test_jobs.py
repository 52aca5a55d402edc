"""Training jobs: settings, lifecycle, progress, cancel, restart, admission, the stored result."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

import bpe
from tests.conftest import JOB_BACKEND
from tests.waiting import wait_for
from webapp import create_app, stop_runners
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Merge, Tokenizer, TrainingJob, VocabEntry, utcnow

TRAIN = {"mode": "chunked", "vocab_size": "300", "trainer": "reference", "pattern": "gpt4"}


def job_row(app, job_id: int) -> TrainingJob:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.get(TrainingJob, job_id)


def count(app, model) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.scalar(select(func.count()).select_from(model))


def start_job(client, corpus_slug: str, **overrides) -> int:
    response = client.post(f"/c/{corpus_slug}/train", data={**TRAIN, **overrides})
    assert response.status_code == 303, response.get_data(as_text=True)
    return int(response.headers["Location"].rsplit("/", 1)[-1])


def status_fragment(client, corpus_slug: str, job_id: int) -> str:
    response = client.get(f"/c/{corpus_slug}/jobs/{job_id}/status")
    assert response.status_code == 200
    return response.get_data(as_text=True)


# ----- settings --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"mode": "bogus"}, "Mode must be one of"),
        ({"trainer": "fast"}, "Trainer must be one of"),
        ({"vocab_size": "ten"}, "whole number"),
        ({"vocab_size": "0"}, "between 1 and"),
        ({"vocab_size": "100"}, "at least 256"),
        ({"min_frequency": "0"}, "between 1 and"),
        ({"pattern": "custom", "custom_pattern": "("}, "split pattern does not work"),
        ({"special_tokens": "<a>, <a>"}, "listed twice"),
    ],
)
def test_bad_settings_are_422_on_the_corpus_page(app, client, make_corpus, overrides, words):
    corpus = make_corpus()
    response = client.post(f"/c/{corpus.slug}/train", data={**TRAIN, **overrides})
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert words in page and "Train a tokeniser" in page
    assert count(app, TrainingJob) == 0


def test_train_on_a_missing_corpus_is_404(client):
    assert client.post("/c/AAAAAAAAAAAAAAAAAAAAAA/train", data=TRAIN).status_code == 404


# ----- lifecycle -------------------------------------------------------------------------------
def test_lifecycle_queued_running_succeeded_with_growing_progress(
    app, client, job_runner, make_corpus
):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug, vocab_size="290")
    fragment = status_fragment(client, corpus.slug, job_id)
    assert "queued" in fragment and 'hx-trigger="every 1s"' in fragment

    seen = []  # (status, merges_done) as the status page showed them, at every progress write

    phases = []  # the phase each write showed, as the page names it

    def look(_job_id: int) -> None:
        job = job_row(app, job_id)
        page = status_fragment(client, corpus.slug, job_id)
        if job.phase in ("merging", "storing"):
            assert f"{job.merges_done:,} / {job.merges_target:,} merges" in page
        else:
            assert "<progress" not in page  # no bar for a phase whose size is not known
        assert f'data-phase="{job.phase}"' in page
        assert 'hx-trigger="every 1s"' in page  # still polling while running
        seen.append((job.status, job.merges_done))
        if not phases or phases[-1] != job.phase:
            phases.append(job.phase)

    job_runner.progress_hook = look
    assert job_runner.run_next() == job_id
    assert job_runner.run_next() is None  # the queue is empty now

    assert seen and all(status == "running" for status, _ in seen)
    # A small text with the reference trainer: no splitting blocks, no set-up report.
    assert phases == ["reading", "merging", "storing"]
    done = [n for _, n in seen]
    assert done == sorted(done) and done[-1] > 0
    job = job_row(app, job_id)
    assert job.status == "succeeded" and job.tokenizer_id and job.finished_at
    assert job.merges_done == done[-1]
    api = client.get(f"/api/corpora/{corpus.slug}/jobs/{job_id}").get_json()
    assert (api["status"], api["phase"]) == ("succeeded", None)  # not still "storing"
    fragment = status_fragment(client, corpus.slug, job_id)
    assert "succeeded" in fragment and "hx-trigger" not in fragment  # polling stops
    page = client.get(f"/c/{corpus.slug}/jobs/{job_id}").get_data(as_text=True)
    assert "Training job" in page and "succeeded" in page and "<html" in page
    # An htmx request for the job page gets just the fragment, not the page around it.
    htmx = client.get(f"/c/{corpus.slug}/jobs/{job_id}", headers={"HX-Request": "true"})
    assert htmx.text == fragment and "<html" not in htmx.text


def test_result_is_stored_whole_and_loads_back(app, client, job_runner, make_corpus):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug, special_tokens="<|end|>")
    job_runner.run_next()
    job = job_row(app, job_id)
    database = app.extensions["bpe_db"]
    with database.read_scope() as session:
        row = session.get(Tokenizer, job.tokenizer_id)
        merges = session.scalar(select(func.count()).where(Merge.tokenizer_id == row.id))
        vocab = session.scalar(select(func.count()).where(VocabEntry.tokenizer_id == row.id))
        assert merges == row.merge_count == job.merges_done
        assert vocab == row.vocab_size == 256 + merges + 1
        tok = load_tokenizer(session, row)
        special = session.get(VocabEntry, (row.id, row.vocab_size - 1))
        assert special.is_special and special.category == "special"
    expected = bpe.train(
        corpus_text(app, corpus.id), vocab_size=300, trainer="reference", special_tokens=["<|end|>"]
    )
    assert tok.merges == expected.merges
    sample = "The fox and the dog<|end|>"
    assert tok.encode(sample, allowed_special="all") == expected.encode(
        sample, allowed_special="all"
    )


def corpus_text(app, corpus_id: int) -> str:
    from webapp.storage.models import Corpus

    with app.extensions["bpe_db"].read_scope() as session:
        return session.scalar(select(Corpus.text).where(Corpus.id == corpus_id))


@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
def test_every_mode_round_trips_through_rows(app, make_tokenizer, mode):
    made = make_tokenizer(mode=mode, vocab_size=320 if mode != "words" else 120)
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.get(Tokenizer, made.id)
        tok = load_tokenizer(session, row)
        assert load_tokenizer(session, row) is tok  # cached
        entries = session.scalars(
            select(VocabEntry)
            .where(VocabEntry.tokenizer_id == made.id)
            .order_by(VocabEntry.token_id)
        ).all()
    assert bpe.formats.to_dict(tok) == bpe.formats.to_dict(made.tok)
    assert len(entries) == made.tok.vocab_size
    for entry in entries:
        raw = made.tok.token_bytes(entry.token_id)
        assert entry.token_bytes == raw and entry.hex == raw.hex()
        assert entry.ends_word == made.tok.ends_word(entry.token_id)
        if mode == "words" and entry.ends_word:
            assert entry.display_text.endswith("</w>")
    text = "The quick brown fox, 東京 😀."
    assert tok.encode(text) == made.tok.encode(text)


def test_a_deleted_jobs_id_is_never_given_to_another(
    app, client, make_owner, job_runner, make_corpus
):
    """Job ids are in URLs, and deleting a tokeniser deletes the job that made it: the next job
    on the corpus (someone else's here) must not take that id, or the deleted job's link would
    lead to a job that is not the link holder's."""
    corpus = make_corpus()
    client.post(f"/c/{corpus.slug}/training", data={"allow": "1"})
    first = client.post(f"/c/{corpus.slug}/train", data=TRAIN).headers["Location"]
    first_id = int(first.rsplit("/", 1)[-1])
    job_runner.run_next()
    with app.extensions["bpe_db"].read_scope() as session:
        made = session.scalar(select(TrainingJob.tokenizer_id).where(TrainingJob.id == first_id))
        slug = session.scalar(select(Tokenizer.slug).where(Tokenizer.id == made))
    assert client.post(f"/t/{slug}/delete").status_code == 303  # the job goes with it
    someone = make_owner().client()
    second = someone.post(f"/c/{corpus.slug}/train", data=TRAIN).headers["Location"]
    assert int(second.rsplit("/", 1)[-1]) > first_id
    assert client.post(f"/c/{corpus.slug}/jobs/{first_id}/cancel").status_code == 404


def test_a_failing_job_records_the_error(app, client, job_runner, make_corpus):
    from tests.test_words_minimum import forget_alphabet

    corpus = make_corpus()
    forget_alphabet(app, corpus.id)  # counted corpora refuse this on the form (test_words_minimum)
    job_id = start_job(client, corpus.slug, mode="words", vocab_size="5")
    job_runner.run_next()
    job = job_row(app, job_id)
    assert job.status == "failed" and "vocab_size must be at least" in job.error
    fragment = status_fragment(client, corpus.slug, job_id)
    assert "vocab_size must be at least" in fragment and "Run again" in fragment
    assert count(app, Tokenizer) == 0


# ----- cancel ------------------------------------------------------------------------------------
def test_cancel_a_queued_job(app, client, job_runner, make_corpus):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug)
    response = client.post(f"/c/{corpus.slug}/jobs/{job_id}/cancel")
    assert response.status_code == 303
    assert job_row(app, job_id).status == "cancelled"
    assert job_runner.run_next() is None


def test_cancel_a_running_job_leaves_no_tokenizer(app, client, job_runner, make_corpus):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug)
    cancelled_at: list[int] = []  # merges done when the cancel was asked

    def cancel_midway(_job_id: int) -> None:
        done = job_row(app, job_id).merges_done
        if done >= 2 and not cancelled_at:
            cancelled_at.append(done)
            response = client.post(
                f"/c/{corpus.slug}/jobs/{job_id}/cancel", headers={"HX-Request": "true"}
            )
            assert response.status_code == 200 and "job-status" in response.text

    job_runner.progress_hook = cancel_midway
    job_runner.run_next()
    job = job_row(app, job_id)
    assert job.status == "cancelled" and job.tokenizer_id is None
    # The trainer's stop check, before the next merge, ended it: without one it would have run
    # on to the last merge and been marked cancelled only when storing the result.
    assert cancelled_at == [2] and job.merges_done == 2 < job.merges_target
    assert (count(app, Tokenizer), count(app, Merge), count(app, VocabEntry)) == (0, 0, 0)
    assert "Run again" in status_fragment(client, corpus.slug, job_id)


def test_cancel_a_finished_job_changes_nothing(app, client, job_runner, make_corpus):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug)
    job_runner.run_next()
    client.post(f"/c/{corpus.slug}/jobs/{job_id}/cancel")
    assert job_row(app, job_id).status == "succeeded"


# ----- restart -----------------------------------------------------------------------------------
@pytest.mark.embedded_only  # (celery: no process owns the jobs; the heartbeat sweep, test_celery)
def test_restart_marks_running_jobs_interrupted_and_they_can_run_again(
    app, app_config, client, make_corpus, make_tokenizer
):
    corpus = make_corpus()
    finished = make_tokenizer(corpus=corpus)
    job_id = start_job(client, corpus.slug)
    with app.extensions["bpe_db"].session_scope() as session:
        job = session.get(TrainingJob, job_id)
        job.status, job.started_at, job.merges_done = "running", utcnow(), 3

    # A new serving process starting on the same database.
    restarted = create_app(app_config, run_jobs=True)
    try:
        client2 = restarted.test_client()
        job = job_row(restarted, job_id)
        assert job.status == "interrupted" and "stopped" in job.error
        fragment = status_fragment(client2, corpus.slug, job_id)
        assert "interrupted" in fragment and "Run again" in fragment
        assert "hx-trigger" not in fragment
        # Corpora and finished tokenisers are untouched.
        assert client2.get(f"/c/{corpus.slug}").status_code == 200
        assert count(restarted, Tokenizer) == 1
        assert client2.get(f"/t/{finished.slug}").status_code == 200
        with restarted.extensions["bpe_db"].read_scope() as session:
            assert load_tokenizer(session, session.get(Tokenizer, finished.id)).merges == (
                finished.tok.merges
            )

        response = client2.post(f"/c/{corpus.slug}/jobs/{job_id}/rerun")
        assert response.status_code == 303
        new_id = int(response.headers["Location"].rsplit("/", 1)[-1])
        assert new_id != job_id and job_row(restarted, new_id).rerun_of_id == job_id
        assert restarted.extensions["bpe_jobs"].run_next() == new_id
        assert job_row(restarted, new_id).status == "succeeded"
    finally:
        stop_runners(restarted)
        restarted.extensions["bpe_db"].dispose()


def test_rerun_of_a_succeeded_job_is_refused(app, client, job_runner, make_corpus):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug)
    job_runner.run_next()
    response = client.post(f"/c/{corpus.slug}/jobs/{job_id}/rerun")
    assert response.status_code == 422


def test_queued_jobs_are_picked_up_after_a_restart(
    app, app_config, client, make_corpus, celery_workers
):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug)  # queued; this (manual) app never runs it
    if JOB_BACKEND == "celery":
        celery_workers()  # a worker starting later finds the job's message waiting
    app_config["JOBS_EXECUTION"] = "thread"
    restarted = create_app(app_config, run_jobs=True)
    try:
        wait_for(lambda: job_row(restarted, job_id).status == "succeeded")
    finally:
        stop_runners(restarted)
        restarted.extensions["bpe_db"].dispose()


# ----- admission ---------------------------------------------------------------------------------
def test_admission_beyond_running_plus_queued_is_429(app_config, make_corpus):
    # One owner sends them all: lift the per-owner limit (tests/test_owners.py) out of the way.
    app_config.update(JOBS_MAX_RUNNING=1, JOBS_MAX_QUEUED=2, JOBS_PER_OWNER=10)
    app = create_app(app_config)
    try:
        client = app.test_client()
        from webapp.storage.uploads import store_text

        corpus, _ = store_text(
            app.extensions["bpe_db"],
            "some text to train on",
            name="c",
            tmp_dir=app.config["UPLOAD_TMP_DIR"],
        )
        for _ in range(3):  # one for the running slot, two waiting
            start_job(client, corpus.slug)
        response = client.post(f"/c/{corpus.slug}/train", data=TRAIN)
        assert response.status_code == 429
        # What the rows say: nothing runs yet (manual execution), all three wait.
        assert "queue is full (0 running, 3 waiting; at most 3" in response.get_data(as_text=True)
        assert count(app, TrainingJob) == 3
        app.extensions["bpe_jobs"].run_next()  # one finishes: room again
        start_job(client, corpus.slug)
    finally:
        app.extensions["bpe_db"].dispose()


# ----- the real thing: runner thread and child processes -------------------------------------
@pytest.fixture
def threaded_app(app_config, celery_workers):
    """The app running its jobs for real: the embedded runner's child processes, or (under
    BPE_JOB_BACKEND=celery) a real Celery worker process."""
    yield from _threaded_app(app_config, celery_workers)


@pytest.fixture
def threaded_app_without_kill(app_config, celery_workers):
    """A threaded app whose runner would force-kill a child only after 10 minutes, far beyond
    any wait here: whatever stops a child in a test stopped by itself."""
    app_config["JOBS_KILL_AFTER"] = 600.0
    yield from _threaded_app(app_config, celery_workers)


def _threaded_app(app_config, celery_workers):
    app_config.update(JOBS_EXECUTION="thread", JOBS_PROGRESS_INTERVAL=0.1)
    app = create_app(app_config, run_jobs=True)
    if JOB_BACKEND == "celery":
        celery_workers()
    yield app
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


def stored_corpus(app, text: str, name: str = "w"):
    """A corpus row stored as an upload stores it, outside any request."""
    from webapp.storage.uploads import store_text

    corpus, _ = store_text(
        app.extensions["bpe_db"], text, name=name, tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    return corpus


def test_threaded_job_reports_progress_and_succeeds(threaded_app, random_words):
    client = threaded_app.test_client()
    corpus = stored_corpus(threaded_app, random_words(20000), "w")
    job_id = start_job(client, corpus.slug, vocab_size="1500", trainer="efficient")
    seen = []

    def finished():
        job = job_row(threaded_app, job_id)
        seen.append(job.merges_done)
        return job.status in ("succeeded", "failed")

    wait_for(finished, timeout=60, interval=0.05)
    job = job_row(threaded_app, job_id)
    assert job.status == "succeeded", job.error
    assert seen == sorted(seen)
    assert job.merges_done == job.merges_target == 1500 - 256


@pytest.mark.embedded_only  # (celery: test_celery's cancel test, force-kill out of reach too)
def test_threaded_cancel_is_seen_by_the_training_process(
    threaded_app_without_kill, monkeypatch, random_words
):
    threaded_app = threaded_app_without_kill
    runner = threaded_app.extensions["bpe_jobs"]
    # A child that never reached a stop check would still be running when the wait below gives
    # up: the runner's force-kill cannot stand in for the stop check.
    assert runner.supervisor.kill_after > 60
    children = []
    real_spawn = runner._spawn

    def spawn_and_remember(job_id, kind):
        children.append(real_spawn(job_id, kind))
        return children[-1]

    monkeypatch.setattr(runner, "_spawn", spawn_and_remember)
    client = threaded_app.test_client()
    corpus = stored_corpus(threaded_app, random_words(60000), "w")
    # The reference trainer recounts everything per merge: this would take minutes.
    job_id = start_job(client, corpus.slug, vocab_size="20000", trainer="reference")
    wait_for(lambda: job_row(threaded_app, job_id).merges_done > 0, timeout=60)
    assert client.post(f"/c/{corpus.slug}/jobs/{job_id}/cancel").status_code == 303
    wait_for(lambda: job_row(threaded_app, job_id).status == "cancelled", timeout=60)
    # The child stopped by itself (exit code 0, after reporting the cancel), not by a signal.
    [child] = children
    child.process.join(10)
    assert child.process.exitcode == 0
    assert count(threaded_app, Tokenizer) == 0 and count(threaded_app, Merge) == 0


@pytest.mark.embedded_only
def test_a_job_whose_process_cannot_start_fails_with_the_reason(threaded_app, monkeypatch):
    runner = threaded_app.extensions["bpe_jobs"]

    def broken_spawn(job_id, kind):
        raise OSError("no more processes")

    monkeypatch.setattr(runner, "_spawn", broken_spawn)
    corpus = stored_corpus(threaded_app, "a b c", "x")
    job_id = start_job(threaded_app.test_client(), corpus.slug)
    wait_for(lambda: job_row(threaded_app, job_id).status == "failed", timeout=10)
    assert "no more processes" in job_row(threaded_app, job_id).error


def remember_spawned_pids(app, monkeypatch) -> list[int]:
    """The pids of the training children the app's runner starts from now on, in order."""
    runner = app.extensions["bpe_jobs"]
    spawned: list[int] = []
    real_spawn = runner._spawn

    def spawn_and_remember(job_id, kind):
        child = real_spawn(job_id, kind)
        spawned.append(child.process.pid)
        return child

    monkeypatch.setattr(runner, "_spawn", spawn_and_remember)
    return spawned


@pytest.mark.embedded_only
def test_a_training_process_killed_mid_run_fails_the_job_and_the_runner_goes_on(
    threaded_app, monkeypatch, random_words
):
    import os
    import signal

    spawned = remember_spawned_pids(threaded_app, monkeypatch)
    client = threaded_app.test_client()
    corpus = stored_corpus(threaded_app, random_words(60000), "w")
    # Reference trainer with a large vocab: still running when the process is killed.
    doomed = start_job(client, corpus.slug, vocab_size="20000", trainer="reference")
    after = start_job(client, corpus.slug, vocab_size="300", trainer="efficient")
    wait_for(lambda: job_row(threaded_app, doomed).merges_done > 0, timeout=60)
    os.kill(spawned[0], signal.SIGKILL)  # as the OOM killer would
    wait_for(lambda: job_row(threaded_app, doomed).status == "failed", timeout=10)
    assert "died" in job_row(threaded_app, doomed).error
    wait_for(lambda: job_row(threaded_app, after).status == "succeeded", timeout=60)
    # Only the second job's tokeniser exists: the killed one left nothing behind.
    assert count(threaded_app, Tokenizer) == 1


def test_the_job_page_refreshes_itself_without_javascript_until_done(
    app, client, job_runner, make_corpus
):
    corpus = make_corpus()
    job_id = start_job(client, corpus.slug)
    refresh = '<noscript><meta http-equiv="refresh" content="2"></noscript>'
    assert refresh in client.get(f"/c/{corpus.slug}/jobs/{job_id}").get_data(as_text=True)
    job_runner.run_next()
    page = client.get(f"/c/{corpus.slug}/jobs/{job_id}").get_data(as_text=True)
    assert "succeeded" in page and 'http-equiv="refresh"' not in page
    # Wall time and training time are named apart, written the way every page writes them.
    assert "Finished: wall time " in page and ", of which training " in page


@pytest.mark.embedded_only
def test_a_training_process_terminated_from_outside_is_interrupted_not_failed(
    threaded_app, monkeypatch, random_words
):
    """SIGTERM is a shut-down (multiprocessing's exit handler ends daemonic children when the
    serving process exits first; so does the system's), not a crash: the job can be run again."""
    import os
    import signal

    spawned = remember_spawned_pids(threaded_app, monkeypatch)
    corpus = stored_corpus(threaded_app, random_words(60000), "w")
    job_id = start_job(
        threaded_app.test_client(), corpus.slug, vocab_size="20000", trainer="reference"
    )
    wait_for(lambda: job_row(threaded_app, job_id).merges_done > 0, timeout=60)
    os.kill(spawned[0], signal.SIGTERM)
    wait_for(lambda: job_row(threaded_app, job_id).status != "running", timeout=10)
    assert job_row(threaded_app, job_id).status == "interrupted"
