"""The chat page in a real headless Chromium, with and without JavaScript: the demo
conversation counted in GPT-4, Llama 3 and Qwen 3 side by side, a message added and typed, the
totals counted again. The screenshot goes to docs/screenshots/chat.png."""

from __future__ import annotations

import json
import re

import pytest

from bpe.chat_types import ChatTemplate
from bpe.importers import import_path
from tests.browser import BROWSER_MARKS, serve_app
from tests.reference_files import REPO
from tests.test_hf_models import model_path
from webapp.content.imports import store_reference

pytestmark = BROWSER_MARKS

SCREENSHOTS = REPO / "docs" / "screenshots"
WAIT_MS = 60_000


def _model(name: str):
    path = model_path(name)
    tok = import_path(path)
    config = json.loads((path.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok.chat_template = ChatTemplate.from_config(config)
    return tok


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    cl100k = REPO / "reference-tokenizers" / "cl100k_base.tiktoken"
    if not cl100k.is_file():
        pytest.skip(f"{cl100k} is missing")
    for url, app in serve_app(tmp_path_factory.mktemp("chat"), jobs_execution="manual"):
        database = app.extensions["bpe_db"]
        store_reference(database, import_path(cl100k), "GPT-4")
        store_reference(database, _model("llama3"), "Llama 3")
        store_reference(database, _model("qwen3"), "Qwen 3")
        yield url


def _totals(page) -> list[int]:
    return [int(t.replace(",", "")) for t in page.locator(".chat-total").all_inner_texts()]


@pytest.mark.parametrize("javascript", [True, False])
def test_a_conversation_counted_in_three_models_then_edited(browser, site, javascript):
    from playwright.sync_api import expect

    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    page.goto(site + "/chat")
    expect(page.locator(".chat-table thead")).to_contain_text("GPT-4")
    expect(page.locator(".chat-table thead")).to_contain_text("Llama 3")
    expect(page.locator(".chat-table thead")).to_contain_text("Qwen 3")
    before = _totals(page)
    assert len(before) == 3 and all(n > 0 for n in before)
    # Llama 3's and Qwen 3's special tokens are shown, marked.
    expect(page.locator(".chat-token.special").first).to_be_visible()

    page.click("button[value=add-user]")
    expect(page.locator(".chat-message")).to_have_count(5, timeout=WAIT_MS)
    page.fill("#content-4", "And one more question, please: how long is a piece of string?")
    page.click("button[value=count]")
    expect(page.locator(".chat-table tbody tr")).to_have_count(6, timeout=WAIT_MS)
    page.wait_for_function(
        "([n]) => document.querySelectorAll('.chat-total').length === 3 && "
        "[...document.querySelectorAll('.chat-total')].some((td, i) => "
        "td.textContent.replace(/,/g, '') !== String(n[i]))",
        arg=[before],
        timeout=WAIT_MS,
    )
    after = _totals(page)
    assert all(a > b for a, b in zip(after, before, strict=True))
    row = page.locator(".chat-table tbody tr").nth(4).inner_text()
    assert re.search(r"5\. user", row)
    if javascript:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "chat.png"), full_page=True)
    context.close()
