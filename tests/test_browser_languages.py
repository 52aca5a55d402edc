"""In a real headless Chromium: the languages table of GPT-4 and GPT-4o on the UDHR, from the
languages page's list to the table's page: read the chart (a row per script, each tokeniser's
median premium), save it as docs/screenshots/languages-chart.png, filter to one script (a row
per language). The table is counted before the browser opens it (by the job's own task, in the
test's process): two 100k-200k-token tokenisers on 527 texts take minutes on a loaded machine,
and the job's queue and polling are tests/test_web_languages.py's.

Needs the UDHR texts (tests/udhr_files.py) and the reference tokenisers
(tests/reference_files.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from bpe.importers import import_path
from tests.browser import BROWSER_MARKS, serve_app
from tests.reference_files import reference_dir
from tests.udhr_files import udhr_dir
from webapp.content.imports import store_reference
from webapp.content.parallel_text import store_folder
from webapp.jobs.languages import LanguageRows, run_languages
from webapp.storage.models import JobStatus, Tokenizer

pytestmark = [*BROWSER_MARKS, pytest.mark.slow]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


@pytest.fixture(scope="module")
def live_app(tmp_path_factory):
    texts, refs = udhr_dir(), reference_dir()
    for base, app in serve_app(tmp_path_factory.mktemp("languages")):
        database = app.extensions["bpe_db"]
        store_folder(database, texts)
        ids = []
        for name, label in (("cl100k_base", "GPT-4"), ("o200k_base", "GPT-4o")):
            slug = store_reference(database, import_path(refs / f"{name}.tiktoken"), label)
            with database.read_scope() as session:
                ids.append(session.scalar(select(Tokenizer.id).where(Tokenizer.slug == slug)))
        rows = LanguageRows(database)
        job = rows.submit(ids)
        assert rows.claim(job, stale_after=3600)
        assert run_languages(rows, job) == JobStatus.SUCCEEDED
        yield base, job


def test_the_languages_chart(browser, live_app):
    base, job = live_app
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_default_timeout(120_000)
    try:
        page.goto(f"{base}/languages")
        assert page.is_checked("input[name=tokenizer] >> nth=0")  # GPT-4 and GPT-4o ticked
        with page.expect_navigation():
            page.click(f'a[href="/languages/{job}"]')  # a finished table of references: listed
        page.wait_for_selector("svg.premium-chart")
        legend = page.inner_text("figure.premium-figure figcaption")
        assert "GPT-4o" in legend and "GPT-4" in legend
        labels = page.locator(".premium-chart .row-label").all_text_contents()
        assert labels[0].startswith("Latin (") and any(x.startswith("Han (") for x in labels)
        # English's own premium is 1: the line every row is read against is drawn.
        assert page.locator(".premium-chart line.english").count() == 1
        assert "Han (" in (page.locator("#premium-desc").text_content() or "")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("figure.premium-figure").screenshot(
            path=str(SCREENSHOTS / "languages-chart.png")
        )
        # The worst and best languages per tokeniser, and the table grouped by script.
        assert page.locator(".extreme").count() == 2
        assert page.locator("tr.group").count() > 10

        page.select_option("select[name=script]", "Han")
        with page.expect_navigation():
            page.click("form.language-filters button[type=submit]")
        page.wait_for_selector("svg.premium-chart")
        labels = page.locator(".premium-chart .row-label").all_text_contents()
        assert any("Chinese" in x for x in labels) and not any(
            x.startswith("Latin") for x in labels
        )
        assert page.locator("table.languages tr.group").count() == 1
        assert "tokens/char" in page.inner_text("table.languages")
    finally:
        page.close()
