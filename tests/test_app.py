"""The app itself: factory, configuration, pages, 404s, escaping, vendored htmx."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.same_page import comparable
from webapp import config, create_app
from webapp.storage.models import Corpus, Tokenizer, utcnow

ROOT = Path(__file__).resolve().parent.parent


def test_factory_uses_test_config(app):
    assert app.testing
    assert app.config["JOBS_EXECUTION"] == "manual"


def test_environment_overrides_defaults(monkeypatch, app_config):
    monkeypatch.setenv("BPE_MAX_UPLOAD_MB", "5")
    monkeypatch.setenv("BPE_JOBS_QUEUED", "3")
    monkeypatch.setenv("BPE_JOBS_RUNNING", "2")
    url = f"sqlite:///{Path(app_config['UPLOAD_TMP_DIR']).parent / 'env.sqlite3'}"
    monkeypatch.setenv("DATABASE_URL", url)
    app_config.pop("DATABASE_URL")
    app = create_app(app_config)
    try:
        assert app.config["MAX_UPLOAD_BYTES"] == 5 * 1000 * 1000
        assert (app.config["JOBS_MAX_QUEUED"], app.config["JOBS_MAX_RUNNING"]) == (3, 2)
        assert app.extensions["bpe_db"].url == url
    finally:
        app.extensions["bpe_db"].dispose()


def test_bad_environment_value_stops_start_up_naming_the_variable(monkeypatch, app_config):
    monkeypatch.setenv("BPE_JOBS_QUEUED", "many")
    with pytest.raises(ValueError, match="BPE_JOBS_QUEUED='many'"):
        create_app(app_config)  # reads os.environ, as a real start-up does


def test_postgres_urls_use_psycopg3():
    from webapp.storage.db import normalize_url

    assert normalize_url("postgres://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalize_url("postgresql://h/db") == "postgresql+psycopg://h/db"
    assert normalize_url("sqlite:///x") == "sqlite:///x"


def test_every_setting_is_documented():
    """In the settings page, or in the operator's page (docs/operations.md) for those of
    several machines."""
    pages = [ROOT / "docs" / "configuration.md", ROOT / "docs" / "operations.md"]
    text = "".join(page.read_text(encoding="utf-8") for page in pages)
    missing = [name for name in config.ENV_VARS if f"`{name}`" not in text]
    assert missing == []


@pytest.mark.database("sqlite")
def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(app):
    with app.extensions["bpe_db"].engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000


def test_home_shows_form_and_recent_items(client, make_tokenizer):
    made = make_tokenizer()
    page = client.get("/").get_data(as_text=True)
    assert 'enctype="multipart/form-data"' in page and 'name="text"' in page
    assert "sample" in page
    assert made.slug in page  # the recent tokeniser links to its page


def test_home_when_empty(client):
    page = client.get("/").get_data(as_text=True)
    assert "Your corpora" in page and "None yet" in page and "No tokenisers yet" in page


def test_base_links_css_and_vendored_htmx(client):
    page = client.get("/").get_data(as_text=True)
    assert "/static/app.css" in page and "/static/htmx.min.js" in page
    assert not re.search(r"<script[^>]+src=\"https?://", page)  # no CDN
    script = client.get("/static/htmx.min.js")
    assert script.status_code == 200 and b"htmx" in script.data[:200]
    script.close()


def test_corpus_page_shows_stats_preview_form_jobs_and_tokenizers(client, make_tokenizer):
    made = make_tokenizer()
    page = client.get(f"/c/{made.corpus_slug}").get_data(as_text=True)
    for words in (
        "<dt>size</dt>",
        "<dt>characters</dt>",
        "<dt>lines</dt>",
        "Preview",
        "quick brown fox",
        "Train a tokeniser",
        'name="vocab_size"',
        made.slug,
    ):
        assert words in page


def test_corpus_preview_is_escaped(client, make_corpus):
    corpus = make_corpus('<script>alert("x")</script> "\'><img src=x onerror=alert(1)>')
    page = client.get(f"/c/{corpus.slug}").get_data(as_text=True)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;" in page


@pytest.mark.parametrize(
    "path",
    [
        "/c/AAAAAAAAAAAAAAAAAAAAAA",  # well-formed, unknown
        "/c/short",  # malformed
        "/c/AAAAAAAAAAAAAAAAAAAAAA/jobs/1",
        "/c/AAAAAAAAAAAAAAAAAAAAAA/jobs/1/status",
        "/nowhere",
    ],
)
def test_unknown_addresses_are_404_pages(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert "There is nothing at this address" in response.get_data(as_text=True)


def test_deleted_corpus_answers_the_same_404_as_a_missing_one(app, client, make_corpus):
    corpus = make_corpus()
    with app.extensions["bpe_db"].session_scope() as session:
        session.get(Corpus, corpus.id).deleted_at = utcnow()
    deleted = client.get(f"/c/{corpus.slug}")
    missing = client.get("/c/AAAAAAAAAAAAAAAAAAAAAA")
    assert deleted.status_code == missing.status_code == 404
    assert comparable(deleted.data) == comparable(missing.data)
    assert corpus.slug not in client.get("/").get_data(as_text=True)


def test_deleted_tokenizer_is_not_listed(app, client, make_tokenizer):
    made = make_tokenizer()
    with app.extensions["bpe_db"].session_scope() as session:
        session.get(Tokenizer, made.id).deleted_at = utcnow()
    assert made.slug not in client.get("/").get_data(as_text=True)
    assert made.slug not in client.get(f"/c/{made.corpus_slug}").get_data(as_text=True)


def test_job_of_another_corpus_is_404(app, client, job_runner, make_corpus):
    first, second = make_corpus("first text"), make_corpus("second text")
    response = client.post(f"/c/{first.slug}/train", data={"vocab_size": "260"})
    job_url = response.headers["Location"]
    assert client.get(job_url).status_code == 200
    assert client.get(job_url.replace(first.slug, second.slug)).status_code == 404


def test_wrong_method_is_405_page(client):
    response = client.get("/corpora")
    assert response.status_code == 405


def test_api_errors_are_json(client):
    response = client.get("/api/corpora")
    assert response.status_code == 405
    assert response.is_json


def test_sizes_are_decimal_units_everywhere():
    import doctest

    from webapp import refusals

    assert doctest.testmod(refusals).failed == 0
    assert (
        refusals.human_bytes(150_000_000) == "150 MB"
    )  # not "143.1 MB", binary under a decimal name
    assert refusals.human_bytes(50_000) == "50 kB"


def test_the_favicon_is_our_own_file(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.mimetype == "image/vnd.microsoft.icon"
    assert response.data[:4] == b"\0\0\1\0"  # an ICO header
    assert 'rel="icon"' in client.get("/").get_data(as_text=True)
