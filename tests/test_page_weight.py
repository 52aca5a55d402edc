"""Pages that show a long text's tokens stay within 40 bytes of HTML per byte of the text.

At the 50 kB playground limit a page once held every token's chip, each spelling out its id,
rank and bytes twice (tooltip and label): 5-8 MB for the playground or a scrubber step, four
times that for a 4-way compare. The chips now stop at a budget (`chip_budget`) with a note
saying how many are shown; a text of up to 25 kB is never cut. Sizes, not times: the times are
in benchmarks/scrubber_compare.py --big.
"""

from __future__ import annotations

import re

import pytest

from tests.test_library import LOREM

HX = {"HX-Request": "true"}
LIMIT = 50_000
PER_BYTE = 40
# Accented letters and CJK as well as ASCII: multi-byte characters, partial-UTF-8 groups.
PARAGRAPH = LOREM + "Crème brûlée, naïve café. 日本語のテキスト、漢字とかな。\n"


def text_of(size: int) -> str:
    """`size` bytes (at most) of the paragraph repeated, cut at a character."""
    text = PARAGRAPH * (size // len(PARAGRAPH.encode()) + 1)
    return text.encode()[:size].decode(errors="ignore")


def chips_in(html: str) -> int:
    return len(re.findall(r'role="listitem"', html))


@pytest.fixture
def four(make_corpus, make_tokenizer):
    """Four small tokenisers (many tokens per text: the heaviest pages), two modes."""
    corpus = make_corpus(LOREM, name="lorem")
    return [
        make_tokenizer(LOREM, mode=mode, vocab_size=size, corpus=corpus)
        for mode in ("naive", "chunked")
        for size in (270, 300)
    ]


def pages(four, text: str) -> dict[str, tuple[str, dict[str, str], dict[str, str]]]:
    """label -> (url, form, headers) of every page that shows a whole text's tokens."""
    play = f"/t/{four[1].slug}/encode"
    compare = "/compare/" + "/".join(ref.slug for ref in four) + "/encode"
    return {
        "playground": (play, {"text": text}, HX),
        "playground, whole page": (play, {"text": text}, {}),
        "playground, ids": (play, {"text": text, "view": "ids"}, HX),
        "scrubber step": (play, {"text": text, "k": "7"}, HX),
        "4-way compare": (compare, {"text": text}, HX),
        "4-way compare, scrubbed": (compare, {"text": text, "k": "10", "by": "count"}, HX),
        "home": ("/encode", {"text": text, "model": four[2].slug}, HX),
    }


def test_a_text_at_the_limit_weighs_at_most_40_bytes_a_byte(client, app, four):
    assert app.config["PLAYGROUND_MAX_BYTES"] == LIMIT
    text = text_of(LIMIT)
    size = len(text.encode())
    for label, (url, form, headers) in pages(four, text).items():
        response = client.post(url, data=form, headers=headers)
        assert response.status_code == 200, (label, response.text[:300])
        assert len(response.data) <= PER_BYTE * size, (label, len(response.data) / size)
        assert "Showing the first" in response.text, label  # cut, and it says so


def test_the_note_counts_what_is_shown(client, four):
    text = text_of(LIMIT)
    form = {"text": text, "view": "ids"}  # one chip per token id
    html = client.post(f"/t/{four[0].slug}/encode", data=form, headers=HX).text
    total = len(four[0].tok.encode(text))
    shown = chips_in(html)
    assert 0 < shown < total
    assert f"Showing the first {shown:,} of {total:,} tokens" in html
    assert f"<dd>{total:,}</dd>" in html  # the counts are the whole text's


@pytest.mark.parametrize("size", [5_000, 2_000])
def test_a_normal_text_is_shown_whole(client, four, size):
    """5 kB in one of these tiny vocabularies is ~3,000 tokens: every page but the 4-way compare
    shows them all; 2 kB shows whole everywhere."""
    text = text_of(size)
    for label, (url, form, headers) in pages(four, text).items():
        if size > 2_000 and "compare" in label:
            continue
        html = client.post(url, data=form, headers=headers).text
        assert "Showing the first" not in html, label
    url = pages(four, text)["4-way compare"][0]
    html = client.post(url, data={"text": text, "view": "ids"}, headers=HX).text
    if size == 2_000:
        assert chips_in(html) == sum(len(ref.tok.encode(text)) for ref in four)
