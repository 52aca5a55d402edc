"""In a real headless Chromium: import GPT-4's tokeniser (cl100k_base) through the home page's
form, follow the import's job page to it, type in its playground and see GPT-4's own ids, open
its token page and compare it.

Drives Debian's /usr/bin/chromium through Playwright, like tests/test_browser_e2e.py; needs the
reference tokenisers (tests/reference_files.py).
"""

from __future__ import annotations

import pytest

from bpe.importers import import_path
from tests.browser import BROWSER_MARKS, serve_app
from tests.reference_files import reference_dir

pytestmark = [*BROWSER_MARKS, pytest.mark.slow]


@pytest.fixture(scope="module")
def live_app(tmp_path_factory):
    yield from serve_app(tmp_path_factory.mktemp("imports-e2e"))


def test_import_cl100k_and_type_in_its_playground(browser, live_app):
    base, _ = live_app
    refs = reference_dir()
    page = browser.new_page()
    try:
        page.goto(f"{base}/")
        page.set_input_files("#import-file", str(refs / "cl100k_base.tiktoken"))
        page.set_input_files("#import-sidecar", str(refs / "cl100k_base.tiktoken.json"))
        page.set_default_timeout(240_000)  # importing 100k tokens on a loaded machine
        with page.expect_navigation(timeout=60_000):
            page.click("form.import-form button[type=submit]", no_wait_after=True)
        # The form answers at once with the import's page, which follows the job (htmx polls
        # its status) until it links the tokeniser.
        assert "/imports/" in page.url
        assert "cl100k_base.tiktoken" in page.inner_text("#job-title")
        page.wait_for_selector('.job-status[data-status="succeeded"] .imported a', timeout=240_000)
        with page.expect_navigation():
            page.click(".job-status .imported a")
        assert "/t/" in page.url
        assert "cl100k_base" in page.inner_text("#tokenizer-title")
        page.fill("#play-text", "hello world")
        page.wait_for_selector('#encoded [data-tip^="id 15339 "]', timeout=60_000)
        page.wait_for_selector('#encoded [data-tip^="id 1917 "]', timeout=60_000)
        slug = page.url.rstrip("/").rsplit("/", 1)[-1].split("?")[0]
        page.goto(f"{base}/t/{slug}/token/15339")
        assert "hello" in page.inner_text("body")
        tok = import_path(refs / "cl100k_base.tiktoken")
        left, right, _ = tok.merges[tok.merge_rank(15339)]
        for part in (left, right):  # the derived pair, linked from the merge tree
            assert page.query_selector(f'a[href="/t/{slug}/token/{part}"]') is not None
    finally:
        page.close()
