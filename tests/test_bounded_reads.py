"""No page or API answer reads a corpus's text: previews and counts come from what the upload
stored. Checked on the SQL itself (SQLite loads a whole value even to take a substring of it,
so any statement touching `corpora.text` costs memory in proportion to the corpus); the
benchmark in benchmarks/corpus_view_memory.py measures the memory of real views."""

from __future__ import annotations

import re

from sqlalchemy import event

from webapp.storage.uploads import PREVIEW_CHARS

READS_TEXT = re.compile(r"corpora\.text\b|\bsubstr\s*\(|\btext\s+FROM\s+corpora\b", re.I)


def test_no_page_or_api_answer_reads_the_corpus_text(app, client, make_tokenizer, job_runner):
    text = "Line one \u202e of a long corpus.\n" * 400  # longer than the preview
    first = make_tokenizer(text, vocab_size=280)
    second = make_tokenizer(text, vocab_size=270, mode="naive", pattern=None)
    corpus = first.corpus_slug
    queued = client.post(f"/c/{corpus}/train", data={"vocab_size": "260"})
    job_url = queued.headers["Location"]
    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    engine = app.extensions["bpe_db"].engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        urls = [
            "/",
            f"/c/{corpus}",
            job_url,
            f"{job_url}/status",
            f"/t/{first.slug}",
            f"/t/{first.slug}/merges",
            f"/t/{first.slug}/vocab",
            f"/t/{first.slug}/token/260",
            f"/t/{first.slug}/download/json",
            f"/compare/{first.slug}/{second.slug}",
            f"/compare/{first.slug}/{second.slug}/merges",
            f"/api/t/{first.slug}",
            f"/api/t/{first.slug}/vocab",
            f"/api/t/{first.slug}/merges",
        ]
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
        page = client.get(f"/c/{corpus}").data.decode()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert any("corpus_previews" in s for s in statements)  # the recorder saw the page's SQL
    offending = [s for s in statements if READS_TEXT.search(s)]
    assert offending == []
    # and the page still shows the stored preview, cut at PREVIEW_CHARS with an ellipsis
    assert "Line one <span" in page and "U+202E" in page
    assert page.count("Line one") == PREVIEW_CHARS // len(text.splitlines()[0] + "\n") + 1
    assert "…</pre>" in page
