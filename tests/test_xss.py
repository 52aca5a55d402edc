"""Hostile token text never reaches a page raw.

Hypothesis builds texts full of payloads (`<script>`, `"'><img onerror>`, `hx-get=`, U+202E,
NUL, characters whose bytes naive tokens split into stray continuation bytes), trains a
tokeniser on each, and renders every page that shows its tokens. On every page: no payload
appears verbatim, no character that must be escaped appears raw, the markup holds only our own
tags and htmx attributes, and the body is valid UTF-8.
"""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from webapp.rendering.token_display import needs_escape
from webapp.storage.convert import store_tokenizer

PAYLOADS = [
    "<script>alert(1)</script>",
    "\"'><img src=x onerror=alert(1)>",
    'hx-get="/api/t" hx-trigger="load"',
    "hx-get=",
    "\u202e",
    "\u2066evil\u2069",
    "\x00",
    "\u200d",
    "\x1b[31m",
    "é",
    "東京",
    "😀",
    "</textarea><b>",
    "{{ 7*7 }}",
]
# What must never be in the page source as written by an attacker.
NEVER_RAW = ["<script>", "<img", "onerror=", 'hx-get="/api', "</textarea><b>", 'hx-trigger="load']
OUR_HTMX = {
    "hx-get",
    "hx-post",
    "hx-target",
    "hx-trigger",
    "hx-push-url",
    "hx-swap",
    "hx-headers",  # the CSRF token on <body>
    "hx-sync",  # the encode forms: one request at a time, the newest wins
}
SPECIAL = "<|<script>x</script>|>"

TEXTS = st.lists(
    st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=4)), min_size=3, max_size=12
).map(lambda parts: "x " + " ".join(parts))


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, dict(attrs)))


def check_page(
    html: str, where: str, *, hx_prefixes: tuple[str, ...] = ("/t/", "/compare/")
) -> None:
    for payload in NEVER_RAW:
        assert payload not in html, (where, payload)
    raw = sorted({f"U+{ord(c):04X}" for c in html if needs_escape(c) and c not in "\r"})
    assert raw == [], (where, raw)
    assert "\r" not in html, where
    parser = TagCollector()
    parser.feed(html)
    hx_attributes = 0
    for tag, attrs in parser.tags:
        assert tag not in ("img", "b", "iframe", "object"), (where, tag, attrs)
        if tag == "script":
            assert attrs.get("src", "").startswith("/static/"), (where, attrs)
        for name, value in attrs.items():
            assert not name.startswith("on"), (where, tag, name)
            if name.startswith("hx-"):
                assert name in OUR_HTMX, (where, name)
                if name in ("hx-get", "hx-post"):
                    assert value.startswith(hx_prefixes), (where, value)
                    hx_attributes += 1
    # every `hx-get=`/`hx-post=` in the source is one of the attributes counted above
    assert html.count("hx-get=") + html.count("hx-post=") == hx_attributes, where


def render_everything(client, slug: str, tok: bpe.Tokenizer, text: str) -> None:
    def get(url: str, **kwargs) -> None:
        response = client.get(url, **kwargs)
        assert response.status_code == 200, (url, response.status_code)
        check_page(response.data.decode("utf-8"), url)  # strict: no stray bytes

    def post(url: str, data: dict, **kwargs):
        response = client.post(url, data=data, **kwargs)
        assert response.status_code in (200, 303), (url, response.status_code)
        if response.status_code == 200:
            check_page(response.data.decode("utf-8"), url)
        return response

    get(f"/t/{slug}")
    for rule in ("group", "hex", "replace"):
        for ws in ("0", "1"):
            form = {"text": text + SPECIAL, "invalid": rule, "ws": ws, "view": "text"}
            post(f"/t/{slug}/encode", form)
            post(f"/t/{slug}/encode", form, headers={"HX-Request": "true"})
    post(f"/t/{slug}/encode", {"text": text, "view": "ids"})
    link = post(f"/t/{slug}/share", {"text": text + SPECIAL}).headers["Location"]
    get(link)
    for rule in ("hex", "replace"):
        for page in range(1, -(-tok.vocab_size // 200) + 1):  # every page there is
            get(f"/t/{slug}/vocab?kind=all&per_page=200&page={page}&invalid={rule}")
        get(f"/t/{slug}/merges?per_page=200&invalid={rule}")
    get(f"/t/{slug}/vocab?q={text[2:8]}", headers={"HX-Request": "true"})
    get(f"/t/{slug}/merges?q={text[2:6]}", headers={"HX-Request": "true"})
    for token_id in range(tok.base_size, tok.vocab_size):
        get(f"/t/{slug}/token/{token_id}")
    # the compare page shows tokens too: merges, overlap and the shared text box
    get(f"/compare/{slug}/{slug}?per_page=200")
    post(f"/compare/{slug}/{slug}/encode", {"text": text + SPECIAL, "ws": "1"})
    post(
        f"/compare/{slug}/{slug}/encode",
        {"text": text, "invalid": "hex"},
        headers={"HX-Request": "true"},
    )


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=TEXTS, mode=st.sampled_from(bpe.MODES))
def test_no_payload_reaches_a_page_raw(app, client, make_corpus, text, mode):
    # Corpora refuse NUL (it marks binary files), so the corpus row holds the text without it;
    # the tokeniser itself is trained on the full text, NUL included.
    corpus = make_corpus(text.replace("\x00", "") * 3, name=text[:60].replace("\x00", "") or "x")
    specials = [SPECIAL] if mode != "words" else []
    tok = bpe.train(
        text * 3, vocab_size=400, mode=mode, trainer="reference", special_tokens=specials
    )
    with app.extensions["bpe_db"].session_scope() as session:
        slug = store_tokenizer(session, tok, corpus_id=corpus.id).slug
    render_everything(client, slug, tok, text)


def test_stray_continuation_bytes_in_a_form_post_are_refused_naming_the_offset(
    client, make_tokenizer
):
    # Werkzeug would turn them into U+FFFD silently; the app refuses them, saying where.
    ref = make_tokenizer("ab é 東 " * 20, mode="naive", vocab_size=270)
    body = b"text=ok%80%BF%E6%9D" + b"&view=text"
    response = client.post(
        f"/t/{ref.slug}/encode",
        data=body,
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400
    html = response.data.decode("utf-8")
    check_page(html, "stray bytes")
    assert "byte offset 2" in html and "0x80" in html


def test_the_checker_catches_raw_payloads() -> None:
    # The property above is only as good as check_page; make sure it fails when it should.
    for bad in ("<p><script>alert(1)</script></p>", "<p>\u202e</p>", "<p>hx-get=x</p>"):
        try:
            check_page(bad, "bad")
        except AssertionError:
            continue
        raise AssertionError(f"check_page let {bad!r} through")


def test_the_job_pages_show_special_tokens_and_patterns_as_chips(client, make_corpus):
    corpus = make_corpus("evil text \u202e here " * 20)
    form = {
        "mode": "chunked",
        "pattern": "custom",
        "custom_pattern": "\u202e|\\w+|\\s+",
        "vocab_size": "300",
        "special_tokens": "<|\u202eend|>\n<script>x</script>",
    }
    response = client.post(f"/c/{corpus.slug}/train", data=form)
    assert response.status_code == 303, response.data
    job_page = response.headers["Location"]
    html = client.get(job_page).data.decode("utf-8")
    check_page(html, job_page, hx_prefixes=(f"/c/{corpus.slug}/",))
    assert "U+202E" in html  # the special token, as a chip (a custom pattern shows as "custom")
    compare = client.post(f"/c/{corpus.slug}/compare", data=form)
    assert compare.status_code == 303, compare.data
    html = client.get(compare.headers["Location"]).data.decode("utf-8")
    check_page(html, compare.headers["Location"], hx_prefixes=(f"/c/{corpus.slug}/",))
    assert "U+202E" in html
