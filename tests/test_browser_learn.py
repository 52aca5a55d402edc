"""Seeing BPE learn, in a real headless Chromium: compare three tokenisers and see the
boundary diff as text is typed, move the merge scrubber with the keyboard and see the
segmentation change, open a "why this split?" replay. Takes the screenshots under
docs/screenshots/ that the README links to.

Drives Debian's /usr/bin/chromium through Playwright (tests/browser.py), with the live
server and browser fixtures of tests/browser.py; skipped when Chromium is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import bpe
from tests.browser import BROWSER_MARKS, serve_app
from tests.test_library import LOREM

TOKS: list[bpe.Tokenizer] = []  # the trio's library objects, in the same order
SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, app): jobs stay queued; the trio is stored directly."""
    yield from serve_app(tmp_path_factory.mktemp("learn"), jobs_execution="manual")


@pytest.fixture(scope="module")
def live_server(served):
    return served[0]


@pytest.fixture(scope="module")
def trio(served):
    """Three tokenisers of one corpus (naive, chunked, words), stored as a finished job would."""
    from webapp.storage.convert import store_tokenizer
    from webapp.storage.uploads import store_text

    app = served[1]
    text = LOREM * 4
    database = app.extensions["bpe_db"]
    row, _ = store_text(database, text, name="Lorem", tmp_dir=app.config["UPLOAD_TMP_DIR"])
    slugs = []
    for mode, size in (("naive", 300), ("chunked", 300), ("words", 80)):
        tok = bpe.train(text, vocab_size=size, mode=mode, trainer="reference")
        TOKS.append(tok)
        with database.session_scope() as session:
            slugs.append(store_tokenizer(session, tok, corpus_id=row.id).slug)
    return slugs


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_compare_three_and_see_the_diff(live_server, browser, trio):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # the machine may be busy: wait generously
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


def test_compare_at_phone_width_scrolls_visibly(live_server, browser, trio):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{live_server}/compare/{'/'.join(trio)}")
    box = page.locator(".compare-header .table-scroll")
    width = page.evaluate("document.documentElement.clientWidth")
    scroll = box.evaluate("e => [e.scrollWidth, e.clientWidth, e.getBoundingClientRect().right]")
    assert scroll[0] > scroll[1]  # the table is wider than its box, so it scrolls ...
    assert scroll[2] <= width + 1  # ... inside the page, nothing cut off at the edge
    assert page.locator(".compare-header .scroll-hint").is_visible()  # and the page says so
    page_width = page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= width + 1  # no sideways scrolling of the whole page
    shot(page, "compare-three-390.png")
    page.close()


def test_scrub_with_the_keyboard_and_ask_why(live_server, browser, trio):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # the machine may be busy: wait generously
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{live_server}/t/{trio[1]}")
    text = "Quisquam ut voluptatem quiquia labore numquam."
    tok = TOKS[1]
    page.fill("#play-text", text)
    chips = page.locator("#encoded .tokens > .tok")
    expect(page.locator("#encoded .counts")).to_contain_text(f"tokens{len(tok.encode(text))}")
    full = chips.count()
    removed = len(text.encode()) - len(tok.encode(text, merge_limit=1))

    slider = page.locator("#scrub-k")
    slider.focus()
    page.keyboard.press("Home")  # no merges: every byte its own token
    expect(page.locator("#encoded .scrub-merge")).to_contain_text("no merges")
    expect(chips).to_have_count(len(text.encode()))
    page.keyboard.press("ArrowRight")  # merge 1: "qu"
    expect(page.locator("#encoded .scrub-merge")).to_contain_text("merge 1 of 44")
    expect(page.locator("#encoded .scrub-merge")).to_contain_text(f"removed {removed} boundar")
    expect(chips).to_have_count(len(text.encode()) - removed)
    expect(page.locator(".scrub-value")).to_have_text("first 1 merge")
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    expect(page.locator("#encoded .scrub-merge")).to_contain_text("merge 6 of 44")
    shot(page, "scrubber.png")
    page.keyboard.press("End")
    expect(page.locator("#encoded .scrub-merge")).to_have_count(0)
    expect(chips).to_have_count(full)
    page.wait_for_load_state("networkidle")  # the slider's and the form's requests both done

    # "why this split?": focus a token and press Enter
    chips.nth(3).focus()
    page.keyboard.press("Enter")
    panel = page.locator("#why .why")
    expect(panel).to_contain_text("Why this split?")
    expect(panel).to_contain_text("No learned pair is left")
    expect(panel).to_contain_text("exactly the tokens the playground shows")
    expect(panel.locator(".pair-applied").first).to_be_visible()
    chips.nth(0).click()  # a click asks about another token
    expect(panel).to_contain_text("token 1")
    panel.scroll_into_view_if_needed()
    shot(page, "why-this-split.png")
    page.close()


# ----- watching a training job learn ------------------------------------------------------------
@pytest.fixture(scope="module")
def training_server(tmp_path_factory):
    """A server whose runner trains the jobs it is given (in a child process, as in production)."""
    for url, _app in serve_app(tmp_path_factory.mktemp("watch"), jobs_execution="thread"):
        yield url


def test_a_running_job_draws_its_merges_and_curves_live(training_server, browser):
    """The job page of a naive training: the latest merges appear as tokens, and the
    compression curve is redrawn while the job runs, by htmx's polling (the page itself is
    never reloaded); the finished page keeps the curves.

    The watched job uses the reference trainer, which makes one pass over the whole text per
    merge: thousands of merges take minutes on any machine, so the page is seen while the job
    runs however fast the machine is (the efficient trainer can finish before the first poll),
    and the job is cancelled once seen. A short efficient job then shows the finished page."""
    from playwright.sync_api import expect

    from tests.conftest import make_random_words
    from tests.test_browser_e2e import upload

    expect.set_options(timeout=60_000)  # the machine may be busy: wait generously
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    upload(page, training_server, "Watch corpus", make_random_words(30_000))
    corpus_url = page.url
    page.select_option("#train-mode", "naive")
    page.select_option("#train-trainer", "reference")
    page.fill("#train-vocab", "8000")
    page.click("form.train-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Training job")
    page.evaluate("window.__notReloaded = true")
    merges = page.locator(".watch-learn .latest-merges li")
    expect(merges.first).to_be_visible(timeout=240_000)  # after reading and counting pairs
    expect(merges.first.locator(".tok")).to_have_count(3)  # left + right -> what it became
    curve = page.locator(".compression-chart polyline.curve")
    expect(curve).to_be_attached()
    first = curve.get_attribute("points")
    page.wait_for_function(
        "p => { const c = document.querySelector('.compression-chart polyline.curve');"
        " return c && c.getAttribute('points') !== p; }",
        arg=first,
        timeout=120_000,
    )
    status = page.locator(".job-status")
    page.wait_for_function(  # some merges in, for the screenshot
        "() => { const r = document.querySelector('.latest-merges .rank');"
        " return (r ? +r.textContent.replace(/[#,]/g, '') : 0) > 60; }",
        timeout=240_000,
    )
    expect(status).to_have_attribute("data-status", "running")  # watched while it ran
    shot(page, "watch-it-learn.png")
    assert page.evaluate("window.__notReloaded === true")  # redrawn in place, not reloaded
    status.get_by_role("button", name="Cancel").click()
    expect(status).to_have_attribute("data-status", "cancelled")

    page.goto(corpus_url)
    page.select_option("#train-mode", "naive")
    page.fill("#train-vocab", "700")
    page.click("form.train-form button[type=submit]")
    expect(page.locator(".job-status")).to_have_attribute(
        "data-status", "succeeded", timeout=400_000
    )
    expect(page.locator(".watch-learn .vocab-now")).to_have_text("700")
    expect(page.locator(".vocab-chart polyline.curve")).to_be_attached()
    page.close()
