"""The home page's playground in a real headless Chromium, at a laptop's 1280×800 and a phone's
390×844: typed text is encoded without a submit (htmx), its tokens appear beside or under the
box and inside the first screen, and two models ticked in the counts table open their
comparison on the same text. Screenshots of it go to docs/screenshots/home-playground-*.png.

The references are imported as `flask import-references` does (tests/reference_files.py says
where the files come from): the site's own models, which the picker lists for every visitor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import BROWSER_MARKS, serve_app
from tests.reference_files import reference_dir

pytestmark = BROWSER_MARKS

SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
WAIT_MS = 60_000  # loading GPT-4o on a busy shared machine: a generous bound, not a speed claim
TYPED = "Tokenisers cut text into pieces: 北京, naïve, 1,024 <tags>."


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A served app with GPT-2, GPT-4 and GPT-4o imported; (base url, {label: slug})."""
    from webapp.content.imports import import_reference_dir

    directory = reference_dir()
    for url, app in serve_app(tmp_path_factory.mktemp("home"), jobs_execution="manual"):
        done = import_reference_dir(app.extensions["bpe_db"], directory)
        yield url, {label: slug for label, slug, _ in done}


_library: dict[str, object] = {}


def expected_count(label: str, text: str = TYPED) -> int:
    """The library's own count for the text, from the reference file itself."""
    import bpe.importers

    name = {"GPT-2": "gpt2", "GPT-4": "cl100k_base", "GPT-4o": "o200k_base"}[label]
    if name not in _library:
        _library[name] = bpe.importers.import_path(reference_dir() / f"{name}.tiktoken")
    return len(_library[name].encode(text))  # type: ignore[attr-defined]


def idle(page) -> None:
    """No htmx request is on its way (its swap would redraw the table under a click)."""
    from playwright.sync_api import expect

    expect(page.locator(".htmx-request")).to_have_count(0, timeout=WAIT_MS)


def inside_first_screen(page, selector: str, height: int) -> None:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, (selector, box, height)


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_typed_text_is_encoded_beside_the_box_and_two_ticked_models_compare(
    browser, site, viewport
):
    from playwright.sync_api import expect

    url, slugs = site
    width, height = VIEWPORTS[viewport]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url + "/")
    expect(page.locator("#home-model")).to_have_value(slugs["GPT-4o"])  # the default model
    # A full page load would forget this mark: it tells a swap from a submit.
    page.evaluate("() => { window.notReloaded = true; }")
    box = page.locator("#home-text")
    box.fill("")
    box.press_sequentially(TYPED, delay=5)
    title = page.locator("#home-tokens .home-tokens-title strong")
    expect(title).to_have_text(f"{expected_count('GPT-4o'):,}", timeout=WAIT_MS)
    expect(page.locator("#home-tokens .tokens")).to_contain_text("北京")
    assert page.evaluate("() => window.notReloaded === true"), "the page was submitted"
    assert page.url == url + "/"
    inside_first_screen(page, "#home-text", height)
    inside_first_screen(page, "#home-tokens .tokens", height)
    # Another model from the picker: encoded at once, still without a submit.
    page.select_option("#home-model", slugs["GPT-2"])
    expect(title).to_have_text(f"{expected_count('GPT-2'):,}", timeout=WAIT_MS)
    assert page.evaluate("() => window.notReloaded === true")
    # The counts table has every model, for the same text; tick two and open the comparison.
    rows = page.locator("table.model-counts tbody tr")
    expect(rows).to_have_count(3)
    for label in ("GPT-2", "GPT-4", "GPT-4o"):
        row = rows.filter(has_text=label)
        expect(row.locator("td.num").first).to_contain_text(f"{expected_count(label):,}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"home-playground-{viewport}.png"))
    # A tick survives typing on: every encode sends the ticked models and gets them back ticked.
    idle(page)
    page.check(f"input[name=t][value='{slugs['GPT-4']}']")
    box.press_sequentially(" More.", delay=5)
    expect(title).to_have_text(f"{expected_count('GPT-2', TYPED + ' More.'):,}", timeout=WAIT_MS)
    idle(page)
    expect(page.locator(f"input[name=t][value='{slugs['GPT-4']}']")).to_be_checked()
    page.check(f"input[name=t][value='{slugs['GPT-4o']}']")
    page.click("form.model-counts-form button[type=submit]")
    page.wait_for_url(f"**/compare/{slugs['GPT-4']}/{slugs['GPT-4o']}?*", timeout=WAIT_MS)
    expect(page.locator("#compare-title")).to_contain_text("GPT-4")
    expect(page.locator("#compare-text")).to_have_value(TYPED + " More.")
    context.close()


def test_without_javascript_the_button_encodes_and_the_table_compares(browser, site):
    from playwright.sync_api import expect

    url, slugs = site
    context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
    page = context.new_page()
    page.goto(url + "/")
    page.fill("#home-text", TYPED)
    page.select_option("#home-model", slugs["GPT-4"])
    page.click("#home-form button[type=submit]")
    page.wait_for_url(url + "/encode")
    expect(page.locator("#home-tokens .home-tokens-title strong")).to_have_text(
        f"{expected_count('GPT-4'):,}"
    )
    expect(page.locator("#home-model")).to_have_value(slugs["GPT-4"])
    page.check(f"input[name=t][value='{slugs['GPT-2']}']")
    page.check(f"input[name=t][value='{slugs['GPT-4']}']")
    page.click("form.model-counts-form button[type=submit]")
    page.wait_for_url(f"**/compare/{slugs['GPT-2']}/{slugs['GPT-4']}?*")
    expect(page.locator("#compare-text")).to_have_value(TYPED)
    context.close()
