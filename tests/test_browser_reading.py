"""How a person reads and moves through the pages, in a real Chromium: line breaks typed into a
box count as typed, with and without JavaScript (a browser sends a form's line breaks as CRLF;
the server-side rule is tested in tests/test_line_breaks.py); never-used tokens wrap as a grid;
a token stream is one Tab stop with the arrow keys inside it."""

from __future__ import annotations

import pytest

from tests.browser import BROWSER_MARKS, serve_app

pytestmark = BROWSER_MARKS

TYPED = "line one\nline two\nline three\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from serve_app(tmp_path_factory.mktemp("line-breaks"))


@pytest.fixture(scope="module")
def trained(site):
    """A tokeniser that never saw a CR, so a stray one costs a token of its own."""
    import bpe
    from webapp.storage.convert import store_tokenizer
    from webapp.storage.uploads import store_text

    url, app = site
    database = app.extensions["bpe_db"]
    text = TYPED * 60
    corpus, _ = store_text(database, text, name="lines", tmp_dir=app.config["UPLOAD_TMP_DIR"])
    tok = bpe.train(text, vocab_size=300)
    with database.session_scope() as session:
        return url, store_tokenizer(session, tok, corpus_id=corpus.id).slug, tok


def _counts(page) -> dict[str, str]:
    pairs = page.locator("#encoded dl.counts div").all()
    return {p.locator("dt").inner_text(): p.locator("dd").inner_text() for p in pairs}


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_playground_counts_the_text_as_typed(browser, trained, javascript):
    from playwright.sync_api import expect

    url, slug, tok = trained
    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    page.goto(f"{url}/t/{slug}")
    page.fill("#play-text", TYPED * 3)
    if javascript:  # encoded as you type
        expect(page.locator("#encoded dl.counts")).to_be_visible()
        expect(page.locator("#encoded dl.counts")).to_contain_text(f"{len(TYPED) * 3}")
    else:
        page.click("#playground-form button[type=submit]:not([formaction])")
    counts = _counts(page)
    assert counts["bytes"] == str(len(TYPED.encode()) * 3)
    assert counts["characters"] == str(len(TYPED) * 3)
    as_sent = tok.encode(TYPED.replace("\n", "\r\n") * 3)
    assert counts["tokens"] == str(len(tok.encode(TYPED * 3))) != str(len(as_sent))
    context.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_a_pasted_corpus_is_stored_as_typed(browser, site, javascript):
    from playwright.sync_api import expect

    url, app = site
    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    page.goto(url + "/")
    name = f"Pasted {'with' if javascript else 'without'} JS"
    page.fill("#upload-name", name)
    page.fill("#upload-text", TYPED)
    page.click("form.upload-form button[type=submit]")
    expect(page.locator("h1")).to_have_text(name, timeout=30_000)
    from sqlalchemy import select

    from webapp.storage.models import Corpus

    with app.extensions["bpe_db"].session_scope() as session:
        corpus = session.scalars(select(Corpus).where(Corpus.name == name)).one()
        assert (corpus.size_bytes, corpus.text) == (29, TYPED)
    context.close()


def test_never_used_tokens_wrap_as_a_grid(browser, trained):
    """Hundreds of never-used tokens take a few rows, not one line each."""
    from playwright.sync_api import expect

    url, slug, tok = trained
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{url}/t/{slug}/evaluate")
    page.fill("#evaluate-text", "z")  # a text that uses almost none of the vocabulary
    page.click("form button[type=submit]")
    expect(page.locator(".token-grid li").first).to_be_visible()
    tops = page.eval_on_selector_all(
        ".token-grid li", "items => items.map(el => Math.round(el.getBoundingClientRect().top))"
    )
    assert len(tops) > 30
    assert len(set(tops)) * 4 < len(tops), (len(set(tops)), len(tops))
    page.close()


def test_a_token_stream_is_one_tab_stop_with_arrow_keys_inside(browser, trained):
    from playwright.sync_api import expect

    url, slug, tok = trained
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{url}/t/{slug}")
    page.fill("#play-text", TYPED * 10)  # dozens of chips
    stream = page.locator("#encoded .tokens[role=list]")
    expect(stream.locator(".tok").nth(20)).to_be_visible()
    # Leaving the box fires its change event, which encodes once more and swaps the stream:
    # focus given to the old stream would be lost with it, so wait for that swap to settle
    # ("networkidle" does not wait for htmx's requests once the page has loaded).
    with page.expect_response(lambda answer: answer.request.method == "POST"):
        page.locator("#play-text").blur()
    # A locator, not wait_for_function: a string predicate that is not true at once is
    # polled by eval, which the page's Content Security Policy refuses (a flaky failure).
    expect(page.locator(".htmx-request, .htmx-swapping, .htmx-settling")).to_have_count(0)
    stream.focus()
    page.keyboard.press("ArrowRight")
    first = stream.locator(".tok").first
    expect(first).to_be_focused()
    page.keyboard.press("ArrowRight")
    expect(stream.locator(".tok").nth(1)).to_be_focused()
    page.keyboard.press("End")
    expect(stream.locator(".tok").last).to_be_focused()
    page.keyboard.press("Tab")  # one Tab leaves the whole stream
    left = page.evaluate("document.activeElement.closest('.tokens') === null")
    assert left
    page.close()
