"""The tokeniser pages: header, playground, shares, merges, vocabulary, token detail, downloads.

Every list is checked twice, as a full page (no JavaScript) and as the htmx fragment.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import datetime

import pytest

import bpe
from bpe.formats import loads
from webapp.storage.models import Tokenizer

HX = {"HX-Request": "true"}


@pytest.fixture
def tok_ref(make_tokenizer):
    return make_tokenizer(vocab_size=320, special_tokens=["<|end|>"])


def page(client, url, **kwargs):
    response = client.get(url, **kwargs)
    return response, response.get_data(as_text=True)


def test_header_shows_how_the_tokeniser_was_made(client, tok_ref):
    response, html = page(client, f"/t/{tok_ref.slug}")
    assert response.status_code == 200
    assert "<html" in html
    for fact in ("chunked", "reference", "gpt4", "320", "bytes/token", "sample", "training time"):
        assert fact in html
    # compression on its corpus: corpus bytes / final token count, as the header says
    assert re.search(r"\d+\.\d\d bytes/token", html)
    assert "&lt;|end|&gt;" in html  # the special token, escaped
    for fmt in ("json", "hf", "tiktoken"):
        assert f"/t/{tok_ref.slug}/download/{fmt}" in html


@pytest.mark.parametrize("slug", ["A" * 22, "nope", "x" * 300, "%3Cscript%3E"])
def test_unknown_slug_is_a_404_on_every_page(client, slug):
    for suffix in ("", "/merges", "/vocab", "/token/1", "/download/json", "/s/" + "B" * 22):
        response = client.get(f"/t/{slug}{suffix}")
        assert response.status_code == 404, suffix
        assert "no tokeniser at this address" in response.get_data(as_text=True)


def test_a_deleted_tokeniser_answers_like_a_missing_one(app, client, tok_ref):
    with app.extensions["bpe_db"].session_scope() as session:
        session.get(Tokenizer, tok_ref.id).deleted_at = datetime(2025, 1, 1)
    assert client.get(f"/t/{tok_ref.slug}").status_code == 404
    assert client.get(f"/t/{tok_ref.slug}/vocab").status_code == 404


# ----- playground ---------------------------------------------------------------------------------
def test_playground_encodes_a_posted_form_into_a_full_page(client, tok_ref):
    text = "The quick fox"
    response = client.post(f"/t/{tok_ref.slug}/encode", data={"text": text})
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "<html" in html
    ids = tok_ref.tok.encode(text)
    assert html.count('role="listitem"') == len(ids)
    assert f"<dd>{len(ids)}</dd><dt>" not in html  # counts are dd then dt in source order
    assert f"<div><dt>tokens</dt><dd>{len(ids)}</dd></div>" in html
    assert "<div><dt>bytes</dt><dd>13</dd></div>" in html
    assert "The quick fox</textarea>" in html  # the text comes back into the form


def test_playground_fragment_for_htmx(client, tok_ref):
    response = client.post(f"/t/{tok_ref.slug}/encode", data={"text": "hello"}, headers=HX)
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "<html" not in html and "<textarea" not in html
    assert 'class="tokens"' in html
    assert "HX-Request" in response.headers["Vary"]


def test_fragments_skip_the_headers_lookups_and_draw_the_same(app, client, tok_ref):
    """A fragment redraws a part below the header, so it asks nothing the header alone needs:
    the sample pair's lookup (by the sample's SHA-256) and the "compare with…" choices."""
    from sqlalchemy import event

    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    def asked(url: str, headers: dict[str, str]) -> tuple[int, str]:
        statements.clear()
        event.listen(app.extensions["bpe_db"].engine, "before_cursor_execute", record)
        try:
            response = client.get(url, headers=headers)
        finally:
            event.remove(app.extensions["bpe_db"].engine, "before_cursor_execute", record)
        assert response.status_code == 200, url
        return len(statements), response.get_data(as_text=True)

    slug = tok_ref.slug
    for url, fragment_class in (
        (f"/t/{slug}/encode?text=hello+there", 'class="tokens"'),
        (f"/t/{slug}/merges", "<table"),
        (f"/t/{slug}/vocab", "<table"),
    ):
        page_queries, page_html = asked(url, {})
        assert any("corpora.sha256 =" in s for s in statements), url  # the header's lookup
        fragment_queries, fragment_html = asked(url, HX)
        assert not any("corpora.sha256 =" in s for s in statements), url  # no sample lookup
        assert fragment_queries < page_queries, (url, fragment_queries, page_queries)
        assert fragment_class in fragment_html and "<html" not in fragment_html
        assert fragment_html.strip() in page_html, url  # the page draws the same part


def test_playground_live_typing_is_wired_with_htmx(client, tok_ref):
    _, html = page(client, f"/t/{tok_ref.slug}")
    assert 'hx-trigger="input changed delay:300ms"' in html
    assert f'action="/t/{tok_ref.slug}/encode"' in html and 'method="post"' in html


def test_ids_view_and_display_options(client, tok_ref):
    text = "hello world\n"
    ids = tok_ref.tok.encode(text)
    response = client.post(
        f"/t/{tok_ref.slug}/encode",
        data={"text": text, "view": "ids", "ws": ["1", "0"]},
        headers=HX,
    )
    html = response.get_data(as_text=True)
    assert "tokens-ids" in html
    assert ", ".join(map(str, ids)) in html
    text_view = client.post(
        f"/t/{tok_ref.slug}/encode", data={"text": text, "ws": ["1", "0"]}, headers=HX
    ).get_data(as_text=True)
    assert "pc-space" in text_view and "pc-newline" in text_view
    plain = client.post(
        f"/t/{tok_ref.slug}/encode", data={"text": text, "ws": "0"}, headers=HX
    ).get_data(as_text=True)
    assert "pc-space" not in plain


def test_partial_utf8_rules_in_the_playground(make_tokenizer, client):
    # Naive mode on text with few multi-byte characters leaves them split across byte tokens.
    ref = make_tokenizer("ab " * 50 + "é", mode="naive", vocab_size=258)
    url = f"/t/{ref.slug}/encode"
    grouped = client.post(url, data={"text": "é", "invalid": "group"}, headers=HX)
    assert "tok-group" in grouped.get_data(as_text=True)
    assert ">é<" in grouped.get_data(as_text=True)
    hexed = client.post(url, data={"text": "é", "invalid": "hex"}, headers=HX)
    assert ">C3<" in hexed.get_data(as_text=True) and ">A9<" in hexed.get_data(as_text=True)
    replaced = client.post(url, data={"text": "é", "invalid": "replace"}, headers=HX)
    assert replaced.get_data(as_text=True).count("pc-replacement") == 2


def test_oversize_playground_text_is_a_413_that_says_the_limit(app, client, tok_ref):
    app.config["PLAYGROUND_MAX_BYTES"] = 100
    for url in (f"/t/{tok_ref.slug}/encode", f"/t/{tok_ref.slug}/share"):
        response = client.post(url, data={"text": "x" * 101})
        assert response.status_code == 413
        assert "at most 100 bytes" in response.get_data(as_text=True)
    fragment = client.post(f"/t/{tok_ref.slug}/encode", data={"text": "é" * 51}, headers=HX)
    assert fragment.status_code == 413


def test_share_link_stores_text_and_view_server_side(client, tok_ref):
    text = "shared <text>\u202e " + "long " * 2000  # no URL-length limit: it is stored
    form = {"text": text, "view": "ids", "ws": ["1", "0"], "invalid": "hex"}
    response = client.post(f"/t/{tok_ref.slug}/share", data=form)
    assert response.status_code == 303
    link = response.headers["Location"]
    assert re.fullmatch(rf"http://localhost/t/{tok_ref.slug}/s/[A-Za-z0-9_-]{{22}}", link)
    again = client.post(f"/t/{tok_ref.slug}/share", data=form)
    assert again.headers["Location"] == link  # the same state reuses its row
    shown = client.get(link).get_data(as_text=True)
    assert "shared &lt;text&gt;&#x202E; long" in shown  # back in the textarea, nothing raw
    assert 'value="ids" checked' in shown and 'value="hex" checked' in shown
    assert "tokens-ids" in shown
    fragment = client.post(f"/t/{tok_ref.slug}/share", data=form, headers=HX)
    assert link in fragment.get_data(as_text=True) and "<html" not in fragment.get_data(
        as_text=True
    )


def test_unknown_share_is_a_404(client, tok_ref, make_tokenizer):
    assert client.get(f"/t/{tok_ref.slug}/s/{'C' * 22}").status_code == 404
    # a share belongs to its tokeniser: another tokeniser's slug does not open it
    link = client.post(f"/t/{tok_ref.slug}/share", data={"text": "hi"}).headers["Location"]
    other = make_tokenizer("other text entirely " * 5, vocab_size=260)
    share_slug = link.rsplit("/", 1)[1]
    assert client.get(f"/t/{other.slug}/s/{share_slug}").status_code == 404


def test_special_tokens_can_be_recognised_or_not(client, tok_ref):
    url = f"/t/{tok_ref.slug}/encode"
    on = client.post(url, data={"text": "a<|end|>", "specials": ["1", "0"]}, headers=HX)
    assert "tok-special" in on.get_data(as_text=True)
    off = client.post(url, data={"text": "a<|end|>", "specials": "0"}, headers=HX)
    assert "tok-special" not in off.get_data(as_text=True)


# ----- merges -------------------------------------------------------------------------------------
def test_merges_page_lists_rank_parts_token_and_count(client, tok_ref):
    response, html = page(client, f"/t/{tok_ref.slug}/merges")
    assert response.status_code == 200 and "<html" in html
    first = tok_ref.tok.merges[0]
    count = tok_ref.tok.training.merge_counts[0]
    assert f"/t/{tok_ref.slug}/token/{first[2]}" in html
    assert f'<td class="num">{count:,}</td>' in html
    assert "page 1 of 2" in html and "63 matches" in html


def test_merges_fragment_pages_with_htmx(client, tok_ref):
    response, html = page(client, f"/t/{tok_ref.slug}/merges?page=2", headers=HX)
    assert response.status_code == 200 and "<html" not in html
    assert "page 2 of 2" in html and 'hx-target="#merge-results"' in html
    assert '<td class="num">50</td>' in html  # ranks 50.. on page 2


def test_merges_search_by_text_hex_and_id(client, tok_ref):
    tok = tok_ref.tok
    new_id = next(n for _, _, n in tok.merges if tok.token_bytes(n) == b" the")
    _, html = page(client, f"/t/{tok_ref.slug}/merges?q=+the", headers=HX)
    assert f'/token/{new_id}"' in html
    _, by_hex = page(client, f"/t/{tok_ref.slug}/merges?q=20+74+68+65&match=hex", headers=HX)
    assert f'/token/{new_id}"' in by_hex
    _, by_id = page(client, f"/t/{tok_ref.slug}/merges?q={new_id}&match=id", headers=HX)
    assert f'/token/{new_id}"' in by_id
    _, none = page(client, f"/t/{tok_ref.slug}/merges?q=zzzzqqq", headers=HX)
    assert "No merge matches" in none


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("page=0", "page must be between 1 and 10000000, not 0."),
        ("page=abc", "page must be a whole number, not"),
        ("per_page=100000", "per_page must be between 1 and"),
        ("match=regex&q=x", "match must be one of text, hex, id."),
        ("q=zz&match=hex", "is not hex bytes: give pairs of hex digits"),
        ("q=abc&match=id", "is not a token id."),
    ],
)
def test_bad_merge_queries_are_400_with_a_message(client, tok_ref, query, message):
    response = client.get(f"/t/{tok_ref.slug}/merges?{query}")
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)


# ----- vocabulary ---------------------------------------------------------------------------------
def test_vocab_page_and_fragment(client, tok_ref):
    response, html = page(client, f"/t/{tok_ref.slug}/vocab?kind=all")
    assert response.status_code == 200 and "<html" in html
    assert "U+0000" in html  # byte 0 is a visible escape
    assert "page 1 of 7" in html and "320 matches" in html
    response, fragment = page(client, f"/t/{tok_ref.slug}/vocab?kind=all&page=7", headers=HX)
    assert response.status_code == 200 and "<html" not in fragment
    assert "&lt;|end|&gt;" in fragment and "special" in fragment


def test_vocab_search_filters_and_sorts(client, tok_ref):
    tok = tok_ref.tok
    url = f"/t/{tok_ref.slug}/vocab?kind=all&"
    _, html = page(client, url + "q=he", headers=HX)
    expected = sum(1 for i in range(tok.vocab_size) if b"he" in tok.token_bytes(i))
    assert f"{expected} matches" in html
    _, by_hex = page(client, url + "q=0x6865&match=hex", headers=HX)
    assert f"{expected} matches" in by_hex
    _, digits = page(client, url + "category=digits", headers=HX)
    assert "<td>letters</td>" not in digits and "<td>digits</td>" in digits
    _, long = page(client, url + "min_len=4&max_len=4", headers=HX)
    four = sum(1 for i in range(tok.vocab_size) if len(tok.token_bytes(i)) == 4)
    assert f"{four} match" in long
    _, by_count = page(client, url + "sort=-count&per_page=25", headers=HX)
    top = max(range(len(tok.merges)), key=lambda r: (tok.training.merge_counts[r], -r))
    first_row = by_count.split("<tbody>")[1].split("</tr>")[0]
    assert f'/token/{tok.base_size + top}"' in first_row
    _, longest = page(client, url + "sort=-length", headers=HX)
    longest_len = max(len(tok.token_bytes(i)) for i in range(tok.vocab_size))
    assert f'<td class="num">{longest_len}</td>' in longest.split("</tr>")[1]


@pytest.mark.parametrize(
    "query", ["category=nouns", "sort=random", "min_len=-1", "max_len=x", "per_page=0"]
)
def test_bad_vocab_queries_are_400(client, tok_ref, query):
    response = client.get(f"/t/{tok_ref.slug}/vocab?{query}")
    assert response.status_code == 400


def test_vocab_search_holds_like_wildcards_literally(client, tok_ref):
    _, html = page(client, f"/t/{tok_ref.slug}/vocab?kind=all&q=%25", headers=HX)
    assert "1 match" in html  # only the byte '%' itself, not every token


# ----- token detail -------------------------------------------------------------------------------
def test_token_detail_shows_the_merge_tree_with_ranks_and_counts(client, tok_ref):
    tok = tok_ref.tok
    token_id = next(n for _, _, n in tok.merges if tok.token_bytes(n) == b" the")
    response, html = page(client, f"/t/{tok_ref.slug}/token/{token_id}")
    assert response.status_code == 200
    rank = token_id - 256
    assert f"rank {rank} · count {tok.training.merge_counts[rank]:,}" in html
    assert html.count("base byte · id") == 4  # the four bytes of " the" are the leaves
    assert "20 74 68 65" in html


def test_token_detail_of_a_base_byte_and_a_special(client, tok_ref):
    _, html = page(client, f"/t/{tok_ref.slug}/token/0")
    assert "no merge tree" in html and "U+0000" in html
    special = tok_ref.tok.special_tokens["<|end|>"]
    _, html = page(client, f"/t/{tok_ref.slug}/token/{special}")
    assert "special token" in html


@pytest.mark.parametrize("token_id", ["320", "99999999", "-1", "abc", "1.5"])
def test_bad_token_ids_are_404_with_the_valid_range(client, tok_ref, token_id):
    response = client.get(f"/t/{tok_ref.slug}/token/{token_id}")
    assert response.status_code == 404
    html = response.get_data(as_text=True)
    assert "0 to 319" in html or "whole numbers" in html


def test_deep_merge_chains_are_cut_and_linked(make_tokenizer, client):
    ref = make_tokenizer("a" * 3000, mode="naive", vocab_size=256 + 30)
    last = 256 + len(ref.tok.merges) - 1
    response, html = page(client, f"/t/{ref.slug}/token/{last}")
    assert response.status_code == 200
    assert "open its tree" in html


# ----- words mode ---------------------------------------------------------------------------------
def test_words_mode_end_of_word_marker(make_tokenizer, client):
    ref = make_tokenizer("low lower lowest low low " * 4, mode="words", vocab_size=40)
    html = client.post(f"/t/{ref.slug}/encode", data={"text": "low"}, headers=HX).get_data(
        as_text=True
    )
    assert 'class="pc pc-eow" title="end of word">&lt;/w&gt;</span>' in html
    _, vocab = page(client, f"/t/{ref.slug}/vocab?kind=all")
    assert "pc-eow" in vocab and "base character" in vocab
    _, merges = page(client, f"/t/{ref.slug}/merges")
    assert "pc-eow" in merges


# ----- downloads ----------------------------------------------------------------------------------
def test_download_own_json_round_trips(client, tok_ref):
    response = client.get(f"/t/{tok_ref.slug}/download/json")
    assert response.status_code == 200
    assert "attachment" in response.headers["Content-Disposition"]
    tok = loads(response.data)
    assert tok.merges == tok_ref.tok.merges
    assert tok.special_tokens == tok_ref.tok.special_tokens


def test_download_hf_and_tiktoken(client, tok_ref):
    hf = client.get(f"/t/{tok_ref.slug}/download/hf")
    assert hf.status_code == 200 and json.loads(hf.data)["model"]["type"] == "BPE"
    tt = client.get(f"/t/{tok_ref.slug}/download/tiktoken")
    assert tt.status_code == 200 and tt.mimetype == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(tt.data)).namelist()
    assert any(n.endswith(".tiktoken") for n in names)
    assert any(n.endswith(".tiktoken.json") for n in names)


def test_byte_level_formats_refuse_words_mode_with_a_reason(make_tokenizer, client):
    ref = make_tokenizer("low lower lowest " * 4, mode="words", vocab_size=30)
    for fmt in ("hf", "tiktoken"):
        response = client.get(f"/t/{ref.slug}/download/{fmt}")
        assert response.status_code == 422
        assert "byte-level" in response.get_data(as_text=True)
    assert client.get(f"/t/{ref.slug}/download/json").status_code == 200


def test_unknown_download_format_is_a_404(client, tok_ref):
    response = client.get(f"/t/{tok_ref.slug}/download/pickle")
    assert response.status_code == 404
    assert "json, hf, tiktoken" in response.get_data(as_text=True)


def test_lists_work_without_javascript(client, tok_ref):
    for suffix in ("/merges", "/vocab"):
        _, html = page(client, f"/t/{tok_ref.slug}{suffix}")
        assert f'method="get" action="/t/{tok_ref.slug}{suffix}"' in html
        assert 'rel="next"' in html and f'href="/t/{tok_ref.slug}{suffix}?page=2"' in html


def test_the_tokenizer_trained_here_matches_the_page(tok_ref):
    # The fixture's tokeniser is the library object the pages rebuild from rows.
    assert isinstance(tok_ref.tok, bpe.Tokenizer) and tok_ref.tok.vocab_size == 320


def test_htmx_refusals_come_back_as_fragments(app, client, tok_ref):
    # htmx swaps 4xx answers into the results (layout.html), so they must be fragments.
    response, html = page(client, f"/t/{tok_ref.slug}/vocab?q=zz&match=hex", headers=HX)
    assert response.status_code == 400
    assert "<html" not in html and 'role="alert"' in html and "not hex bytes" in html
    app.config["PLAYGROUND_MAX_BYTES"] = 10
    response = client.post(f"/t/{tok_ref.slug}/encode", data={"text": "x" * 11}, headers=HX)
    assert response.status_code == 413 and "<html" not in response.get_data(as_text=True)
    full = client.get(f"/t/{tok_ref.slug}/vocab?q=zz&match=hex")
    assert full.status_code == 400 and "<html" in full.get_data(as_text=True)


@pytest.mark.parametrize("ws", ["0", "1"])
def test_a_newline_token_is_marked_and_the_line_breaks_after_it(client, tok_ref, ws):
    # A newline used to be a raw line break inside its token's box: an empty sliver at the
    # start of the next line. Now it is a ↵ in the token, and the line breaks after the box.
    text = "fox\n\ndog"
    response = client.post(f"/t/{tok_ref.slug}/encode", data={"text": text, "ws": ws}, headers=HX)
    html = response.get_data(as_text=True)
    stream = html[html.index('<div class="tokens"') :]
    assert "\n" not in stream.split("</div>")[0]  # no raw newline inside the token stream
    assert stream.count('<span class="pc pc-newline">↵</span>') == 2
    assert stream.count("<br>") == 2
    assert re.search(r"↵</span>(↵</span>)?</span>(<br>){1,2}<wbr>", stream)


def test_a_repeated_part_of_a_merge_tree_is_opened_once(make_tokenizer, client):
    # 32 spaces are built as 16 + 16, 8 + 8, ...: the full tree has 63 nodes, 6 distinct tokens.
    ref = make_tokenizer(" " * 64 + "x", mode="naive", vocab_size=256 + 5)
    tok = ref.tok
    top = next(n for _, _, n in tok.merges if tok.token_bytes(n) == b" " * 32)
    _, html = page(client, f"/t/{ref.slug}/token/{top}")
    tree = html[html.index('<ul class="tree">') : html.index("</section>", html.index("tree"))]
    assert tree.count("<li") == 11  # the top, then per level one opened part and one repeat
    assert tree.count("built as shown above") == 4  # 16, 8, 4 and 2 spaces
    assert tree.count("base byte · id 32") == 2


def test_merges_that_use_a_token_show_the_tokens(client, tok_ref):
    tok = tok_ref.tok
    token_id = next(n for _, _, n in tok.merges if tok.token_bytes(n) == b" t")
    _, html = page(client, f"/t/{tok_ref.slug}/token/{token_id}")
    used = html[html.index('id="used-title"') :]
    rank = token_id - 256
    assert f"Made by the merge of rank {rank}." in used
    later = sum(token_id in (a, b) for a, b, _ in tok.merges)
    assert f"A part of {later} later merge{'s' if later != 1 else ''}." in used
    assert used.count("<tr>") == 2 + later  # the header, the making merge and every use
    assert 'class="merge-parts"><a class="tok' in used


def test_vocab_page_starts_on_the_learned_tokens(client, tok_ref):
    tok = tok_ref.tok
    _, html = page(client, f"/t/{tok_ref.slug}/vocab")
    learned = len(tok.merges)
    assert f"{learned} matches" in html and "U+0000" not in html
    first_row = html.split("<tbody>")[1].split("</tr>")[0]
    assert f'/token/{tok.base_size}"' in first_row  # the first merge, not byte 0
    _, base = page(client, f"/t/{tok_ref.slug}/vocab?kind=base", headers=HX)
    assert "256 matches" in base and "U+0000" in base
    _, special = page(client, f"/t/{tok_ref.slug}/vocab?kind=special", headers=HX)
    assert "1 match" in special and "&lt;|end|&gt;" in special
    # The API keeps its documented default: every token.
    assert client.get(f"/api/t/{tok_ref.slug}/vocab").get_json()["total"] == tok.vocab_size


def test_control_bytes_and_lone_high_bytes_are_categorised(client, tok_ref):
    _, html = page(client, f"/t/{tok_ref.slug}/vocab?kind=base&category=control&per_page=200")
    assert "24 matches" in html  # 0x00-0x08, 0x0E-0x1B and 0x7F (0x09-0x0D, 0x1C-0x1F are spaces)
    _, partial = page(client, f"/t/{tok_ref.slug}/vocab?kind=base&q=0x80&match=hex", headers=HX)
    row = partial.split("<tbody>")[1].split("</tr>")[0]
    assert "<td>partial-utf8</td>" in row
    assert '<td class="num">1</td>\n      <td class="num">–</td>' in row  # 1 byte, no character


def test_list_urls_drop_empty_fields(client, tok_ref):
    url = f"/t/{tok_ref.slug}/vocab"
    noisy = client.get(url + "?q=&match=text&category=&min_len=&max_len=&sort=id&ws=1&ws=0")
    assert noisy.status_code == 302 and noisy.headers["Location"] == url
    empty = client.get(url + "?q=a&category=&min_len=")
    assert empty.status_code == 302 and empty.headers["Location"] == url + "?q=a&match=text"
    fragment = client.get(url + "?q=th&category=&min_len=&ws=1&ws=0", headers=HX)
    assert fragment.status_code == 200
    assert fragment.headers["HX-Push-Url"] == url + "?q=th&match=text"
    merges = client.get(f"/t/{tok_ref.slug}/merges?q=&ws=0", headers=HX)
    assert merges.headers["HX-Push-Url"] == f"/t/{tok_ref.slug}/merges?ws=0"


@pytest.mark.parametrize("tab", ["merges", "vocab"])
def test_a_page_past_the_last_is_404_naming_the_last(client, make_tokenizer, tab):
    tok = make_tokenizer(vocab_size=300)
    last = client.get(f"/t/{tok.slug}/{tab}?per_page=10")
    pages = int(re.search(r"page 1 of (\d+)", last.text).group(1))
    assert client.get(f"/t/{tok.slug}/{tab}?per_page=10&page={pages}").status_code == 200
    past = client.get(f"/t/{tok.slug}/{tab}?per_page=10&page={pages + 1}")
    assert past.status_code == 404
    assert f"There is no page {pages + 1} here: the list has {pages} pages." in past.text
