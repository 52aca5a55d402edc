"""The home page's first request after a restart does not wait for every model: the counts
table counts what the process has loaded (or can load within HOME_LOAD_SECONDS), shows the
rest as loading while the background loader (webapp/storage/warming.py) loads them, and asks
again until every count is in (webapp/rendering/model_counts.py)."""

from __future__ import annotations

import re
import time

import pytest

from tests.test_library import LOREM

HX = {"HX-Request": "true"}
TEXT = "Quisquam quaerat numquam, amet 42."
COUNT = re.compile(
    r'name="t" value="([^"]+)".*?<td class="num">([^<]*(?:<span[^>]*>[^<]*</span>)?)', re.S
)


@pytest.fixture
def app_config(app_config):
    app_config["HOME_LOAD_SECONDS"] = 0.0  # load nothing for the table inside a request
    return app_config


@pytest.fixture
def three(make_corpus, make_tokenizer):
    corpus = make_corpus(LOREM, name="lorem")
    return [
        make_tokenizer(LOREM, mode=mode, vocab_size=280, corpus=corpus)
        for mode in ("naive", "chunked", "words")
    ]


def table(html: str) -> dict[str, str]:
    """slug -> what the tokens cell says."""
    return dict(COUNT.findall(html))


def test_the_first_request_counts_the_picked_model_and_loads_the_rest_behind(client, three):
    picked = three[0]
    html = client.post("/encode", data={"text": TEXT, "model": picked.slug}, headers=HX).text
    cells = table(html)
    assert cells[picked.slug] == str(len(picked.tok.encode(TEXT)))
    waiting = [ref for ref in three[1:] if "loading…" in cells[ref.slug]]
    assert waiting, cells  # nothing but the picked model was loaded for the table
    assert f"{len(waiting)} model" in html and "still loading" in html
    assert 'hx-trigger="load delay:1500ms"' in html  # the table asks again
    assert "fewest-mark" not in html  # not while a count is missing

    deadline = time.monotonic() + 30
    while "still loading" in html:  # as the page's own polling does
        assert time.monotonic() < deadline, "the background loader never loaded them"
        time.sleep(0.2)
        html = client.post("/encode", data={"text": TEXT, "model": picked.slug}, headers=HX).text
    cells = table(html)
    for ref in three:
        assert cells[ref.slug].split(" ")[0] == str(len(ref.tok.encode(TEXT))), ref.mode
    assert 'hx-trigger="load delay:1500ms"' not in html
    assert "fewest-mark" in html


def test_within_the_time_allowed_every_model_loads_in_the_request(app, client, three):
    app.config["HOME_LOAD_SECONDS"] = 30.0
    html = client.post("/encode", data={"text": TEXT, "model": three[0].slug}, headers=HX).text
    assert "loading…" not in html and "still loading" not in html
    assert all(table(html)[ref.slug].split(" ")[0].isdigit() for ref in three)
