"""Every kind of page at a phone's width (390 px) and a laptop's (1280 px), in a real Chromium:
nothing scrolls sideways but a marked scroll box (`.table-scroll`, a focusable region whose
hint says it scrolls), nothing is cut off or drawn past the edge, the compression chart's
labels stay legible, the tokeniser tabs are one row; and the playground's tokens are on the
first screen while you type, at both widths. Screenshots of the pages go to docs/screenshots/.

Uses the Chromium + Playwright set-up of tests/browser.py.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.browser import BROWSER_MARKS, serve_app

pytestmark = BROWSER_MARKS

SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
TYPED = "The careful reader compares the tokens of this sentence, 1,024 times before lunch.\n"
# Long runs learn long tokens (a token page's tree and chips), CJK and code learn the rest.
EXTRA = ("=" * 64 + "\n" + "    return [ord(c) for c in text]  # 東京は日本の首都です。\n") * 40


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from serve_app(tmp_path_factory.mktemp("narrow"))


@pytest.fixture(scope="module")
def pages(site):
    """name -> address of one page of every kind, all on one corpus, owned by the test owner
    (whose cookie the browser gets: an evaluation and an import are shown to their owner)."""
    import bpe
    from bpe.export_tiktoken import rank_file_text
    from tests.conftest import TEST_OWNER_TOKEN, BrowserClient, ensure_owner
    from tests.waiting import wait_for
    from webapp.content.sample import sample_text
    from webapp.storage.convert import store_tokenizer
    from webapp.storage.uploads import store_text

    url, app = site
    database = app.extensions["bpe_db"]
    owner_id = ensure_owner(app, TEST_OWNER_TOKEN)
    text = sample_text() + EXTRA
    corpus, _ = store_text(
        database, text, name="Notes and code", tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    slugs = []
    with database.session_scope() as session:
        corpus.owner_id = owner_id
        session.merge(corpus)
        for mode, size in (("naive", 500), ("chunked", 500), ("words", 500), ("chunked", 700)):
            tok = bpe.train(text, vocab_size=size, mode=mode)
            slugs.append(store_tokenizer(session, tok, corpus_id=corpus.id, owner_id=owner_id).slug)
            if len(slugs) == 1:
                naive = tok
    longest = max(naive.merges, key=lambda m: len(naive.token_bytes(m[2])))[2]
    client = BrowserClient(app, app.response_class)
    evaluated = client.post(f"/c/{corpus.slug}/evaluate", data={"tokenizer": slugs[1]})
    assert evaluated.status_code == 303
    evaluation = wait_for(
        lambda: (
            client.get(f"/c/{corpus.slug}/evaluations/1.json").get_json()["status"] == "succeeded"
        )
    )
    assert evaluation
    small = bpe.train(text, vocab_size=300, mode="chunked")
    imported = client.post(
        "/import",
        data={
            "file": (io.BytesIO(rank_file_text(small).encode()), "notes.tiktoken"),
            "pattern": "gpt2",
        },
        content_type="multipart/form-data",
    )
    job = client.post(f"/c/{corpus.slug}/train", data={"mode": "chunked", "vocab_size": "320"})
    naive_slug, chunked = slugs[0], slugs[1]
    return url, {
        "home": "/",
        "corpus": f"/c/{corpus.slug}",
        "playground": f"/t/{chunked}?text={TYPED}",
        "merges": f"/t/{naive_slug}/merges",
        "vocab": f"/t/{naive_slug}/vocab",
        "token": f"/t/{naive_slug}/token/{longest}",
        "compare-4": f"/compare/{'/'.join(slugs)}?text={TYPED}",
        "evaluation": f"/c/{corpus.slug}/evaluations/1",
        "evaluate": f"/t/{chunked}/evaluate",
        "decode": f"/t/{chunked}/decode?ids=" + "+".join(map(str, range(256, 300))),
        "vocab-diff": f"/compare/{naive_slug}/{chunked}/vocab?side=b",
        "job": job.headers["Location"],
        "import": imported.headers["Location"],
    }


# What a page does wrong at this width: the page wider than the window; a box that scrolls
# sideways without being a marked scroll box, or whose hint is not shown; a box that cuts its
# content off; anything drawn past the window's right edge outside a scroll box; chart text
# smaller than 10 px; tabs in more than one row.
PROBLEMS_JS = """
() => {
  const problems = [];
  const view = document.documentElement.clientWidth;
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (typeof el.className === 'string' && el.className
      ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  if (document.documentElement.scrollWidth > view)
    problems.push(['page scrolls sideways', document.documentElement.scrollWidth, view]);
  // a form control scrolls its own text, a chart's parts are the chart's: only their box counts
  const inside = el => el.parentElement && el.parentElement.closest('input, select, textarea, svg');
  const control = el => el.matches('input, select, textarea, svg');
  for (const el of document.querySelectorAll('body *')) {
    if (inside(el) || el.closest('.visually-hidden')) continue;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    const wider = !control(el) && el.scrollWidth > el.clientWidth + 1;
    if (wider && (style.overflowX === 'auto' || style.overflowX === 'scroll')) {
      if (!el.matches('.table-scroll[role=region][tabindex="0"]')) {
        problems.push(['unmarked scroll box', name(el), el.scrollWidth, el.clientWidth]);
      } else {
        const hint = el.nextElementSibling;
        if (!hint || !hint.matches('.scroll-hint') || !hint.getClientRects().length)
          problems.push(['scroll box without a hint', name(el)]);
      }
    } else if (wider && (style.overflowX === 'hidden' || style.overflowX === 'clip')) {
      problems.push(['cut off', name(el), el.scrollWidth, el.clientWidth]);
    }
    const box = el.getBoundingClientRect();
    if (box.width && box.right > view + 1 && !el.closest('.table-scroll'))
      problems.push(['past the edge', name(el), Math.round(box.right)]);
  }
  for (const text of document.querySelectorAll('svg text')) {
    const height = text.getBoundingClientRect().height;
    if (height && height < 10) problems.push(['chart text too small', text.textContent, height]);
  }
  const rows = new Set([...document.querySelectorAll('.tabs a')].map(
    a => Math.round(a.getBoundingClientRect().top)));
  if (rows.size > 1) problems.push(['tabs in rows', rows.size]);
  return problems.slice(0, 12);
}
"""

KINDS = [
    "home",
    "corpus",
    "playground",
    "merges",
    "vocab",
    "token",
    "compare-4",
    "evaluation",
    "evaluate",
    "job",
    "import",
]
SHOT = {"token", "merges", "vocab", "compare-4", "evaluation", "playground"}


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390", "1280"])
def test_no_page_scrolls_sideways_but_a_marked_box(browser, pages, viewport):
    from tests.conftest import TEST_OWNER_TOKEN
    from webapp.plumbing.security import OWNER_COOKIE

    url, addresses = pages
    context = browser.new_context(viewport=viewport)
    context.add_cookies([{"name": OWNER_COOKIE, "value": TEST_OWNER_TOKEN, "url": url}])
    page = context.new_page()
    found = {}
    for kind in KINDS:
        answer = page.goto(url + addresses[kind])
        assert answer.status == 200, (kind, answer.status)
        page.wait_for_load_state("networkidle")
        problems = page.evaluate(PROBLEMS_JS)
        if problems:
            found[kind] = problems
        if kind in SHOT and viewport is PHONE:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"narrow-{kind}.png"), full_page=True)
    context.close()
    if found:
        pytest.fail("\n".join(f"{kind}: {problems}" for kind, problems in found.items()))


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390", "1280"])
def test_the_playground_shows_its_tokens_on_the_first_screen_as_you_type(browser, pages, viewport):
    from playwright.sync_api import expect

    url, addresses = pages
    page = browser.new_page(viewport=viewport)
    page.goto(url + addresses["playground"].split("?")[0])
    page.fill("#play-text", TYPED * 2)  # as a person would: it scrolls the box into view
    expect(page.locator("#encoded .counts")).to_contain_text(f"{len(TYPED) * 2}")
    where = page.evaluate(
        """() => {
          const box = document.querySelector('#play-text').getBoundingClientRect();
          const chip = document.querySelector('#encoded .tokens .tok').getBoundingClientRect();
          return {box: [box.top, box.bottom], chip: chip.top, height: innerHeight};
        }"""
    )
    assert where["box"][0] >= 0 and where["box"][1] <= where["height"], where  # the box in view
    assert where["chip"] + 20 <= where["height"], where  # and the first tokens too
    page.close()


def test_the_samples_links_open_a_playground_with_a_text_already_cut(browser, site):
    """The home page's "open one with its playground" links: tokens at once, no empty box."""
    from playwright.sync_api import expect

    from tests.waiting import wait_for
    from webapp.content.sample import DEMO_TEXT, start_sample

    url, app = site
    with app.app_context():
        start_sample(app)  # the pair trains in the server's runner
    page = browser.new_page(viewport=LAPTOP)

    def ready():
        page.goto(url + "/")
        return page.locator(".sample-links a:text-is('chunked')").count()

    wait_for(ready, timeout=120, interval=1)
    for mode in ("naive", "chunked"):
        page.goto(url + "/")
        page.click(f".sample-links a:text-is('{mode}')")
        expect(page.locator("#playground-title")).to_be_visible()
        assert page.input_value("#play-text") == DEMO_TEXT
        assert page.locator("#encoded .tokens .tok").count() > 20
        expect(page.locator("#encoded")).not_to_contain_text("Type some text above")
    page.close()
