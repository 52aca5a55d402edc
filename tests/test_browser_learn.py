"""Seeing BPE learn, in a real headless Chromium (issue 10): compare three tokenisers and see the
boundary diff as text is typed, move the merge scrubber with the keyboard and see the
segmentation change, open a "why this split?" replay. Takes the screenshots under
docs/screenshots/ that the README links to.

Drives Debian's /usr/bin/chromium through Playwright (see shared/BROWSER.md), with the live
server and browser fixtures of test_browser_e2e.py; skipped when Chromium is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import bpe
from tests.test_browser_e2e import CHROMIUM, browser  # noqa: F401 (the browser fixture)
from tests.test_library import LOREM

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, app): the app on a temporary SQLite database, served from a thread."""
    import threading

    from werkzeug.serving import make_server

    from webapp import create_app

    tmp = tmp_path_factory.mktemp("learn")
    app = create_app(
        {
            "TESTING": True,
            "DATABASE_URL": f"sqlite:///{tmp / 'learn.sqlite3'}",
            "UPLOAD_TMP_DIR": str(tmp / "uploads"),
            "JOBS_MODE": "manual",
        }
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", app
    server.shutdown()
    app.extensions["bpe_jobs"].stop()
    app.extensions["bpe_db"].dispose()


@pytest.fixture(scope="module")
def live_server(served):
    return served[0]


@pytest.fixture(scope="module")
def trio(served):
    """Three tokenisers of one corpus (naive, chunked, words), stored as a finished job would."""
    from webapp.convert import store_tokenizer
    from webapp.uploads import store_text

    app = served[1]
    text = LOREM * 4
    database = app.extensions["bpe_db"]
    row, _ = store_text(database, text, name="Lorem", tmp_dir=app.config["UPLOAD_TMP_DIR"])
    slugs = []
    for mode, size in (("naive", 300), ("chunked", 300), ("words", 80)):
        tok = bpe.train(text, vocab_size=size, mode=mode, trainer="reference")
        with database.session_scope() as session:
            slugs.append(store_tokenizer(session, tok, corpus_id=row.id).slug)
    return slugs


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_compare_three_and_see_the_diff(live_server, browser, trio):  # noqa: F811
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{live_server}/compare/{'/'.join(trio)}")
    expect(page.locator("h1")).to_contain_text("words")
    page.fill("#compare-text", "Quisquam ut voluptatem quiquia labore numquam. Amet quaerat.")
    rows = page.locator("#compare-encoded .compare-row")
    expect(rows).to_have_count(3)
    expect(page.locator(".diff-summary")).to_contain_text("only some make")
    expect(page.locator("#compare-encoded .tok.spans-cut").first).to_be_visible()
    expect(page.locator("#compare-encoded .tok.cut-differs").first).to_be_visible()
    expect(page.locator("#compare-encoded .mark-best").first).to_be_visible()
    shot(page, "compare-three.png")

    # the shared scrubber: Home takes every row back to no merges at all
    before = page.locator(".encoded-a .tokens .tok").count()
    page.focus(".scrubber input[type=range]")
    page.keyboard.press("Home")
    expect(page.locator(".encoded-a .scrub-state")).to_contain_text("first 0 of")
    after = page.locator(".encoded-a .tokens .tok").count()
    assert after > before
    page.close()


def test_compare_at_phone_width_scrolls_visibly(live_server, browser, trio):  # noqa: F811
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{live_server}/compare/{'/'.join(trio)}")
    box = page.locator(".compare-header .table-scroll")
    width = page.evaluate("document.documentElement.clientWidth")
    scroll = box.evaluate("e => [e.scrollWidth, e.clientWidth, e.getBoundingClientRect().right]")
    assert scroll[0] > scroll[1]  # the table is wider than its box, so it scrolls ...
    assert scroll[2] <= width + 1  # ... inside the page, nothing cut off at the edge
    assert page.locator(".scroll-hint").is_visible()  # and the page says so
    page_width = page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= width + 1  # no sideways scrolling of the whole page
    shot(page, "compare-three-390.png")
    page.close()
