"""End to end in a real headless Chromium: upload -> train -> the job finishes -> tokeniser page,
and upload -> compare naive vs chunked -> both jobs finish -> the compare page.

Drives Debian's /usr/bin/chromium through Playwright (tests/browser.py; scripts/install-browser.sh
installs it); skipped when it is not installed.
"""

from __future__ import annotations

import re

import pytest

from tests.browser import BROWSER_MARKS, serve_app

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    for url, _app in serve_app(tmp_path_factory.mktemp("e2e")):
        yield url


def upload(page, live_server: str, name: str, text: str) -> None:
    """Upload text as a file from the home page and land on its corpus page."""
    from playwright.sync_api import expect

    page.goto(live_server + "/")
    page.fill("#upload-name", name)
    page.set_input_files(
        "#upload-file",
        files=[{"name": "cats.txt", "mimeType": "text/plain", "buffer": text.encode()}],
    )
    page.click("form.upload-form button[type=submit]")
    expect(page.locator("h1")).to_have_text(name)


def test_upload_train_and_open_the_tokenizer(live_server, browser):
    from playwright.sync_api import expect

    page = browser.new_page()
    text = "the cat sat on the mat; the cat ate the rat. 東京 😀\n" * 200
    upload(page, live_server, "Browser corpus", text)
    expect(page.locator(".corpus-stats")).to_contain_text(f"{len(text.encode()):,}")

    page.fill("#train-vocab", "300")
    page.select_option("#train-trainer", "reference")
    page.click("form.train-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Training job")
    # The status fragment polls itself with htmx until the job is done.
    status = page.locator(".job-status")
    expect(status).to_have_attribute("data-status", "succeeded", timeout=60_000)
    link = status.locator("a[href^='/t/']")
    expect(link).to_be_visible()
    link.click()
    page.wait_for_url("**/t/*")
    assert page.url.rsplit("/", 1)[-1] and "/t/" in page.url
    expect(page.locator("body")).to_contain_text("Browser corpus")
    page.close()


def test_compare_naive_vs_chunked_from_the_corpus_page(live_server, browser):
    from playwright.sync_api import expect

    page = browser.new_page()
    upload(
        page,
        live_server,
        "Compare corpus",
        "that cat sat at the mat; it is not what it was.\n" * 100,
    )
    page.fill("#compare-vocab", "300")
    page.select_option("#compare-trainer", "reference")
    page.click("form.compare-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Naive vs chunked")
    # Both statuses poll themselves; once both succeeded htmx is sent on to the compare page.
    page.wait_for_url("**/compare/*/*", timeout=60_000)
    expect(page.locator("h1")).to_contain_text("naive")
    expect(page.locator("h1")).to_contain_text("chunked")
    expect(page.locator(".verdict")).to_contain_text("compresses Compare corpus better")
    expect(page.locator(".mark-cross").first).to_be_visible()
    page.fill("#compare-text", "the cat sat")
    expect(page.locator("#compare-encoded .tokens")).to_have_count(2)
    page.close()


def test_htmx_is_served_from_the_app(live_server, browser):
    page = browser.new_page()
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(live_server + "/")
    assert page.evaluate("typeof htmx") == "object"
    assert all(url.startswith(live_server) for url in requests)
    page.close()


# Registered before any page script runs (Playwright's init scripts are not subject to the CSP).
CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI + " " + e.sourceFile);
});
"""


def test_every_flow_works_under_the_csp_without_a_violation(live_server, browser):
    """The strict CSP blocks nothing the pages need. htmx polls, swaps, posts with the
    CSRF header from <body hx-headers>, redirects; the owner link claims on a second browser."""
    from playwright.sync_api import expect

    context = browser.new_context()
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.on(
        "response",
        lambda r: console.append(f"error: {r.status} {r.url}") if r.status >= 400 else None,
    )
    violations: list[str] = []

    def visited() -> None:  # collect this page's violations before leaving it
        violations.extend(page.evaluate("window.__cspViolations || []"))

    upload(page, live_server, "CSP corpus", "the cat sat on the mat; the cat ate the rat.\n" * 80)
    owner_link = page.locator(".owner-link-value").input_value()
    assert "/owner/claim#" in owner_link
    page.fill("#train-vocab", "300")
    page.select_option("#train-trainer", "reference")
    page.click("form.train-form button[type=submit]")
    status = page.locator(".job-status")
    expect(status).to_have_attribute("data-status", "succeeded", timeout=60_000)  # htmx polled
    visited()
    status.locator("a[href^='/t/']").click()
    page.wait_for_url("**/t/*")
    tokenizer_url = page.url
    page.fill("#play-text", "the cat")  # htmx posts as you type (CSRF header)
    expect(page.locator("#encoded .tokens")).to_contain_text("cat", timeout=15_000)
    page.click("text=Share link")
    expect(page.locator("#share input")).to_have_value(re.compile(r"/s/"), timeout=15_000)
    visited()
    page.goto(tokenizer_url + "/vocab")
    page.fill("input[name=q]", "at")
    page.keyboard.press("Enter")
    expect(page.locator("body")).to_contain_text("at")
    visited()
    page.goto(tokenizer_url + "/merges")
    visited()
    page.goto(live_server + "/")
    expect(page.locator(".recent-corpora")).to_contain_text("CSP corpus")
    visited()

    # The owner link, opened in another browser, makes it an owner there too.
    other = browser.new_context()
    other.add_init_script(CSP_LISTENER)
    second = other.new_page()
    second.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    second.goto(owner_link)
    expect(second.locator("#owner-token")).not_to_have_value("")  # claim.js read the #fragment
    assert "#" not in second.url  # and took the token out of the address bar
    second.click("form.claim-form button[type=submit]")
    expect(second.locator(".recent-corpora")).to_contain_text("CSP corpus")
    violations.extend(second.evaluate("window.__cspViolations || []"))
    other.close()
    context.close()

    assert violations == []
    # htmx logs a request it aborted on purpose (hx-sync="this:replace" drops a superseded
    # playground request; leaving a page ends a poll) as htmx:sendAbort plus htmx:afterRequest.
    # Those are not failures: a failed answer is caught above as a >= 400 response, and a
    # network failure still logs htmx:sendError.
    aborted = ("error: htmx:sendAbort", "error: htmx:afterRequest")
    console = [line for line in console if not line.startswith(aborted)]
    assert [line for line in console if "Content Security Policy" in line or "error" in line] == []
