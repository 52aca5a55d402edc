"""Evaluating tokenisers on a corpus from its page: figures equal a direct computation, the
never-used list is exact, the table sorts, and large corpora run in a background process."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import time

import pytest

import bpe
from bpe.export_tiktoken import rank_file_text
from tests.waiting import wait_for
from webapp.jobs import evaluations
from webapp.jobs.embedded import EmbeddedRunner
from webapp.jobs.evaluations import EVALUATION, Evaluations
from webapp.jobs.kind import JobKinds
from webapp.storage.convert import store_imported
from webapp.storage.models import EvaluationRow, JobStatus, Tokenizer
from webapp.storage.uploads import store_text

CORPUS = "The cat sat on the mat. The dog ate 12 bones! Ünïcödé 東京 😀\n" * 40


@pytest.fixture
def imported(app, make_tokenizer):
    own = make_tokenizer(CORPUS, vocab_size=300)
    tok = bpe.importers.import_bytes(
        rank_file_text(own.tok).encode(), filename="own.tiktoken", pattern="gpt2"
    )
    with app.extensions["bpe_db"].session_scope() as session:
        row = store_imported(session, tok)
        row.reference = "GPT-4"  # as import-references would label it
        return own, row.slug, tok


def evaluate_via_page(client, corpus_slug, tokenizer_slug):
    response = client.post(f"/c/{corpus_slug}/evaluate", data={"tokenizer": tokenizer_slug})
    assert response.status_code == 303 and response.headers["Location"].endswith("#evaluations")


CHINESE = (
    "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。\n" * 20
)


def test_a_chinese_corpus_shows_tokens_per_character(app, client, make_tokenizer):
    own = make_tokenizer(CHINESE, vocab_size=300)
    evaluate_via_page(client, own.corpus_slug, own.slug)
    html = client.get(f"/c/{own.corpus_slug}").get_data(as_text=True)
    section = html[html.index('id="evaluations"') :]
    ids = own.tok.encode(CHINESE)
    assert f"{len(ids) / len(CHINESE):.3f} <small>tokens/char</small>" in section
    assert f"{len(ids) / len(CHINESE.split()):.3f}" not in section  # no tokens per "word"
    assert ">tokens/char</a>" in section and ">tokens/word</a>" not in section
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.query(EvaluationRow).one()
        assert (row.script, row.spaced) == ("Han", False)
    data = client.get(f"/c/{own.corpus_slug}/evaluations/{row.id}.json").get_json()
    assert data["tokens_per_word"] is None and data["spaced"] is False
    assert data["tokens_per_char"] == pytest.approx(len(ids) / len(CHINESE))
    detail = client.get(f"/c/{own.corpus_slug}/evaluations/{row.id}").get_data(as_text=True)
    assert "tokens per character" in detail and "tokens per word" not in detail


def test_table_figures_match_a_direct_computation(app, client, imported):
    own, ref_slug, ref_tok = imported
    evaluate_via_page(client, own.corpus_slug, own.slug)
    evaluate_via_page(client, own.corpus_slug, ref_slug)
    html = client.get(f"/c/{own.corpus_slug}").get_data(as_text=True)
    section = html[html.index('id="evaluations"') :]
    for tok in (own.tok, ref_tok):
        ids = tok.encode(CORPUS)
        assert f"{len(CORPUS.encode()) / len(ids):.3f}" in section  # bytes per token
        assert f"{len(CORPUS) / len(ids):.3f}" in section  # characters per token
        assert f"{len(ids) / len(CORPUS.split()):.3f}" in section  # tokens per word
        used = set(ids) & set(tok.ordinary_ids)
        assert f"{100 * len(used) / len(tok.ordinary_ids):.1f}%" in section
    assert section.count("<svg") >= 2  # a bar each
    assert "GPT-4" in section

    with app.extensions["bpe_db"].session_scope() as session:
        rows = {r.tokenizer_id: r.id for r in session.query(EvaluationRow)}
    for ref in (own,):
        data = client.get(f"/c/{own.corpus_slug}/evaluations/{rows[ref.id]}.json").get_json()
        expected = sorted(set(ref.tok.ordinary_ids) - set(ref.tok.encode(CORPUS)))
        assert data["never_used"] == expected  # exact
        assert data["status"] == "succeeded" and data["tokens"] == len(ref.tok.encode(CORPUS))
    detail = client.get(f"/c/{own.corpus_slug}/evaluations/{rows[own.id]}").get_data(as_text=True)
    assert "Longest tokens used" in detail and "Never used" in detail


def test_table_sorts_by_each_figure(client, imported, make_tokenizer):
    own, ref_slug, _ = imported
    small = make_tokenizer(CORPUS, vocab_size=260, corpus=None)
    for slug in (own.slug, small.slug):
        evaluate_via_page(client, own.corpus_slug, slug)

    def order(sort):
        html = client.get(f"/c/{own.corpus_slug}?sort={sort}").get_data(as_text=True)
        table = html[html.index('id="evaluation-table"') : html.index("</table>")]
        return re.findall(r'href="/t/([^"]+)"', table)

    best_first = order("bpt")
    assert best_first == [own.slug, small.slug]  # 300 tokens compress better than 260
    assert order("tokens") == [own.slug, small.slug]
    assert order("tpw") == [own.slug, small.slug]
    assert client.get(f"/c/{own.corpus_slug}?sort=bogus").status_code == 200


def test_bad_requests(client, imported):
    own, _, _ = imported
    assert (
        client.post(f"/c/{own.corpus_slug}/evaluate", data={"tokenizer": "nope"}).status_code == 404
    )
    assert client.get(f"/c/{own.corpus_slug}/evaluations/999").status_code == 404
    assert client.get(f"/c/{own.corpus_slug}/evaluations/999.json").status_code == 404
    assert (
        client.post("/c/AAAAAAAAAAAAAAAAAAAAAA/evaluate", data={"tokenizer": own.slug}).status_code
        == 404
    )


def background_runner(database, *, niceness: int = 0) -> tuple[EmbeddedRunner, Evaluations]:
    """A job runner of its own on the app's database, running jobs in its thread."""
    runner = EmbeddedRunner(database, kinds=JobKinds([EVALUATION]), niceness=niceness)
    return runner, Evaluations(runner)


def test_background_runner_evaluates_in_a_child_process(app, imported):
    own, ref_slug, ref_tok = imported
    database = app.extensions["bpe_db"]
    runner, evaluating = background_runner(database)
    runner.start()
    try:
        with database.session_scope() as session:
            ref_id = session.query(Tokenizer).filter_by(slug=ref_slug).one().id
        evaluation_id = evaluating.submit(tokenizer_id=ref_id, corpus_id=own.corpus_id)
        deadline = time.monotonic() + 120
        status = None
        while time.monotonic() < deadline:
            with database.read_scope() as session:
                row = session.get(EvaluationRow, evaluation_id)
                status = row.status
            if status not in ("queued", "running"):
                break
            time.sleep(0.2)
        assert status == "succeeded", row.error
        assert row.tokens == len(ref_tok.encode(CORPUS))
    finally:
        runner.stop()


def test_an_evaluation_child_runs_at_the_configured_lower_priority(app, imported, random_words):
    """Requests come before evaluations, as before trainings (BPE_JOBS_NICE): the app's runner
    carries the setting, and the child process it starts runs that much nicer."""
    own, _, _ = imported
    database = app.extensions["bpe_db"]
    niceness = app.extensions["bpe_jobs"].supervisors[EVALUATION.name].niceness
    assert niceness == app.config["JOBS_NICE"] == 10
    corpus, _ = store_text(
        database, random_words(400_000), name="big", tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    runner, evaluating = background_runner(database, niceness=10)
    runner.start()
    expected = min(os.getpriority(os.PRIO_PROCESS, 0) + 10, 19)
    seen: set[int] = set()
    try:
        evaluation_id = evaluating.submit(tokenizer_id=own.id, corpus_id=corpus.id)
        name = f"bpe-evaluate-{evaluation_id}"

        def niced_or_done() -> bool:
            for child in multiprocessing.active_children():
                if child.name == name and child.pid is not None:
                    with contextlib.suppress(ProcessLookupError):  # it may have just ended
                        seen.add(os.getpriority(os.PRIO_PROCESS, child.pid))
            with database.read_scope() as session:
                done = session.get(EvaluationRow, evaluation_id).status not in ("queued", "running")
            return expected in seen or done

        wait_for(niced_or_done, timeout=120, interval=0.005)
        assert expected in seen, f"the child ran at priorities {seen}, not {expected}"
    finally:
        runner.stop()


def test_cancel_stops_an_evaluation(app, imported):
    own, _, _ = imported
    database = app.extensions["bpe_db"]
    evaluation_id = evaluations.request_evaluation(
        database, tokenizer_id=own.id, corpus_id=own.corpus_id
    )
    assert evaluations.claim_next(database) == evaluation_id
    evaluations.request_cancel(database, evaluation_id)
    evaluations.run_evaluation(database, evaluation_id, interval=0.0)
    with database.read_scope() as session:
        row = session.get(EvaluationRow, evaluation_id)
        assert row.status == JobStatus.CANCELLED.value and row.tokens is None


def test_a_stored_evaluations_never_used_grid_is_paged(app, client, make_tokenizer):
    from tests.test_text_evaluation import never_shown
    from webapp.rendering.evaluations import NEVER_USED_PER_PAGE

    text = "".join(chr(c) for c in range(0x4E00, 0x4F40)) + " tiny corpus"
    ref = make_tokenizer(text * 3, vocab_size=900)
    evaluate_via_page(client, ref.corpus_slug, ref.slug)
    with app.extensions["bpe_db"].session_scope() as session:
        evaluation_id = session.query(EvaluationRow.id).scalar()
    address = f"/c/{ref.corpus_slug}/evaluations/{evaluation_id}"
    never = client.get(f"{address}.json").get_json()["never_used"]
    assert len(never) > NEVER_USED_PER_PAGE
    first = client.get(address).text
    assert never_shown(first) == never[:NEVER_USED_PER_PAGE]
    assert f'href="{address}?never_page=2#never-used"' in first
    second = client.get(f"{address}?never_page=2").text
    assert never_shown(second) == never[NEVER_USED_PER_PAGE:][:NEVER_USED_PER_PAGE]
    assert client.get(f"{address}?never_page=99").status_code == 404
