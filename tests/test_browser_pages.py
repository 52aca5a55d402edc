"""What a reader sees, checked in a real headless Chromium: tokens never cut across lines, and
screenshots of the main pages at a desktop and a phone width (saved under docs/screenshots/).

Uses the Chromium + Playwright set-up of tests/browser.py (Debian's Chromium, which
scripts/install-browser.sh installs).
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import pytest

from tests.browser import BROWSER_MARKS, serve_app

pytestmark = BROWSER_MARKS

SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
WIDTHS = {"desktop": (1400, 900), "phone": (390, 844)}
# Long ids, CJK, emoji, code and runs of spaces: everything that used to wrap inside a chip.
MIXED_TEXT = (
    "The tokeniser cuts 186 words, 3.14159 numbers and URLs like https://example.org/a?b=c.\n"
    "東京は日本の首都です。北京是中国的首都。 😀🎉👩‍💻 emoji and ZWJ sequences.\n"
    "def encode(self, text: str) -> list[int]:\n        return [ord(c) for c in text]\n"
    "    indented    with    wide    gaps,\tand tabs\t\tbetween words.\n"
) * 4


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A served app (thread-mode jobs) and the app object, to store corpora directly."""
    yield from serve_app(tmp_path_factory.mktemp("layout"))


@pytest.fixture(scope="module")
def trained(site):
    """A chunked tokeniser trained on mixed text; returns (base url, tokeniser slug)."""
    import bpe
    from webapp.storage.convert import store_tokenizer
    from webapp.storage.uploads import store_text

    url, app = site
    database = app.extensions["bpe_db"]
    corpus, _ = store_text(
        database, MIXED_TEXT * 20, name="Mixed sample", tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    tok = bpe.train(MIXED_TEXT * 20, vocab_size=400, mode="chunked")
    with database.session_scope() as session:
        row = store_tokenizer(session, tok, corpus_id=corpus.id)
        slug = row.slug
    return url, slug


# Every chip of every token stream: how many boxes (client rects) it is drawn as, its text.
CHIPS_JS = """
() => [...document.querySelectorAll('.tokens .tok')].map(el => ({
    rects: el.getClientRects().length,
    text: el.textContent,
    right: el.getBoundingClientRect().right,
}))
"""


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
@pytest.mark.parametrize("width", list(WIDTHS), ids=list(WIDTHS))
@pytest.mark.parametrize("view", ["text", "ids"])
def test_no_token_is_split_across_lines(browser, trained, view, width, javascript):
    from playwright.sync_api import expect

    url, slug = trained
    w, h = WIDTHS[width]
    context = browser.new_context(
        viewport={"width": w, "height": h}, java_script_enabled=javascript
    )
    page = context.new_page()
    if javascript:
        # Typed into the playground: htmx encodes it and swaps the view in.
        page.goto(f"{url}/t/{slug}")
        page.fill("#play-text", MIXED_TEXT)
        page.check(f"input[name=view][value={view}]")
        expect(page.locator(".tokens-ids" if view == "ids" else ".tokens")).to_be_visible()
        expect(page.locator("#encoded .counts")).to_contain_text(f"{len(MIXED_TEXT):,}")
    else:
        # Without JavaScript the same state comes from the query string.
        query = urllib.parse.urlencode({"text": MIXED_TEXT, "view": view})
        page.goto(f"{url}/t/{slug}?{query}")
    chips = page.evaluate(CHIPS_JS)
    expected = len(trained_ids(url, slug))
    split = [c["text"] for c in chips if c["rects"] != 1]
    assert len(chips) >= (expected if view == "ids" else expected // 2) > 100
    assert not split, f"{len(split)} of {len(chips)} chips drawn in pieces: {split[:5]}"
    # Nothing runs off the right edge of the page either.
    assert max(c["right"] for c in chips) <= w
    if view == "ids":
        assert [int(c["text"]) for c in chips] == trained_ids(url, slug)
    context.close()


def trained_ids(url: str, slug: str) -> list[int]:
    import json
    import urllib.request

    request = urllib.request.Request(
        f"{url}/api/t/{slug}/encode",
        data=json.dumps({"text": MIXED_TEXT}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["ids"]


# Records every text the upload form's status line shows, across the navigation that follows.
RECORD_UPLOAD_STATUS = """
new MutationObserver(() => {
  const sent = document.querySelector('.upload-sent');
  const bar = document.querySelector('.upload-progress');
  if (!sent || !sent.textContent) return;
  const seen = JSON.parse(sessionStorage.getItem('upload-status') || '[]');
  seen.push([sent.textContent, bar ? bar.value : null, bar ? bar.max : null]);
  sessionStorage.setItem('upload-status', JSON.stringify(seen));
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def test_upload_shows_bytes_sent_on_a_bar(browser, site):
    from playwright.sync_api import expect

    url, _app = site
    context = browser.new_context()
    context.add_init_script(RECORD_UPLOAD_STATUS)
    page = context.new_page()
    page.goto(url + "/")
    body = ("upload progress " * 4000 + "\n").encode() * 40  # 2.6 MB
    page.fill("#upload-name", "Progress corpus")
    page.set_input_files(
        "#upload-file", files=[{"name": "big.txt", "mimeType": "text/plain", "buffer": body}]
    )
    page.click("form.upload-form button[type=submit]")
    expect(page.locator("h1")).to_have_text("Progress corpus", timeout=60_000)
    seen = page.evaluate("JSON.parse(sessionStorage.getItem('upload-status') || '[]')")
    texts = [text for text, _, _ in seen]
    assert any(text.startswith("2.6 MB sent") for text in texts), texts
    # The bar's maximum is the whole multipart body: the file and a few hundred bytes of form.
    assert any(v == m and len(body) <= m < len(body) + 2000 for _, v, m in seen), seen
    context.close()


def test_upload_without_javascript_still_posts_the_form(browser, site):
    from playwright.sync_api import expect

    url, _app = site
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(url + "/")
    page.fill("#upload-name", "Plain corpus")
    page.set_input_files(
        "#upload-file",
        files=[{"name": "plain.txt", "mimeType": "text/plain", "buffer": b"plain text\n" * 50}],
    )
    page.click("form.upload-form button[type=submit]")
    expect(page.locator("h1")).to_have_text("Plain corpus")
    page.goto(url + "/")
    page.click("form.upload-form button[type=submit]")  # nothing chosen: the message, in place
    expect(page.locator(".error")).to_contain_text("Choose a file")
    context.close()


def shoot(page, name: str, width: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.mark.parametrize("width", list(WIDTHS))
def test_screenshots_of_the_main_pages(browser, site, trained, width):
    """Home, a corpus page, a running job and a tokeniser page, saved under docs/screenshots/
    for the README and for reviewing the layout by eye."""
    from playwright.sync_api import expect

    url, app = site
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h})
    page = context.new_page()
    page.goto(url + "/")
    shoot(page, "home", width)

    from webapp.storage.uploads import store_text

    big = (MIXED_TEXT + "more words to merge, and then some more words again\n") * 400
    corpus, _ = store_text(
        app.extensions["bpe_db"],
        big,
        name="Screenshot corpus",
        tmp_dir=app.config["UPLOAD_TMP_DIR"],
    )
    page.goto(f"{url}/c/{corpus.slug}")
    expect(page.locator("h1")).to_have_text("Screenshot corpus")
    shoot(page, "corpus", width)

    # A job slow enough to be caught merging: the reference trainer recounts every pair of
    # the whole text (naive mode) for each merge.
    page.select_option("#train-mode", "naive")
    page.fill("#train-vocab", "1200")
    page.select_option("#train-trainer", "reference")
    page.click("form.train-form button[type=submit]")
    status = page.locator(".job-status")
    expect(status).to_have_attribute("data-phase", "merging", timeout=60_000)
    expect(status.locator(".merges")).not_to_contain_text(re.compile(r"^0 / "), timeout=30_000)
    shoot(page, "job-running", width)
    page.click(".job-status button[type=submit]")  # cancel, unless it has just finished
    expect(status).not_to_have_attribute("data-status", "running", timeout=30_000)

    url_, slug = trained
    page.goto(f"{url_}/t/{slug}")
    page.fill("#play-text", MIXED_TEXT[:400])
    expect(page.locator("#encoded .tokens")).to_be_visible()
    shoot(page, "tokenizer", width)
    context.close()
