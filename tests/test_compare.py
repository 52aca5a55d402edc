"""The compare page (naive vs chunked above all), its fragments, and the naive-vs-chunked jobs
flow from the corpus page. Flask test client; asserts on status codes and what pages say."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import func, select

import bpe
from tests.test_xss import NEVER_RAW, SPECIAL, TEXTS, check_page
from webapp.rendering.comparison import crosses_chunk_boundary, verdict
from webapp.rendering.token_display import needs_escape
from webapp.storage.convert import store_tokenizer
from webapp.storage.models import Tokenizer, TrainingJob

HX = {"HX-Request": "true"}
# Why chunked training exists (docs/algorithms.md, "Chunked training"), on a small text: naive
# BPE glues word ends to the next space ("t ", "at ").
TEXT = "that cat sat at the mat; it is not what it was. " * 4


@pytest.fixture
def pair(make_corpus, make_tokenizer):
    corpus = make_corpus(TEXT, name="cats")
    naive = make_tokenizer(TEXT, mode="naive", vocab_size=280, corpus=corpus)
    chunked = make_tokenizer(TEXT, mode="chunked", vocab_size=280, corpus=corpus)
    return corpus, naive, chunked


def page(client, url, **kwargs):
    response = client.get(url, **kwargs)
    return response, response.get_data(as_text=True)


def merge_cells(html: str, side: str) -> dict[str, str]:
    """hex of each merged token shown for a side -> its table cell's HTML."""
    cells = re.findall(
        rf'<td class="merge-parts[^"]*" data-side="{side}" data-merged="([0-9A-F ]+)">(.*?)</td>',
        html,
        flags=re.DOTALL,
    )
    return dict(cells)


# ----- the page ---------------------------------------------------------------------------------
def test_naive_vs_chunked_on_one_corpus_says_which_compresses_better(client, pair):
    _, naive, chunked = pair
    response, html = page(client, f"/compare/{naive.slug}/{chunked.slug}")
    assert response.status_code == 200 and "<html" in html
    naive_count = naive.tok.training.tokens_after[-1]
    chunked_count = chunked.tok.training.tokens_after[-1]
    assert naive_count < chunked_count  # the cost of keeping words apart
    for count in (naive_count, chunked_count):
        assert f"<strong>{count:,}</strong>" in html
    expected = verdict(naive_count, chunked_count)
    assert re.search(
        rf"naive · 280</strong> compresses\s+cats better:\s+"
        rf"<strong>{naive_count}</strong> vs <strong>{chunked_count}</strong> tokens,\s+"
        rf"{expected.fewer} fewer \({expected.percent:.1f}% fewer",
        re.sub(r"<span class=\"side[^>]*>\w</span> ", "", html),
    )
    size = len(TEXT.encode())
    assert f"{size / naive_count:.2f}" in html and f"{size / chunked_count:.2f}" in html
    for fact in ("naive", "chunked", "gpt4", "reference", "training time", "bytes per token"):
        assert fact in html


def test_cross_chunk_markers_for_naive_tokens_only(client, pair):
    _, naive, chunked = pair
    _, html = page(client, f"/compare/{naive.slug}/{chunked.slug}?per_page=200")
    naive_cells, chunked_cells = merge_cells(html, "a"), merge_cells(html, "b")
    assert len(naive_cells) == len(naive.tok.merges)
    assert "mark-cross" in naive_cells["74 20"]  # "t ": a word's end glued to the next space
    assert "mark-cross" in naive_cells["61 74 20"]  # "at "
    assert not any("mark-cross" in cell for cell in chunked_cells.values())
    crossing = [
        new for _, _, new in naive.tok.merges if crosses_chunk_boundary(naive.tok.vocab[new])
    ]
    assert sum("mark-cross" in cell for cell in naive_cells.values()) == len(crossing)
    assert f"{len(crossing)} <small>of {len(naive.tok.merges)}</small>" in html
    # "at" is learned by chunked and (later) by naive; "t " only by naive
    assert "only A" in naive_cells["74 20"] and "only" not in chunked_cells["61 74"]


def test_curves_are_one_accessible_svg(client, pair):
    _, naive, chunked = pair
    _, html = page(client, f"/compare/{naive.slug}/{chunked.slug}")
    svg = html[html.index('<svg class="curve-plot"') : html.index("</svg>")]
    assert "<title" in svg and "<desc" in svg and 'role="img"' in svg
    assert "merges learned" in svg and "tokens in the corpus" in svg
    assert svg.count("<polyline") == 2
    assert "solid line" in html and "dashed line" in html  # the legend does not rely on colour
    first = re.search(r'<polyline points="([^"]+)"', svg).group(1).split()
    assert len(first) == len(naive.tok.merges) + 1  # the start, then one point per merge


def test_vocabulary_overlap_counts(client, pair):
    _, naive, chunked = pair
    _, html = page(client, f"/compare/{naive.slug}/{chunked.slug}")
    a = {naive.tok.vocab[new] for _, _, new in naive.tok.merges}
    b = {chunked.tok.vocab[new] for _, _, new in chunked.tok.merges}
    for label, n in (("in both", a & b), ("only in A", a - b), ("only in B", b - a)):
        assert f"<div><dt>{label}</dt><dd>{len(n):,}</dd></div>" in html


def test_tokenisers_of_different_corpora(client, make_tokenizer):
    a = make_tokenizer(TEXT, mode="naive", vocab_size=280)
    b = make_tokenizer("Quisquam quaerat dolor. " * 10, mode="chunked", vocab_size=270)
    response, html = page(client, f"/compare/{a.slug}/{b.slug}")
    assert response.status_code == 200
    assert "trained on different corpora" in html and "compresses" not in html
    assert "tokens, % of the start" in html


def test_merges_are_paged_with_and_without_htmx(client, pair):
    _, naive, chunked = pair
    url = f"/compare/{naive.slug}/{chunked.slug}/merges?page=2&per_page=5"
    response, html = page(client, url)
    assert response.status_code == 200 and "<html" in html
    response, fragment = page(client, url, headers=HX)
    assert "<html" not in fragment and "ranks 5–9" in fragment
    assert 'rel="next"' in fragment and 'rel="prev"' in fragment
    assert client.get(url.replace("page=2", "page=x")).status_code == 400


# ----- the shared text box ------------------------------------------------------------------------
def test_the_same_text_encoded_by_both(client, pair):
    _, naive, chunked = pair
    text = "that cat sat at the mat"
    url = f"/compare/{naive.slug}/{chunked.slug}/encode"
    response = client.post(url, data={"text": text})
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "<html" in html and f"{text}</textarea>" in html
    for ref in (naive, chunked):
        assert f"<div><dt>tokens</dt><dd>{len(ref.tok.encode(text))}</dd></div>" in html
    fragment = client.post(url, data={"text": text}, headers=HX).get_data(as_text=True)
    assert "<html" not in fragment and fragment.count('class="tokens') == 2
    assert "fewer token" in fragment
    # a GET permalink with the text works too
    response, html = page(client, f"/compare/{naive.slug}/{chunked.slug}?text=cat")
    assert response.status_code == 200 and "cat</textarea>" in html


@pytest.fixture
def small_limit(app_config):
    app_config["PLAYGROUND_MAX_BYTES"] = 100


def test_oversize_text_is_a_clear_413(small_limit, client, pair):
    _, naive, chunked = pair
    url = f"/compare/{naive.slug}/{chunked.slug}/encode"
    response = client.post(url, data={"text": "x" * 101})
    assert response.status_code == 413
    assert "at most 100 bytes" in response.get_data(as_text=True)
    response = client.post(url, data={"text": "x" * 101}, headers=HX)
    assert response.status_code == 413 and "<html" not in response.text
    assert "at most 100 bytes" in response.text
    assert client.post(url, data={"text": "x" * 100}).status_code == 200


# ----- 404s -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["A" * 22, "nope", "%3Cscript%3E"])
def test_unknown_slug_is_the_tokeniser_pages_404(client, pair, bad):
    _, naive, _ = pair
    for url in (
        f"/compare/{bad}/{naive.slug}",
        f"/compare/{naive.slug}/{bad}",
        f"/compare/{naive.slug}/{bad}/merges",
        f"/compare/{naive.slug}/{bad}/encode",
        f"/compare/{naive.slug}/with?b={bad}",
    ):
        response = client.get(url)
        assert response.status_code == 404, url
        assert "no tokeniser at this address" in response.text


def test_a_deleted_tokeniser_is_a_404(app, client, pair):
    _, naive, chunked = pair
    with app.extensions["bpe_db"].session_scope() as session:
        session.get(Tokenizer, chunked.id).deleted_at = datetime(2025, 1, 1)
    response = client.get(f"/compare/{naive.slug}/{chunked.slug}")
    assert response.status_code == 404 and "no tokeniser at this address" in response.text


# ----- "compare with…" on the tokeniser page ------------------------------------------------------
def test_tokeniser_page_offers_the_other_tokenisers_of_its_corpus(client, pair, make_tokenizer):
    _, naive, chunked = pair
    elsewhere = make_tokenizer("other text entirely " * 5, vocab_size=260)
    _, html = page(client, f"/t/{naive.slug}")
    assert "Compare with…" in html
    assert f'value="{chunked.slug}"' in html and elsewhere.slug not in html
    response = client.get(f"/compare/{naive.slug}/with?b={chunked.slug}")
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/compare/{naive.slug}/{chunked.slug}")


# ----- naive vs chunked from the corpus page ------------------------------------------------------
def test_corpus_page_queues_both_jobs_and_leads_to_the_comparison(client, job_runner, make_corpus):
    corpus = make_corpus(TEXT, name="cats")
    assert "Compare naive vs chunked" in client.get(f"/c/{corpus.slug}").text
    form = {"vocab_size": "280", "trainer": "reference", "pattern": "gpt4"}
    response = client.post(f"/c/{corpus.slug}/compare", data=form)
    assert response.status_code == 303
    jobs_url = response.headers["Location"]
    match = re.search(rf"/c/{corpus.slug}/compare/jobs/(\d+)/(\d+)$", jobs_url)
    assert match
    response, html = page(client, jobs_url)
    assert response.status_code == 200 and html.count('data-status="queued"') == 2
    assert "opens here when both jobs have finished" in html
    assert client.get(jobs_url + "/ready", headers=HX).headers.get("HX-Redirect") is None

    assert job_runner.run_next() == int(match.group(1))
    assert job_runner.run_next() == int(match.group(2))
    with job_runner.database.read_scope() as session:
        jobs = [session.get(TrainingJob, int(match.group(i))) for i in (1, 2)]
        slugs = [session.get(Tokenizer, job.tokenizer_id).slug for job in jobs]
        modes = [job.settings_dict["mode"] for job in jobs]
    assert modes == ["naive", "chunked"]
    compare_url = f"/compare/{slugs[0]}/{slugs[1]}"
    response, html = page(client, jobs_url)
    assert html.count('data-status="succeeded"') == 2 and f'href="{compare_url}"' in html
    ready = client.get(jobs_url + "/ready", headers=HX)
    assert ready.headers["HX-Redirect"] == compare_url
    response, html = page(client, compare_url)
    assert response.status_code == 200 and "compresses" in html


def test_jobs_page_of_another_corpus_is_a_404(client, job_runner, make_corpus):
    corpus, other = make_corpus(TEXT, name="cats"), make_corpus("dogs " * 30, name="dogs")
    location = client.post(f"/c/{corpus.slug}/compare", data={"vocab_size": "270"}).location
    assert client.get(location.replace(corpus.slug, other.slug)).status_code == 404


@pytest.fixture
def room_for_two(app_config):
    app_config.update(JOBS_MAX_RUNNING=1, JOBS_MAX_QUEUED=1)


def test_a_queue_without_room_for_both_takes_neither(room_for_two, client, job_runner, make_corpus):
    corpus = make_corpus(TEXT, name="cats")
    job_runner.submit(
        corpus.id,
        {
            "mode": "naive",
            "pattern": None,
            "trainer": "reference",
            "vocab_size": 270,
            "min_frequency": 1,
            "special_tokens": [],
        },
    )
    response = client.post(f"/c/{corpus.slug}/compare", data={"vocab_size": "280"})
    assert response.status_code == 429
    assert "room for 1 more job, and a comparison needs 2" in response.text
    with job_runner.database.read_scope() as session:
        assert session.scalar(select(func.count()).select_from(TrainingJob)) == 1
    job_runner.run_next()  # the queue empties: now both fit
    assert client.post(f"/c/{corpus.slug}/compare", data={"vocab_size": "280"}).status_code == 303


def test_bad_settings_are_refused_on_the_corpus_page(client, make_corpus):
    corpus = make_corpus(TEXT, name="cats")
    response = client.post(f"/c/{corpus.slug}/compare", data={"vocab_size": "12"})
    assert response.status_code == 422 and "Vocab size must be at least 256" in response.text
    response = client.post(
        f"/c/{corpus.slug}/compare", data={"pattern": "custom", "custom_pattern": "("}
    )
    assert response.status_code == 422 and "split pattern does not work" in response.text


def test_library_agrees_on_what_crosses_a_chunk():
    assert crosses_chunk_boundary(b"t ") and crosses_chunk_boundary(b"m ")
    assert not crosses_chunk_boundary(b" the") and not crosses_chunk_boundary(b"qu")
    assert not crosses_chunk_boundary("é".encode()[:1])  # a split character alone: no verdict
    assert len(bpe.split_chunks("dog.", bpe.GPT4_PATTERN)) == 2


# ----- hostile text -------------------------------------------------------------------------------
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=TEXTS)
def test_no_payload_reaches_the_compare_page_raw(app, client, make_corpus, text):
    # test_xss's payloads and checker, on two tokenisers that differ (so "only in" lists and
    # both merge columns are full of payload tokens).
    corpus = make_corpus(text.replace("\x00", "") * 3, name=text[:60].replace("\x00", "") or "x")
    slugs = []
    for mode, size in (("naive", 400), ("chunked", 330)):
        tok = bpe.train(
            text * 3, vocab_size=size, mode=mode, trainer="reference", special_tokens=[SPECIAL]
        )
        with app.extensions["bpe_db"].session_scope() as session:
            slugs.append(store_tokenizer(session, tok, corpus_id=corpus.id).slug)
    base = f"/compare/{slugs[0]}/{slugs[1]}"
    for url, kwargs in (
        (f"{base}?per_page=200&text=x", {}),
        (f"{base}/merges?page=2&per_page=5", {"headers": HX}),
    ):
        response = client.get(url, **kwargs)
        assert response.status_code == 200, url
        check_page(response.data.decode("utf-8"), url)
    for rule in ("group", "hex", "replace"):
        response = client.post(f"{base}/encode", data={"text": text + SPECIAL, "invalid": rule})
        assert response.status_code == 200
        check_page(response.data.decode("utf-8"), f"encode {rule}")
    response = client.post(f"/c/{corpus.slug}/compare", data={"vocab_size": "300"})
    assert response.status_code == 303
    html = client.get(response.location).data.decode("utf-8")
    for job_id in response.location.rsplit("/", 2)[1:]:
        app.extensions["bpe_jobs"].request_cancel(int(job_id))  # the examples share one queue
    # (the jobs page polls /c/ URLs, outside check_page's allow-list: check the text alone)
    assert not [p for p in NEVER_RAW if p in html]
    assert not [c for c in html if needs_escape(c) and c != "\r"]
