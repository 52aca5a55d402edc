"""A first visit in a real headless Chromium: from the home page, one click on the sample
reaches a trained naive-vs-chunked comparison (with and without JavaScript), and a tokeniser's
playground from there; and at 390 px the "Compare with…" select stays inside its card while the
compare table scrolls and says so (a phone must reach every column). Screenshots go to
docs/screenshots/.

The 10-second bar is measured by benchmarks/first_visit.py, not here (no timed assertions).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import BROWSER_MARKS, serve_app

pytestmark = BROWSER_MARKS

SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}
WAIT_MS = 120_000  # the shared machine may be busy: a generous bound, not a speed claim


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from serve_app(tmp_path_factory.mktemp("sample-js"))


@pytest.fixture(scope="module")
def plain_site(tmp_path_factory):
    """A second site, so the no-JavaScript visit trains the sample itself too."""
    yield from serve_app(tmp_path_factory.mktemp("sample-nojs"))


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def reach_the_comparison(page, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url + "/")
    expect(page.locator("#sample-title")).to_have_text("New here? Start with a sample")
    page.click("form.sample-start button[type=submit]")
    page.wait_for_url("**/compare/*/*", timeout=WAIT_MS)
    expect(page.locator("#compare-title")).to_contain_text("naive")
    expect(page.locator("#compare-title")).to_contain_text("chunked")
    expect(page.locator(".compare-facts")).to_contain_text("Sample: workshop notes")
    # opened on a demo text, already cut by both: the boundary diff and a verdict
    expect(page.locator(".diff-summary")).to_be_visible()
    expect(page.locator(".verdict-text").last).to_contain_text("fewer token")


def test_one_click_on_the_sample_reaches_the_comparison_and_a_playground(browser, site):
    from playwright.sync_api import expect

    url, _app = site
    context = browser.new_context()  # a first visit: no owner cookie, nothing stored
    page = context.new_page()
    reach_the_comparison(page, url)
    shoot(page, "sample-compare-desktop")
    page.goto(url + "/")
    expect(page.locator(".sample-links a.button")).to_have_text("Compare naive and chunked →")
    shoot(page, "sample-home-desktop")
    page.click(".sample-links a:text-is('chunked')")
    expect(page.locator("#playground-title")).to_be_visible()
    page.fill("#play-text", "The workshop counts every byte of the text, again and again.")
    expect(page.locator("#encoded .tokens .tok").first).to_be_visible()
    assert page.locator("#encoded .tokens .tok").count() > 5
    context.close()


def test_without_javascript_the_click_reaches_the_comparison_too(browser, plain_site):
    url, _app = plain_site
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    reach_the_comparison(page, url)  # /sample reloads itself, then redirects
    context.close()


# ----- 390 px: the "Compare with…" select and the compare table ----------------------------
LONG_NAME = "A tokeniser with a long descriptive name, trained on the workshop notes twice"

FITS_JS = """
() => {
  const select = document.querySelector('#compare-with-b');
  const card = select.closest('section, .card, .tokenizer-header');
  const s = select.getBoundingClientRect(), c = card.getBoundingClientRect();
  return {select: [s.left, s.right], card: [c.left, c.right],
          page: document.documentElement.scrollWidth, view: window.innerWidth};
}
"""

SCROLLS_JS = """
() => {
  const box = document.querySelector('.compare-header .table-scroll');
  const hint = document.querySelector('.compare-header .scroll-hint');
  const style = getComputedStyle(box);
  return {scroll: box.scrollWidth, client: box.clientWidth, overflow: style.overflowX,
          shadows: style.backgroundImage, hint: hint && hint.getClientRects().length > 0,
          page: document.documentElement.scrollWidth, view: window.innerWidth};
}
"""


def own_long_named_pair(app, sample_slug: str) -> tuple[str, str]:
    """An owner (the browser gets its cookie) with two tokenisers of long names on the sample
    corpus: the longest labels "Compare with…" has to fit. -> (owner token, first slug)."""
    import bpe
    from webapp.content.sample import sample_text
    from webapp.plumbing.owners import new_token, token_hash
    from webapp.storage.convert import store_tokenizer
    from webapp.storage.models import Corpus, Owner

    token = new_token()
    database = app.extensions["bpe_db"]
    with database.session_scope() as session:
        owner = Owner(token_sha256=token_hash(token))
        session.add(owner)
        session.flush()
        corpus_id = session.query(Corpus.id).filter(Corpus.slug == sample_slug).scalar()
        slugs = []
        for n, vocab in enumerate((300, 320)):
            tok = bpe.train(sample_text(), vocab_size=vocab, mode="chunked")
            row = store_tokenizer(session, tok, corpus_id=corpus_id, owner_id=owner.id)
            row.name = f"{LONG_NAME} ({n + 1})"
            slugs.append(row.slug)
    return token, slugs[0]


def test_at_390_px_compare_with_fits_its_card_and_the_table_shows_it_scrolls(browser, site):
    from playwright.sync_api import expect

    from webapp.plumbing.security import OWNER_COOKIE

    url, app = site
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.goto(url + "/")
    if page.locator("form.sample-start").count():  # this test alone: train the sample first
        reach_the_comparison(page, url)
        page.goto(url + "/")
    sample_corpus = page.locator(".sample-links a:text-is('train your own')").get_attribute("href")
    token, slug = own_long_named_pair(app, sample_corpus.rsplit("/", 1)[-1])
    context.add_cookies([{"name": OWNER_COOKIE, "value": token, "url": url}])

    page.goto(f"{url}/t/{slug}")
    select = page.locator("#compare-with-b")
    expect(select).to_be_visible()
    assert select.locator("option").count() >= 3  # the sample pair and the other long name
    fit = page.evaluate(FITS_JS)
    assert fit["card"][0] <= fit["select"][0] and fit["select"][1] <= fit["card"][1], fit
    assert fit["page"] <= fit["view"], fit  # and the page itself does not scroll sideways
    shoot(page, "compare-with-phone")

    page.click(".compare-with button[type=submit]")
    page.wait_for_url("**/compare/*/*", timeout=WAIT_MS)
    scrolls = page.evaluate(SCROLLS_JS)
    assert scrolls["scroll"] > scrolls["client"], scrolls  # the table is wider than its card
    assert scrolls["overflow"] == "auto", scrolls  # and scrolls inside it, not the page
    assert scrolls["page"] <= scrolls["view"], scrolls
    assert scrolls["hint"], "no 'scrolls sideways' hint at 390 px"
    assert scrolls["shadows"].count("gradient") >= 2, scrolls  # edge shadows where there is more
    shoot(page, "compare-table-phone")
    context.close()
