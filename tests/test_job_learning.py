"""Watch it learn (webapp/jobs/learning.py, templates/jobs/_learning.html): while a job trains,
its page shows the latest merges as tokens and two curves, the vocabulary's growth and the
compression of a corpus sample, from what the job wrote to its row; splitting has a bar."""

from __future__ import annotations

import json
import re

import pytest

import bpe
import bpe.pacing
from bpe import chunk_counts
from tests.conftest import make_random_words
from webapp.jobs import task as job_task
from webapp.jobs.learning import (
    POINTS,
    RECENT,
    SAMPLE_CHARS,
    LearningWatch,
    SampleTokens,
    sample_stretches,
)
from webapp.jobs.settings import JobSettings
from webapp.jobs.task import train_job
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Tokenizer, TrainingJob

TEXT = make_random_words(30_000) + "\n" + "aaaa aaaaaaa baaab\n" * 50  # runs of one letter too


def sample_tokens_by_the_tokeniser(tok: bpe.Tokenizer, text: str) -> int:
    """The sample, encoded stretch by stretch by the finished tokeniser."""
    return sum(len(tok.encode(stretch)) for stretch in sample_stretches(text))


@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
def test_the_sample_merged_as_it_learns_is_what_the_tokeniser_makes_of_it(mode):
    """Applying each learned merge to the sample, one at a time where its pair occurs, ends
    with exactly the tokens the finished tokeniser encodes the sample into."""
    updates = []
    vocab = 700 if mode != "words" else 400
    settings = JobSettings(mode=mode, trainer="efficient", vocab_size=vocab)
    tok = train_job(settings, TEXT, report=updates.append, should_stop=lambda: False)
    last = json.loads([u for u in updates if u.learning][-1].learning)
    assert last["points"][-1][1] == len(tok.merges)
    assert last["points"][-1][2] == sample_tokens_by_the_tokeniser(tok, TEXT)
    tokens = [t for _, _, t in last["points"]]
    assert tokens == sorted(tokens, reverse=True) and tokens[0] > tokens[-1]


def test_overlapping_occurrences_merge_left_to_right():
    sample = SampleTokens([[97, 97, 97, 97, 97], [97, 97]])
    sample.merge(97, 97, 256)  # aaaaa -> (aa)(aa)a, aa -> (aa)
    assert sample.tokens == 4
    sample.merge(256, 256, 257)
    sample.merge(257, 97, 258)
    assert sample.tokens == 2
    assert [i for i in sample.ids if i >= 0] == [258, 256]


def test_the_sample_is_spread_through_the_corpus_and_bounded():
    text = " ".join(f"w{i}" for i in range(200_000))
    stretches = sample_stretches(text)
    assert 16_000 <= sum(map(len, stretches)) <= SAMPLE_CHARS
    assert "w0" in stretches[0].split() or "w1" in stretches[0].split()
    assert int(stretches[-1].split()[-1][1:]) > 180_000  # from the end of the corpus too
    assert all(not s[0].isspace() and not s[-1].isspace() for s in stretches)
    assert sample_stretches("tiny text") == ["tiny text"]


def test_the_snapshot_stays_small_however_long_the_run():
    updates = []
    settings = JobSettings(mode="chunked", trainer="efficient", vocab_size=1500)
    train_job(settings, TEXT, report=updates.append, should_stop=lambda: False)
    watch = LearningWatch("chunked", TEXT, pattern=bpe.resolve_pattern("gpt4"), alphabet=None)
    fake = bpe.Progress(1, 10_000, (97, 98), 5, 100, ((97, 98, 256),))
    for n in range(1, 5 * POINTS):
        watch.observe(fake._replace(merges_done=n), n / 10, {97: b"a", 98: b"b"})
    data = json.loads(watch.snapshot())
    assert len(data["points"]) <= POINTS + 1 and len(data["recent"]) == RECENT
    assert data["points"][0][1] == 1 and data["points"][-1][1] == 5 * POINTS - 1
    assert len(watch.snapshot()) < 6000


# ----- the job page -----------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def fresh_snapshots(monkeypatch):
    """A snapshot at every report (a job of this size merges in well under a second)."""
    import webapp.jobs.task

    monkeypatch.setattr(webapp.jobs.task, "ESTIMATE_EVERY", 0.0)


def job_row(app, job_id: int) -> TrainingJob:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.get(TrainingJob, job_id)


def start(client, slug: str, **settings: str) -> int:
    data = {"mode": "chunked", "vocab_size": "600", "trainer": "efficient", **settings}
    response = client.post(f"/c/{slug}/train", data=data)
    assert response.status_code == 303, response.text
    return int(response.headers["Location"].rsplit("/", 1)[-1])


def polyline(page: str, chart: str) -> list[tuple[float, float]]:
    found = re.search(
        rf'class="learn-chart {chart}".*?<polyline class="curve" points="([^"]*)"', page, re.S
    )
    assert found, chart
    return [tuple(map(float, p.split(","))) for p in found.group(1).split()]


def run_looking(app, client, job_runner, slug: str, job_id: int, look) -> None:
    """Run the job here, calling look(job row, status fragment) at every progress write."""

    def hook(_job_id: int) -> None:
        look(job_row(app, job_id), client.get(f"/c/{slug}/jobs/{job_id}/status").text)

    job_runner.progress_hook = hook
    # A write at every report: on a quiet machine the whole job takes less than one interval.
    job_runner.progress_interval = 0.0
    assert job_runner.run_next() == job_id


def test_the_status_fragment_draws_the_learning_as_it_goes(
    app, client, job_runner, make_corpus, monkeypatch
):
    # A few reports and snapshots even when the job is over in a fraction of a second.
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)
    monkeypatch.setattr(job_task, "ESTIMATE_EVERY", 0.0)
    corpus = make_corpus(TEXT)
    job_id = start(client, corpus.slug)
    seen = []

    def look(job: TrainingJob, page: str) -> None:
        if job.phase != "merging" or not job.merges_done:
            return
        assert 'class="watch-learn"' in page
        data = json.loads(job.learning)
        if len(data["points"]) < 2:
            return  # no curve before a second point
        newest = data["recent"][0]
        assert f"#{newest[0] - 256 + 1:,}" in page  # the newest merge, numbered as pages do
        assert page.count('<li><span class="muted rank">') == len(data["recent"])
        bpt = data["sample_bytes"] / data["points"][-1][2]
        assert f'<strong class="bpt-now">{bpt:.2f}</strong>' in page
        seen.append((job.merges_done, len(polyline(page, "compression-chart")), bpt))

    run_looking(app, client, job_runner, corpus.slug, job_id, look)
    assert len(seen) >= 2, seen
    assert seen[-1][1] > seen[0][1]  # the curve grew while the job ran
    assert seen[-1][2] > seen[0][2] > 1.0  # and the sample compresses better and better

    job = job_row(app, job_id)
    assert job.status == "succeeded"
    with app.extensions["bpe_db"].read_scope() as session:
        tok = load_tokenizer(session, session.get(Tokenizer, job.tokenizer_id))
    final = client.get(f"/c/{corpus.slug}/jobs/{job_id}").text  # the whole page, no htmx
    bpt = len("".join(sample_stretches(TEXT)).encode()) / sample_tokens_by_the_tokeniser(tok, TEXT)
    assert f'<strong class="bpt-now">{bpt:.2f}</strong>' in final
    assert f'<strong class="vocab-now">{600:,}</strong>' in final
    points = polyline(final, "vocab-chart")
    assert points == sorted(points) and len(points) >= 3  # vocabulary only grows, over time
    api = client.get(f"/api/corpora/{corpus.slug}/jobs/{job_id}").get_json()
    assert api["learning"]["points"][-1][1] == 600 - 256


def test_the_page_refreshed_without_javascript_shows_the_same(app, client, job_runner, make_corpus):
    corpus = make_corpus(TEXT)
    job_id = start(client, corpus.slug, mode="words", vocab_size="300")
    pages = []

    def look(_job_id: int) -> None:
        job = job_row(app, job_id)
        if job.phase == "merging" and job.merges_done:
            pages.append(client.get(f"/c/{corpus.slug}/jobs/{job_id}").text)

    job_runner.progress_hook = look
    job_runner.run_next()
    assert pages
    page = pages[-1]  # the last write while merging: a curve of several points by then
    assert '<meta http-equiv="refresh"' in page  # inside <noscript>: the page reloads itself
    assert 'class="watch-learn"' in page and "latest-merges" in page
    assert polyline(page, "compression-chart") and polyline(page, "vocab-chart")


def test_a_learning_column_that_does_not_parse_draws_nothing(app, client, job_runner, make_corpus):
    corpus = make_corpus(TEXT)
    job_id = start(client, corpus.slug)
    with app.extensions["bpe_db"].session_scope() as session:
        job = session.get(TrainingJob, job_id)
        job.status, job.phase, job.learning = "running", "merging", '{"v": 1, "recent": [[1]]}'
    page = client.get(f"/c/{corpus.slug}/jobs/{job_id}")
    assert page.status_code == 200 and "watch-learn" not in page.text


# ----- splitting ------------------------------------------------------------------------------
@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few KB and a report at every check: splitting reports many times."""
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)
    monkeypatch.setattr(chunk_counts, "_BLOCK_CHARS", 4096)


@pytest.mark.parametrize("mode", ["chunked", "words"])
def test_splitting_says_how_many_characters_are_split(small_blocks, mode):
    seen = []
    bpe.train(TEXT, vocab_size=300, mode=mode, progress=seen.append)
    split = [(p.split_done, p.split_total) for p in seen if p.split_total]
    assert len(split) > 10
    assert all(total == len(TEXT) for _, total in split)
    done = [d for d, _ in split]
    assert done == sorted(done) and done[0] < len(TEXT) / 4 and done[-1] == len(TEXT)


def test_the_job_page_has_a_bar_while_splitting(app, client, job_runner, make_corpus, small_blocks):
    corpus = make_corpus(TEXT)
    job_id = start(client, corpus.slug)
    bars = []

    def look(job: TrainingJob, page: str) -> None:
        if job.phase == "splitting":
            found = re.search(r'<progress max="(\d+)" value="(\d+)"', page)
            assert found and "characters split" in page, page
            bars.append((int(found.group(2)), int(found.group(1))))

    run_looking(app, client, job_runner, corpus.slug, job_id, look)
    assert len(bars) >= 2
    assert bars == sorted(bars) and bars[0][0] < bars[-1][0] and bars[-1][1] == len(TEXT)
