"""The job page's phases and its time left (webapp/jobs/progress.py): an estimate only once it
can be honest, and one that follows the falling cost of merges. How close it comes on a real
corpus is measured by benchmarks/eta_check.py, not here (no timed assertions in unit tests)."""

from __future__ import annotations

import random

import bpe
import bpe.pacing
from webapp.jobs.progress import MergeEstimator, phase_of


def test_phases_follow_the_progress_reports():
    assert phase_of(0, 0, 0) == "splitting"  # bpe.Progress while the text is split
    assert phase_of(0, 1000, 52_000) == "counting"  # the trainer's set-up
    assert phase_of(3, 1000, 51_000) == "merging"


def simulated_run(estimator, *, merges=2000, per_merge=2e-4, per_token=1e-5, alpha=1.1):
    """Feed a run whose costs are known: merge r removes 20000 * r**-alpha tokens and takes
    per_merge + per_token * removed seconds. Yields (merges done, seconds left truly)."""
    removed = [20000 * r**-alpha for r in range(1, merges + 1)]
    cost = [per_merge + per_token * x for x in removed]
    total_time = sum(cost)
    tokens = 1_000_000
    estimator.observe(0.0, 0, merges, 0, tokens)  # set-up report
    now = 0.0
    for r in range(1, merges + 1):
        now += cost[r - 1]
        tokens -= removed[r - 1]
        if r % 10 == 0:
            estimator.observe(now, r, merges, int(removed[r - 1]), int(tokens))
            yield r, total_time - now


def test_no_estimate_before_enough_of_the_run_was_seen():
    estimator = MergeEstimator()
    assert estimator.seconds_left() is None
    runs = simulated_run(estimator)
    r, _ = next(runs)
    assert r == 10 and estimator.seconds_left() is None  # one report is not a rate


def test_the_estimate_follows_falling_costs_where_a_straight_line_is_far_off():
    estimator = MergeEstimator()
    checked = 0
    for done, truly_left in simulated_run(estimator):
        if done in (500, 1000):  # 25% and 50% of the merges
            estimate = estimator.seconds_left()
            assert estimate is not None
            assert 0.5 <= estimate / truly_left <= 2
            elapsed = estimator.samples[-1].wall
            straight_line = elapsed / done * (2000 - done)
            assert straight_line / truly_left > 2  # what the page used to show
            checked += 1
    assert checked == 2


def measured_run(
    merges=4000, *, alpha=1.2, gamma=0.75, fixed=0.0, load=lambda share: 1.0, noise=0.0
):
    """A run shaped as benchmarks/eta_check.py measured real ones: merge r's pair occurs
    50000 * r**-alpha times (alpha a number, or a function of the share of merges done) and
    costs the trainer fixed + 4e-4 * count**gamma CPU seconds (naive English: gamma ~0.75),
    the wall time being that times the machine's load (a function of the share of merges done)
    and, with `noise`, times a factor drawn for every 50 merges from 1 +- noise (other
    processes coming and going).
    Returns [(wall, cpu, merges done, count, tokens left)] every 10 merges, and the end."""
    rng = random.Random(7)
    wall = cpu = 0.0
    tokens = 5_000_000
    reports = [(0.0, 0.0, 0, 0, tokens)]  # the set-up's report
    jitter = 1.0
    for r in range(1, merges + 1):
        count = 50_000 * r ** -(alpha(r / merges) if callable(alpha) else alpha)
        spent = fixed + 4e-4 * count**gamma
        if r % 50 == 1:
            jitter = 1 + noise * (2 * rng.random() - 1)
        cpu += spent
        wall += spent * load(r / merges) * jitter
        tokens -= count
        if r % 10 == 0:
            reports.append((wall, cpu, r, int(count), int(tokens)))
    return reports, wall


def agrees(shown: float, truly_left: float) -> bool:
    """Within 1.5x either way, or both under a second (the page says "less than a second")."""
    return (shown < 1 and truly_left < 1) or 1 / 1.5 <= shown / truly_left <= 1.5


def feed(estimator, reports, merges, *, with_cpu=True):
    """Feeds the reports; yields (merges done, wall time, the estimate) after each."""
    for wall, cpu, done, count, tokens in reports:
        estimator.observe(wall, done, merges, count, tokens, cpu=cpu if with_cpu else None)
        yield done, wall, estimator.estimate()


def test_from_a_fifth_of_the_merges_on_the_estimate_is_within_a_factor_of_1_5():
    """The cost per merge falls as count ** 0.75 (a fixed part plus a per-token part, fitted
    on the recent merges, was 2-8x off on such runs)."""
    reports, end = measured_run()
    checked = 0
    for done, wall, estimate in feed(MergeEstimator(), reports, 4000, with_cpu=False):
        if done >= 800 and done < 4000:
            assert estimate is not None, done
            assert agrees(estimate.seconds, end - wall), done
            assert estimate.low <= estimate.seconds <= estimate.high
            checked += 1
    assert checked > 300


def worst_miss(reports, end, merges):
    """The worst factor between estimate and truth from a fifth of the merges on, where more
    than a second is left (below it the page says "less than a second")."""
    worst = 1.0
    for done, wall, estimate in feed(MergeEstimator(), reports, merges):
        left = end - wall
        if done >= merges / 5 and left >= 1:
            assert estimate is not None, done
            worst = max(worst, estimate.seconds / left, left / estimate.seconds)
    return worst


def test_the_estimate_follows_counts_that_fall_ever_faster():
    """On English, Chinese and code the counts' exponent grew through a run (1.1 to 1.35)
    while a merge cost about count ** 0.6-0.9: the latest counts, extrapolated, and a power
    of them keep the estimate within 1.35x (a fixed-plus-per-token cost ran 2x high here)."""
    for gamma in (0.6, 0.75, 0.9):
        reports, end = measured_run(alpha=lambda share: 1.1 + 0.25 * share, gamma=gamma)
        assert worst_miss(reports, end, 4000) <= 1.35, gamma


def test_a_fixed_cost_per_merge_is_followed_too():
    """Chunked training's late merges cost a near-constant ~30 us each (finding the best pair,
    the bookkeeping): the fit's power of the count flattens to it."""
    reports, end = measured_run(fixed=2e-4)
    assert worst_miss(reports, end, 4000) <= 1.15


def test_between_estimates_the_time_left_runs_down(monkeypatch):
    """An estimate is made every ESTIMATE_EVERY seconds; the reports in between show it less
    the time since it was made, so the page's time left does not stand still (or show a
    figure a quarter of a second old) while the end it foresees stays put."""
    from tests.conftest import make_random_words
    from webapp.jobs import task
    from webapp.jobs.progress import Estimate
    from webapp.jobs.settings import JobSettings

    class OneEstimate:
        """Says 30 s left (20 s to 40 s) at the first merging report, and never anything new."""

        def __init__(self):
            self.made = None

        def observe(self, now, *args, **kwargs):
            self.now = now

        def estimate(self):
            if self.made is None:
                self.made = Estimate(30.0, 20.0, 40.0, self.now)
            return self.made

    assert Estimate(30.0, 20.0, 40.0, 100.0).aged(102.5) == Estimate(27.5, 17.5, 37.5, 102.5)
    assert Estimate(1.0, 0.5, 2.0, 100.0).aged(105.0).seconds == 0.0
    monkeypatch.setattr(task, "MergeEstimator", OneEstimate)
    monkeypatch.setattr(task, "ESTIMATE_EVERY", 0.0)
    # A report at every opportunity: on a quiet machine this training is over within two of
    # the usual 30 ms report intervals.
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)
    updates = []
    settings = JobSettings(mode="chunked", trainer="efficient", vocab_size=3000)
    task.train_job(settings, make_random_words(60_000), report=updates.append, should_stop=bool)
    shown = [u for u in updates if u.phase == "merging" and u.estimate is not None]
    assert len(shown) > 2
    assert shown[0].estimate > shown[-1].estimate
    for before, after in zip(shown, shown[1:], strict=False):
        assert after.estimate <= before.estimate
    for update in shown:
        low, high = update.estimate_range
        assert abs(update.estimate - 10 - low) < 1e-9 and abs(high - 10 - update.estimate) < 1e-9


def test_the_range_spans_the_pace_since_merging_began():
    """The load triples at 15% of the merges: the time shown follows the new pace, and the
    range reaches down to what the old pace would take."""
    reports, _ = measured_run(load=lambda share: 1.0 if share < 0.15 else 3.0)
    halfway = [e for done, _, e in feed(MergeEstimator(), reports, 4000) if done == 2000]
    assert len(halfway) == 1 and halfway[0] is not None
    assert halfway[0].low < 0.8 * halfway[0].seconds <= halfway[0].high


def test_the_load_changing_mid_run_moves_the_estimate_only_by_the_new_pace():
    """The load triples at 15% of the merges: the fit is made on the trainer's CPU time, and
    the wall time left follows the pace of the latest merges."""
    reports, end = measured_run(load=lambda share: 1.0 if share < 0.15 else 3.0)
    for done, wall, estimate in feed(MergeEstimator(), reports, 4000):
        if done >= 800 and done < 4000:
            assert agrees(estimate.seconds, end - wall), done


def test_the_estimate_does_not_jump_when_the_wall_times_are_noisy():
    """The load going up and down by up to 50%: one second later the estimate is still about
    the one before less that second (it once went from 83.8 s to 2 min 14 s in one second)."""
    reports, _ = measured_run(merges=8000, noise=0.5)
    shown = [(wall, e.seconds) for done, wall, e in feed(MergeEstimator(), reports, 8000) if e]
    assert len(shown) > 500
    for (t0, e0), (t1, e1) in zip(shown, shown[1:], strict=False):
        if e0 > 5:
            assert 0.75 <= e1 / (e0 - (t1 - t0)) <= 1.33, (t0, e0, t1, e1)


def test_while_merges_are_left_the_time_left_is_never_zero():
    reports, _ = measured_run()
    estimates = [e for done, _, e in feed(MergeEstimator(), reports, 4000) if e and done < 4000]
    assert estimates and min(e.seconds for e in estimates) > 0
    assert min(e.low for e in estimates) > 0


def test_a_real_training_run_gets_an_estimate_while_merging():
    text = ("the cat sat on the mat and the dog ran after the cat " * 40 + "\n") * 50
    estimator = MergeEstimator()
    estimator.MIN_SECONDS = 0.0  # a tiny corpus merges in milliseconds
    seen = []

    def progress(p):
        import time

        estimator.observe(time.monotonic(), p.merges_done, p.merges_target, p.count, p.total_tokens)
        seen.append((phase_of(p.merges_done, p.merges_target, p.total_tokens), p.merges_done))

    bpe.train(text, vocab_size=400, mode="naive", progress=progress)
    assert [phase for phase, _ in seen][-1] == "merging"
    assert estimator.samples and estimator.samples[-1].merges == seen[-1][1]


def test_the_last_merge_is_named_however_many_merges_a_report_spans():
    """One report can span hundreds of merges (the efficient trainer reports every few ms); the
    job page still draws both parts of the pair merged last as tokens, never as a bare id."""
    import json

    from tests.conftest import make_random_words
    from webapp.jobs.settings import JobSettings
    from webapp.jobs.task import train_job

    updates = []
    settings = JobSettings(mode="chunked", trainer="efficient", vocab_size=3000)
    text = make_random_words(60_000)
    tok = train_job(settings, text, report=updates.append, should_stop=lambda: False)
    merging = [u for u in updates if u.phase == "merging"]
    steps = [b.merges_done - a.merges_done for a, b in zip(merging, merging[1:], strict=False)]
    assert max(steps) > 1  # some report did span several merges
    for update in merging:
        for token_id, hex_bytes in json.loads(update.pair):
            assert hex_bytes is not None, (update.merges_done, token_id)
            assert bytes.fromhex(hex_bytes) == tok.token_bytes(token_id)


def test_a_naive_job_never_says_it_splits_text_into_chunks():
    from webapp.jobs.settings import JobSettings
    from webapp.jobs.task import train_job

    phases = set()
    for mode, expect_split in (("naive", False), ("chunked", True)):
        updates = []
        settings = JobSettings(mode=mode, trainer="efficient", vocab_size=300)
        train_job(settings, "some text to split " * 200, report=updates.append, should_stop=bool)
        phases = {u.phase for u in updates}
        assert ("splitting" in phases) == expect_split, (mode, phases)


def test_wall_time_runs_while_a_large_corpus_is_read(app, client, make_corpus):
    """A running job's wall time counts from its start even before its first progress write."""
    from datetime import timedelta

    from webapp.storage.models import TrainingJob, utcnow

    corpus = make_corpus("wall time text " * 20)
    made = client.post(f"/c/{corpus.slug}/train", data={"mode": "chunked", "vocab_size": "270"})
    job_id = int(made.headers["Location"].rsplit("/", 1)[1])
    with app.extensions["bpe_db"].session_scope() as session:
        job = session.get(TrainingJob, job_id)
        job.status, job.phase, job.elapsed_seconds = "running", "reading", 0.0
        job.started_at = utcnow() - timedelta(seconds=42)
    answer = client.get(f"/api/corpora/{corpus.slug}/jobs/{job_id}").get_json()
    assert 42 <= answer["wall_seconds"] < 100
    page = client.get(f"/c/{corpus.slug}/jobs/{job_id}").text
    assert "Wall time so far 4" in page and "reading the corpus" in page
