"""The home page's playground: a text box and a model picker, encoded as you type (htmx posts
to /encode and swaps in the tokens and the counts table), the same form working without
JavaScript, the table's ticked models opening the compare page, and the limits and refusals
of every other playground (webapp/blueprints/home.py, webapp/rendering/model_counts.py,
webapp/storage/model_choices.py)."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import update

import bpe
from bpe.export_tiktoken import rank_file_text
from tests.test_sample import train_queued
from webapp.content.imports import store_upload
from webapp.content.sample import DEMO_TEXT
from webapp.rendering.model_counts import TABLE_LIMIT
from webapp.storage.models import Tokenizer

HX = {"HX-Request": "true"}
TEXT = "the cat sat on the mat; 北京 123 <b>bold</b>\n"
# One table row: the checkbox's slug, then tokens, characters / token, bytes / token.
ROW = re.compile(
    r'<input type="checkbox" name="t" value="([^"]+)".*?<td class="num">([\d,]+).*?</td>\s*'
    r'<td class="num">([^<]+)</td>\s*<td class="num">([^<]+)</td>',
    re.S,
)
_PICKER = re.compile(r'<select id="home-model" name="model"[^>]*>(.*?)</select>', re.S)
_OPTION = re.compile(r'<option value="([^"]+)"( selected)?>')


class OPTION:  # read like the patterns above: OPTION.findall(page)
    @staticmethod
    def findall(page: str) -> list[tuple[str, str]]:
        """The model picker's options, (slug, " selected" or "")."""
        found = _PICKER.search(page)
        assert found, "no model picker on the page"
        return _OPTION.findall(found.group(1))


CHIP = re.compile(r'<span class="tok c\d')


@pytest.fixture
def site_models(app, make_tokenizer, make_owner):
    """The site's reference and one imported model, the visitor's own tokeniser, and two the
    visitor must never be offered: a stranger's, and an old ownerless one trained here."""
    small = bpe.train(TEXT * 10, vocab_size=300, mode="chunked", trainer="reference")
    database = app.extensions["bpe_db"]
    reference = store_upload(
        database,
        bpe.importers.import_bytes(
            rank_file_text(small).encode(), filename="o200k_base.tiktoken", pattern="gpt2"
        ),
        owner_id=None,
    )
    site_import = store_upload(
        database,
        bpe.importers.import_bytes(
            rank_file_text(small).encode(), filename="model.tiktoken", pattern="gpt4"
        ),
        owner_id=None,
    )
    with database.session_scope() as session:
        session.execute(
            update(Tokenizer).where(Tokenizer.id == reference.id).values(reference="GPT-4o")
        )
    own = make_tokenizer(TEXT * 8, vocab_size=290, mode="naive")
    strangers = make_tokenizer(TEXT * 8, vocab_size=295, owner=make_owner())
    legacy = make_tokenizer(TEXT * 8, vocab_size=285, owner=None)
    return {
        "reference": reference.slug,
        "import": site_import.slug,
        "own": own.slug,
        "stranger": strangers.slug,
        "legacy": legacy.slug,
    }


def library(app, slug: str) -> bpe.Tokenizer:
    from webapp.storage import browse
    from webapp.storage.convert import load_tokenizer

    with app.extensions["bpe_db"].read_scope() as session:
        return load_tokenizer(session, browse.get_tokenizer(session, slug))


def table(page: str) -> dict[str, tuple[int, str, str]]:
    return {slug: (int(n.replace(",", "")), cpt, bpt) for slug, n, cpt, bpt in ROW.findall(page)}


def test_the_picker_offers_the_sites_models_and_the_visitors_own_only(
    app, client, site_models, job_runner
):
    client.post("/sample")
    assert train_queued(job_runner) == 2
    page = client.get("/").get_data(as_text=True)
    offered = [slug for slug, _ in OPTION.findall(page)]
    sample = [s for s in offered if s not in site_models.values()]
    assert len(sample) == 2  # the sample's naive and chunked pair
    # References first, then what the site imported, the sample, the visitor's own.
    assert offered == [site_models["reference"], site_models["import"], *sample, site_models["own"]]
    assert site_models["stranger"] not in page and site_models["legacy"] not in page
    assert set(table(page)) == set(offered)  # every model offered is counted
    # With nothing asked, the demonstration text in GPT-4o, as the peers' playgrounds open.
    assert dict(OPTION.findall(page))[site_models["reference"]] == " selected"
    assert html.escape(DEMO_TEXT, quote=False) in page


def test_every_count_is_the_librarys_encode(app, client, site_models):
    text = TEXT * 3 + "naïve café 東京 🎉\n"
    reply = client.post("/encode", data={"text": text, "model": site_models["own"]}, headers=HX)
    assert reply.status_code == 200
    rows = table(reply.get_data(as_text=True))
    assert set(rows) == {site_models[k] for k in ("reference", "import", "own")}
    for slug, (tokens, cpt, bpt) in rows.items():
        ids = library(app, slug).encode(text, allowed_special="all")
        assert tokens == len(ids), slug
        assert cpt == f"{len(text) / len(ids):.2f}"
        assert bpt == f"{len(text.encode()) / len(ids):.2f}"
    # The reference and the import share a vocabulary but not a split pattern: counts differ.
    assert rows[site_models["reference"]][0] != rows[site_models["import"]][0]


def test_the_fragment_is_the_picked_models_tokens_and_the_table(app, client, site_models):
    reply = client.post("/encode", data={"text": TEXT, "model": site_models["own"]}, headers=HX)
    body = reply.get_data(as_text=True)
    assert "<html" not in body and 'class="model-counts"' in body
    ids = library(app, site_models["own"]).encode(TEXT, allowed_special="all")
    shown = len(CHIP.findall(body.split('class="model-counts-form"')[0]))
    # naive mode, "group" rule: a chip per token but where tokens split a character (北京).
    assert 0 < shown <= len(ids)
    assert f"<strong>{len(ids):,}</strong> tokens" in body


def test_without_javascript_the_form_posts_and_gets_the_whole_page(client, site_models):
    page = client.get("/").get_data(as_text=True)
    assert re.search(r'<form id="home-form"[^>]*method="post" action="/encode"', page)
    assert '<button type="submit">Encode</button>' in page
    reply = client.post("/encode", data={"text": TEXT, "model": site_models["import"]})
    body = reply.get_data(as_text=True)
    assert reply.status_code == 200 and "<html" in body and "Upload a corpus" in body
    assert dict(OPTION.findall(body))[site_models["import"]] == " selected"
    assert html.escape(TEXT, quote=False) in body and 'class="model-counts"' in body
    # A link works too: GET / with the text and model in its query.
    linked = client.get("/", query_string={"text": TEXT, "model": site_models["own"]})
    assert dict(OPTION.findall(linked.get_data(as_text=True)))[site_models["own"]] == " selected"


@pytest.mark.parametrize("model", ["nope", "x" * 40, "../../etc", "a" * 300])
def test_a_bad_model_id_is_a_404_page_or_fragment(client, site_models, model):
    page = client.get("/", query_string={"text": "hi", "model": model})
    assert page.status_code == 404 and "There is no tokeniser at this address" in page.text
    fragment = client.post("/encode", data={"text": "hi", "model": model}, headers=HX)
    assert fragment.status_code == 404 and "<html" not in fragment.text
    assert 'class="error fragment-error"' in fragment.text


def test_a_stranger_picks_by_link_but_is_not_offered_others(app, client, site_models):
    """A slug is a key: given one, it encodes (as /t/<slug> does) without listing the rest."""
    reply = client.get("/", query_string={"text": TEXT, "model": site_models["stranger"]})
    assert reply.status_code == 200
    assert dict(OPTION.findall(reply.text))[site_models["stranger"]] == " selected"
    assert site_models["legacy"] not in reply.text


def test_text_over_the_playgrounds_limit_is_refused_with_413(app, client, site_models):
    limit = app.config["PLAYGROUND_MAX_BYTES"]
    too_long = "é" * (limit // 2 + 1)  # characters under the limit, bytes over it
    pair = [site_models["reference"], site_models["own"]]
    for reply in (
        client.post("/encode", data={"text": too_long}, headers=HX),
        client.post("/encode", data={"text": too_long}),
        client.post("/encode/compare", data={"text": too_long, "t": pair}),
    ):
        assert reply.status_code == 413, reply.status_code
        assert f"at most {limit:,} bytes" in reply.text
    at_limit = "a" * limit
    assert client.post("/encode", data={"text": at_limit}, headers=HX).status_code == 200


def test_hostile_text_and_names_are_escaped(app, client, site_models):
    with app.extensions["bpe_db"].session_scope() as session:
        session.execute(
            update(Tokenizer)
            .where(Tokenizer.slug == site_models["own"])
            .values(name='<img src=x onerror="alert(1)">\u202e')
        )
    hostile = "<script>alert(1)</script> \u202egnp.exe \x07 北"
    for model in ("own", "reference"):
        for headers in (HX, {}):
            body = client.post(
                "/encode", data={"text": hostile, "model": site_models[model]}, headers=headers
            ).text
            assert "<script>alert" not in body and "<img src=x" not in body
            assert "\u202e" not in body and "\x07" not in body
            assert "U+202E" in body  # the override shown as a visible escape, never raw
            assert "&lt;img src" in body  # the name, escaped in the picker and the table
    # A byte-level model cuts 北 (three bytes) into tokens that are not whole characters:
    # with the hex rule they are shown as bytes.
    body = client.post(
        "/encode", data={"text": "北", "model": site_models["own"], "invalid": "hex"}, headers=HX
    ).text
    assert "tok-partial" in body and "E5" in body.upper()


def test_ticking_two_models_opens_their_comparison_on_the_same_text(client, site_models):
    a, b = site_models["reference"], site_models["own"]
    reply = client.post("/encode/compare", data={"text": TEXT, "t": [a, b]})
    assert reply.status_code == 303
    where = urlsplit(reply.headers["Location"])
    assert where.path == f"/compare/{a}/{b}" and parse_qs(where.query)["text"] == [TEXT]
    opened = client.get(reply.headers["Location"])
    assert opened.status_code == 200 and html.escape(TEXT, quote=False) in opened.text


def test_a_long_text_goes_to_the_comparison_as_a_post(client, site_models):
    a, b, c = site_models["reference"], site_models["import"], site_models["own"]
    text = TEXT * 60
    reply = client.post("/encode/compare", data={"text": text, "t": [a, b, c]})
    assert reply.status_code == 307 and reply.headers["Location"] == f"/compare/{a}/{b}/{c}/encode"
    # What a browser does with a 307: the same body posted to the new address.
    opened = client.post(reply.headers["Location"], data={"text": text, "t": [a, b, c]})
    assert opened.status_code == 200 and "<html" in opened.text
    assert html.escape(TEXT, quote=False) in opened.text


@pytest.mark.parametrize("count", [0, 1, 5])
def test_the_comparison_takes_two_to_four(client, site_models, count):
    slugs = list(site_models.values())[:count]
    reply = client.post("/encode/compare", data={"text": TEXT, "t": slugs})
    assert reply.status_code == 400 and "Tick 2 to 4 models" in reply.text


def test_a_ticked_model_that_does_not_exist_is_a_404(client, site_models):
    reply = client.post("/encode/compare", data={"text": TEXT, "t": [site_models["own"], "gone"]})
    assert reply.status_code == 404


def test_the_table_is_bounded(app, client, make_tokenizer, make_corpus):
    corpus = make_corpus(TEXT * 8)
    for n in range(TABLE_LIMIT + 2):
        make_tokenizer(vocab_size=260 + n, corpus=corpus)
    page = client.get("/").text
    assert len(OPTION.findall(page)) == TABLE_LIMIT + 2  # all offered in the picker
    assert len(table(page)) == TABLE_LIMIT
    assert "2 more models not counted here" in page


def test_a_loaded_tokeniser_is_out_of_the_collectors_way(app, make_tokenizer):
    """Every full collection would walk each loaded tokeniser's objects again (100 ms and more
    for GPT-4o, in the middle of a request): storage/convert.py freezes them on load."""
    import gc

    made = make_tokenizer(TEXT * 8, vocab_size=290)
    gc.unfreeze()
    tok = library(app, made.slug)
    tracked = {id(o) for o in gc.get_objects()}  # generations 0-2: what a collection walks
    assert gc.get_freeze_count() > 0
    assert id(tok) not in tracked and id(tok.merges) not in tracked


def test_a_re_encode_keeps_the_ticked_models_ticked(client, site_models):
    """htmx sends the table's ticked boxes with every encode: the redrawn table keeps them."""
    a, b = site_models["reference"], site_models["own"]
    body = client.post("/encode", data={"text": TEXT, "t": [a]}, headers=HX).text
    assert re.search(rf'value="{a}" checked', body)
    assert f'value="{b}" aria-label' in body  # not ticked
