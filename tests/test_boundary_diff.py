"""The compare page's boundary diff counts what it draws: every cut a row's line counts is a
bar on one of its chips (before it, or after it where words mode dropped the whitespace), and
every cut it runs across is counted in that chip's tooltip; cuts inside a character, which the
default view shows as one chip, are said apart; two rows of a set can be compared alone; the
ids view is marked too. Flask test client."""

from __future__ import annotations

import re

import pytest

from tests.test_compare_sets import HX, chips, rows, url

CJK = "北京今天下雨，我们在图书馆读书。东京は日本の首都です。"
TEXT = ("that cat sat at the mat; it is not what it was. " + CJK + "\n") * 6


@pytest.fixture
def four(make_corpus, make_tokenizer):
    corpus = make_corpus(TEXT, name="cats and cities")
    sizes = (("naive", 300), ("chunked", 300), ("words", 120), ("chunked", 270))
    return [make_tokenizer(TEXT, mode=m, vocab_size=v, corpus=corpus) for m, v in sizes]


def said(row_html: str) -> tuple[int, int]:
    line = re.search(
        r"([\d,]+) cuts? only (?:some|one of the two) makes?; runs across ([\d,]+)", row_html
    )
    assert line, row_html[:400]
    return int(line[1].replace(",", "")), int(line[2].replace(",", ""))


def drawn(row_html: str) -> tuple[int, int]:
    """(bars drawn, cuts run across by the chips' own count) in a row's stream."""
    bars = across = 0
    for classes, tip in chips(row_html):
        bars += ("cut-differs" in classes.split()) + ("cut-after-differs" in classes.split())
        found = re.search(r"runs across (\d+) cut", tip)
        across += int(found[1]) if found else 0
    return bars, across


@pytest.mark.parametrize("view", ["text", "ids"])
def test_every_cut_counted_is_drawn(client, four, view):
    text = "the cat  sat at " + CJK + " mat\n"
    html = client.post(url(four[:3], "/encode"), data={"text": text, "view": view}, headers=HX).text
    found = rows(html)
    for letter in "abc":
        assert said(found[letter]) == drawn(found[letter]), letter
        assert said(found[letter])[0] > 0, letter
    if view == "text":  # naive cuts CJK characters into bytes: shown joined, said apart
        hidden = int(re.search(r'data-hidden="(\d+)"', html)[1])
        assert hidden > 0 and "inside characters" in html and "hex bytes" in html
    # words mode drops the whitespace: a cut at a word's end before it is a bar after the word
    assert any("cut-after-differs" in c for c, _ in chips(found["c"]))


def test_hex_bytes_draws_the_cuts_inside_characters(client, four):
    text = CJK
    grouped = client.post(url(four[:2], "/encode"), data={"text": text}, headers=HX).text
    hexed = client.post(
        url(four[:2], "/encode"), data={"text": text, "invalid": "hex"}, headers=HX
    ).text
    inside = int(re.search(r'data-hidden="(\d+)"', grouped)[1])
    assert inside > 0 and 'data-hidden="0"' in hexed
    differing = {
        name: int(re.search(r'data-differing="(\d+)"', page)[1])
        for name, page in (("grouped", grouped), ("hex", hexed))
    }
    assert differing["hex"] == differing["grouped"] + inside
    for page in (grouped, hexed):
        for row in rows(page).values():
            assert said(row) == drawn(row)


def test_two_rows_of_four_are_compared_alone(client, four):
    text = "that cat sat at the mat; " + CJK
    two = client.post(url(four[:2], "/encode"), data={"text": text}, headers=HX).text
    html = client.post(url(four, "/encode"), data={"text": text, "diff": "ab"}, headers=HX).text
    found = rows(html)
    assert "Boundaries of A and B:" in html
    for letter in "ab":  # marked exactly as the A-vs-B page marks them
        assert chips(found[letter]) == chips(rows(two)[letter])
        assert said(found[letter]) == drawn(found[letter])
    for letter in "cd":
        assert "Not marked: the marks compare A and B." in found[letter]
        assert drawn(found[letter]) == (0, 0)
    page = client.get(url(four)).text
    assert '<select name="diff">' in page and '<option value="cd">C vs D</option>' in page
    bad = client.post(url(four, "/encode"), data={"text": text, "diff": "ba"}, headers=HX)
    assert bad.status_code == 400 and "diff must be all or two" in bad.text
    two_way = client.post(url(four[:2], "/encode"), data={"text": text, "diff": "ac"})
    assert two_way.status_code == 400
