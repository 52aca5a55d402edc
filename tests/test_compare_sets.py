"""The compare page for two to four tokenisers: the set's addresses, adding and removing one,
the shared text with counts and the cheapest marked, the boundary diff (naive vs chunked,
docs/algorithms.md "Chunked training"), and the scrubber that moves every row. Flask test client."""

from __future__ import annotations

import re
from itertools import accumulate

import pytest

from tests.test_library import LOREM
from webapp.rendering.comparison import crosses_chunk_boundary

HX = {"HX-Request": "true"}
TEXT = "that cat sat at the mat; it is not what it was. " * 4


@pytest.fixture
def three(make_corpus, make_tokenizer):
    corpus = make_corpus(TEXT, name="cats")
    return [
        make_tokenizer(TEXT, mode="naive", vocab_size=280, corpus=corpus),
        make_tokenizer(TEXT, mode="chunked", vocab_size=280, corpus=corpus),
        make_tokenizer(TEXT, mode="words", vocab_size=60, corpus=corpus),
    ]


def url(refs, suffix=""):
    return "/compare/" + "/".join(r.slug for r in refs) + suffix


def rows(html: str) -> dict[str, str]:
    """letter -> the HTML of that tokeniser's row of the shared text."""
    parts = re.split(r'<div class="compare-row encoded-([a-d])', html)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def chips(row_html: str) -> list[tuple[str, str]]:
    """(class attribute, tooltip) of each token of a row's stream."""
    stream = row_html[row_html.index('class="tokens') :]
    return re.findall(
        r'<span class="(tok [^"]*)" tabindex="-1" role="listitem" data-tip="([^"]*)"', stream
    )


def cuts(tok, text: str) -> set[int]:
    """Inner boundaries (byte offsets) of a byte-level tokeniser's encoding, computed here."""
    ends = list(accumulate(len(tok.token_bytes(i)) for i in tok.encode(text)))
    return set(ends[:-1])


# ----- the set's addresses ----------------------------------------------------------------------
def test_three_tokenisers_side_by_side(client, three):
    response = client.get(url(three))
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    for letter in "ABC":
        assert f'<span class="side side-{letter.lower()}">{letter}</span>' in html
    svg = html[html.index('<svg class="curve-plot"') : html.index("</svg>")]
    assert svg.count("<polyline") == 3
    assert set(re.findall(r'data-side="([a-d])"', html)) == {"a", "b", "c"}
    assert len(rows(html)) == 3
    assert "in all 3" in html and "only in C" in html
    # every member can be removed (leaving two), and a fourth can be added
    for i in range(3):
        rest = [r for j, r in enumerate(three) if j != i]
        assert f'href="{url(rest)}"' in html
    assert f'action="{url(three, "/add")}"' in html


def test_the_old_two_way_address_still_works(client, three):
    response = client.get(url(three[:2]))
    assert response.status_code == 200
    assert "remove</a>" not in response.text  # two is the least a comparison shows
    assert "compresses\n  cats better" in response.text


def test_four_is_the_most(client, three, make_tokenizer):
    four = [*three, make_tokenizer("Quisquam quaerat dolor. " * 10, mode="chunked", vocab_size=270)]
    response = client.get(url(four))
    assert response.status_code == 200 and "Four is the most" in response.text
    assert client.get(url(four, "/add?t=" + three[0].slug)).status_code == 404
    assert client.get(url([*four, three[0]])).status_code == 404


def test_add_by_pick_or_pasted_link(client, three):
    response = client.get(url(three[:2], f"/add?t={three[2].slug}"))
    assert response.status_code == 303 and response.headers["Location"].endswith(url(three))
    pasted = f"https://example.org/t/{three[2].slug}/vocab?page=2"
    response = client.get(url(three[:2], "/add"), query_string={"link": pasted, "t": "x"})
    assert response.status_code == 303 and response.headers["Location"].endswith(url(three))
    for bad in ("nonsense", "", "/t/" + "A" * 22):
        response = client.get(url(three[:2], "/add"), query_string={"link": bad})
        assert response.status_code in (400, 404), bad
        assert "tokeniser" in response.text


def test_the_add_form_offers_any_tokeniser_those_of_the_same_corpus_first(
    client, three, make_tokenizer
):
    other = make_tokenizer("Quisquam quaerat dolor. " * 10, mode="chunked", vocab_size=270)
    html = client.get(url(three[:2])).get_data(as_text=True)
    form = html[
        html.index('class="compare-add"') : html.index("</form>", html.index("compare-add"))
    ]
    offered = re.findall(r'<option value="([^"]+)"', form)
    assert offered == [three[2].slug, other.slug]
    assert three[0].slug not in offered


@pytest.fixture
def reference(app):
    """A small imported tokeniser made one of the site's references, as import-references does."""
    import bpe
    from bpe.export_tiktoken import rank_file_text
    from webapp.content.imports import import_upload
    from webapp.storage.models import Tokenizer

    tok = bpe.train(TEXT * 3, vocab_size=290, mode="chunked", trainer="reference")
    database = app.extensions["bpe_db"]
    raw = rank_file_text(tok).encode()
    row = import_upload(database, raw, filename="tiny.tiktoken", pattern="cl100k")
    with database.session_scope() as session:
        session.get(Tokenizer, row.id).reference = "Tiny-Ref"
    return row.slug


def test_the_add_form_offers_the_references_by_name_to_everyone(client, stranger, three, reference):
    for visitor in (client, stranger):
        html = visitor.get(url(three[:2])).text
        form = html[
            html.index('class="compare-add"') : html.index("</form>", html.index("compare-add"))
        ]
        options = {
            slug: label.strip()
            for slug, label in re.findall(r'<option value="([^"]+)">([^<]*)', form)
        }
        assert re.fullmatch(r"Tiny-Ref · [0-9,]+ tokens · imported", options[reference]), options
        assert "None" not in form
    assert three[2].slug not in stranger.get(url(three[:2])).text  # not someone else's


def test_adding_or_removing_a_tokeniser_keeps_the_typed_text(client, three):
    typed = "keep this\r\nline"
    added = client.get(url(three[:2], "/add"), query_string={"t": three[2].slug, "text": typed})
    assert added.status_code == 303
    page = client.get(added.headers["Location"]).text
    assert ">keep this\nline</textarea>" in page  # the box, and its tokens, as typed
    removed = re.search(r'class="remove-side" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert "text=keep" in removed
    assert ">keep this\nline</textarea>" in client.get(removed).text


# ----- the shared text: counts, cheapest, the diff ------------------------------------------------
def test_every_tokeniser_encodes_the_text_and_the_cheapest_is_marked(client, three):
    text = "that cat sat at the mat"
    html = client.post(url(three, "/encode"), data={"text": text}, headers=HX).text
    found = rows(html)
    counts = {}
    for letter, ref in zip("abc", three, strict=True):
        n = len(ref.tok.encode(text))
        counts[letter] = n
        assert f"<div><dt>tokens</dt><dd>{n}</dd></div>" in found[letter]
        assert f"<div><dt>bytes / token</dt><dd>{len(text) / n:.2f}</dd></div>" in found[letter]
    fewest = min(counts.values())
    for letter, n in counts.items():
        assert ("cheapest</span>" in found[letter]) == (n == fewest), letter


@pytest.mark.parametrize("size", [2, 3])
def test_a_tokeniser_that_loses_characters_is_marked_not_crowned(client, three, size):
    """The words tokeniser never saw 北, 京 or é: its <unk>s make it the shortest, not the best."""
    text = "北京 é 北京 é 北京 é"
    refs = [three[2], *three[:2]][:size]  # the words tokeniser first
    html = client.post(url(refs, "/encode"), data={"text": text}, headers=HX).text
    found = rows(html)
    words = refs[0].tok
    unknown = words.encode(text).count(words.special_tokens["<unk>"])
    assert unknown == 9 and len(words.encode(text)) < min(len(r.tok.encode(text)) for r in refs[1:])
    assert "cheapest</span>" not in found["a"]
    assert f"{unknown} × &lt;unk&gt;: not ranked</span>" in found["a"]
    assert "Not ranked, since it turns characters of this text into" in html
    fewest = min(len(r.tok.encode(text)) for r in refs[1:])
    for letter, ref in zip("bc", refs[1:], strict=False):
        assert ("cheapest</span>" in found[letter]) == (len(ref.tok.encode(text)) == fewest)
    assert "needs" not in html.split('<div class="compare-rows">')[0]  # no A-vs-B crown either


def test_naive_vs_chunked_diff_marks_the_cross_word_tokens(client, make_corpus, make_tokenizer):
    corpus = make_corpus(LOREM, name="lorem")
    naive = make_tokenizer(LOREM, mode="naive", vocab_size=300, corpus=corpus)
    chunked = make_tokenizer(LOREM, mode="chunked", vocab_size=300, corpus=corpus)
    text = LOREM.splitlines()[0]
    html = client.post(url([naive, chunked], "/encode"), data={"text": text}, headers=HX).text
    a, b = cuts(naive.tok, text), cuts(chunked.tok, text)
    summary = re.search(r'data-agreeing="(\d+)" data-differing="(\d+)"', html)
    assert summary and (int(summary[1]), int(summary[2])) == (len(a & b), len(a ^ b))
    assert len(b - a) > 0  # naive glued words to spaces: cuts only the chunked side makes

    found = rows(html)
    naive_chips, chunked_chips = chips(found["a"]), chips(found["b"])
    ids = naive.tok.encode(text)
    assert len(naive_chips) == len(ids)
    start = 0
    crossing = 0
    for token_id, (classes, tip) in zip(ids, naive_chips, strict=True):
        data = naive.tok.token_bytes(token_id)
        inside = {c for c in b - a if start < c < start + len(data)}
        assert ("spans-cut" in classes) == bool(inside), data
        if crosses_chunk_boundary(data):  # e.g. "t " or "m ": across a word's end
            crossing += 1
            assert "spans-cut" in classes and "others make" in tip, data
        start += len(data)
    assert crossing > 0
    # on the chunked side, each cut the naive side lacks starts a token marked with a bar
    assert sum("cut-differs" in classes for classes, _ in chunked_chips) == len(b - a)
    assert f"{len(b - a)} cuts only some make" in found["b"]


# ----- one scrubber for every row --------------------------------------------------------------
def test_scrubber_by_count_and_by_fraction(client, three):
    text = "that cat sat"
    naive, chunked, _ = three
    fragment = client.post(
        url(three, "/encode"), data={"text": text, "k": "0", "by": "count"}, headers=HX
    ).text
    found = rows(fragment)
    for letter in "ab":
        assert f"<div><dt>tokens</dt><dd>{len(text.encode())}</dd></div>" in found[letter]
    assert "no merges: every byte" in found["a"]

    fragment = client.post(
        url(three, "/encode"), data={"text": text, "k": "500", "by": "fraction"}, headers=HX
    ).text
    found = rows(fragment)
    for letter, ref in zip("abc", three, strict=True):
        half = round(len(ref.tok.merges) / 2)
        n = len(ref.tok.encode(text, merge_limit=half))
        assert f"first {half} of {len(ref.tok.merges)} merges" in found[letter]
        assert f"<div><dt>tokens</dt><dd>{n}</dd></div>" in found[letter]

    k = 5
    fragment = client.post(url(three, "/encode"), data={"text": text, "k": str(k)}).text
    expected = len(naive.tok.encode(text, merge_limit=k - 1)) - len(
        naive.tok.encode(text, merge_limit=k)
    )
    assert re.search(
        rf"merge 5 of {len(naive.tok.merges)}:.*?removed <strong>{expected}</strong>",
        fragment,
        re.S,
    )
    assert 'value="5"' in fragment  # the full page keeps the slider where it was


def test_scrubber_refuses_a_k_that_is_not_a_number(client, three):
    response = client.post(url(three, "/encode"), data={"text": "x", "k": "lots"}, headers=HX)
    assert response.status_code == 400 and "k must be a whole number" in response.text
    response = client.post(url(three, "/encode"), data={"text": "x", "k": "-5"}, headers=HX)
    assert response.status_code == 200  # out of range is clamped: 0 merges


def test_side_by_side_merges_past_the_last_page_is_404(client, three):
    pages = int(re.search(r"page 1 of (\d+)", client.get(url(three[:2], "/merges")).text).group(1))
    assert client.get(url(three[:2], f"/merges?page={pages}")).status_code == 200
    assert client.get(url(three[:2], f"/merges?page={pages + 1}")).status_code == 404
