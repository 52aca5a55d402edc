"""Imported tokenisers in the web app: the import form and API, `flask import-references`, and
every tokeniser page working with the file's own ids (a real cl100k_base, GPT-4's tokeniser).
"""

from __future__ import annotations

import io
import json
import re
from html import unescape

import pytest

import bpe
from bpe.export_hf import to_hf_json
from bpe.export_tiktoken import rank_file_text
from tests.conftest import TEST_OWNER_TOKEN
from tests.reference_files import reference_dir
from webapp.storage.models import Tokenizer

HX = {"HX-Request": "true"}


def upload(client, url, files: dict[str, tuple[bytes, str]], **form):
    data = {name: (io.BytesIO(raw), filename) for name, (raw, filename) in files.items()}
    # The API takes a multipart body only with a bearer token: a script has no CSRF token.
    headers = {"Authorization": f"Bearer {TEST_OWNER_TOKEN}"} if url.startswith("/api/") else {}
    return client.post(
        url, data={**data, **form}, content_type="multipart/form-data", headers=headers
    )


def imported_slug(client, response) -> str:
    """The slug of what a form import made: the form answers with the import's job page (the
    job ran within the request in the tests' manual execution), which links the tokeniser."""
    assert response.status_code == 303, response.get_data(as_text=True)[:500]
    job_url = response.headers["Location"]
    assert "/imports/" in job_url
    job = client.get("/api" + job_url[job_url.index("/imports/") :]).get_json()
    assert job["status"] == "succeeded", job
    page = client.get(job_url).get_data(as_text=True)
    assert f'href="/t/{job["tokenizer"]["slug"]}"' in page  # the job page links it
    return job["tokenizer"]["slug"]


@pytest.fixture
def small_tok():
    text = "the cat sat on the mat; the cat ate the rat. 123 456 东京 😀\n" * 5
    return bpe.train(
        text, vocab_size=300, mode="chunked", trainer="reference", special_tokens=["<eot>"]
    )


def sidecar(tok: bpe.Tokenizer) -> bytes:
    return json.dumps({"pat_str": tok.pattern, "special_tokens": tok.special_tokens}).encode()


# ----- the real GPT-4 tokeniser, page by page ------------------------------------------------
def test_imported_cl100k_pages_show_the_files_ids(app, client, make_tokenizer):
    directory = reference_dir()
    files = {
        "file": ((directory / "cl100k_base.tiktoken").read_bytes(), "cl100k_base.tiktoken"),
        "sidecar": ((directory / "cl100k_base.tiktoken.json").read_bytes(), "x.json"),
    }
    slug = imported_slug(client, upload(client, "/import", files))
    with app.extensions["bpe_db"].session_scope() as session:
        row = session.query(Tokenizer).filter_by(slug=slug).one()
        assert row.corpus_id is None and row.source_filename == "cl100k_base.tiktoken"
        assert row.source_sha256.startswith("223921b7") and row.id_limit == 100277
        assert row.vocab_size == 100261 and row.merge_count == 100000

    header = client.get(f"/t/{slug}").get_data(as_text=True)
    assert "imported from" in header and "cl100k_base.tiktoken" in header
    assert "223921b7" in header and "lowest rank of the joined bytes" in header
    played = client.post(
        f"/t/{slug}/encode", data={"text": "hello world", "view": "ids"}, headers=HX
    )
    html = played.get_data(as_text=True)
    assert ">15339<" in html and ">1917<" in html  # GPT-4's ids, not 0..255-based ones

    api = client.post(
        f"/api/t/{slug}/encode", json={"text": "hello world<|endoftext|>", "allowed_special": "all"}
    )
    assert api.get_json()["ids"] == [15339, 1917, 100257]
    # <|endofprompt|> lies above vocab_size - 1 (the ids have a hole at 100256): decoded all
    # the same, by the API and the decode box; the hole itself is refused by both.
    decoded = client.post(f"/api/t/{slug}/decode", json={"ids": [15339, 1917, 100276]})
    assert decoded.status_code == 200 and decoded.get_json()["text"] == "hello world<|endofprompt|>"
    assert client.post(f"/api/t/{slug}/decode", json={"ids": [100256]}).status_code == 422
    box = client.get(f"/t/{slug}/decode?ids=15339+1917+100276").get_data(as_text=True)
    assert "hello world&lt;|endofprompt|&gt;" in box
    hole = client.get(f"/t/{slug}/decode?ids=1,100256")
    assert hole.status_code == 422 and "Item 2, id 100,256, is not in this tokeniser" in hole.text

    merges = client.get(f"/t/{slug}/merges?per_page=25", headers=HX).get_data(as_text=True)
    assert f'href="/t/{slug}/token/256"' in merges  # rank 0 makes id 256, "  " in cl100k
    assert "–" in merges  # derived merges have no pair counts

    vocab = client.get(f"/t/{slug}/vocab?match=id&q=15339", headers=HX).get_data(as_text=True)
    assert "hello" in vocab
    first = client.get(f"/t/{slug}/vocab?kind=base&per_page=25", headers=HX).get_data(as_text=True)
    assert re.search(r">0<.*?>!<", first, re.S)  # id 0 is "!", as the rank file says
    learned = client.get(f"/t/{slug}/vocab", headers=HX).get_data(as_text=True)
    assert "of 100,000" in learned or "100,000 matches" in learned  # the multi-byte tokens

    token = client.get(f"/t/{slug}/token/15339").get_data(as_text=True)
    tok = bpe.importers.import_path(directory / "cl100k_base.tiktoken")
    left, right, _ = tok.merges[tok.merge_rank(15339)]
    for part in (left, right):
        assert f"/t/{slug}/token/{part}" in token  # the derived pair, in the merge tree
    assert client.get(f"/t/{slug}/token/100256").status_code == 404  # the hole in the ids
    assert client.get(f"/t/{slug}/token/100257").status_code == 200  # <|endoftext|>
    assert client.get(f"/t/{slug}/token/100277").status_code == 404

    own = make_tokenizer(vocab_size=300)
    compare = client.get(f"/compare/{slug}/{own.slug}")
    assert compare.status_code == 200
    assert "cl100k_base" in compare.get_data(as_text=True)
    encoded = client.post(
        f"/compare/{slug}/{own.slug}/encode", data={"text": "hello world"}, headers=HX
    ).get_data(as_text=True)
    assert "15339" in encoded

    assert client.get(f"/t/{slug}/download/hf").status_code == 422
    assert client.get(f"/t/{slug}/download/tiktoken").status_code == 200
    again = bpe.formats.loads(client.get(f"/t/{slug}/download/json").data)
    assert again.encode("hello world") == [15339, 1917] and again.id_limit == 100277


# ----- the form and the API --------------------------------------------------------------------
def test_api_imports_a_tiktoken_file_with_a_named_pattern(client, small_tok):
    raw = rank_file_text(small_tok).encode()
    response = upload(
        client, "/api/tokenizers/import", {"file": (raw, "small.tiktoken")}, pattern="gpt2"
    )
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert body["format"] == "tiktoken" and body["encode_rule"] == "tiktoken"
    assert body["pattern"] == bpe.patterns.R50K_PAT_STR and body["filename"] == "small.tiktoken"
    ids = client.post(f"/api/t/{body['slug']}/encode", json={"text": "the cat"}).get_json()["ids"]
    assert ids == bpe.importers.import_bytes(raw, filename="s", pattern="gpt2").encode("the cat")


def test_form_imports_a_tokenizer_json(client, small_tok):
    response = upload(
        client, "/import", {"file": (to_hf_json(small_tok).encode(), "tokenizer.json")}
    )
    slug = imported_slug(client, response)
    page = client.get(f"/t/{slug}").get_data(as_text=True)
    assert "HF tokenizer.json" in page and "the file&#39;s merge order" in page
    api = client.post(
        f"/api/t/{slug}/encode", json={"text": "the mat<eot>", "allowed_special": "all"}
    )
    assert api.get_json()["ids"] == small_tok.encode("the mat<eot>", allowed_special="all")
    assert "tokenizer.json" in client.get("/").get_data(as_text=True)  # listed as recent


@pytest.mark.parametrize(
    ("files", "form", "status", "message"),
    [
        ({}, {}, 400, "Choose a tokeniser file"),
        ({"file": (b"IQ== 0\n", "r.tiktoken")}, {"pattern": "gpt2"}, 422, "lacks 255 of the 256"),
        (
            {"file": (b"not base64 at all\n", "r.tiktoken")},
            {},
            422,
            "expected &#39;base64-token rank&#39;",
        ),
        (
            {"file": (b'{"model": {"type": "Unigram"}}', "t.json")},
            {},
            422,
            "a Unigram model is not supported",
        ),
        ({"file": (b"", "r.tiktoken")}, {}, 400, "is empty"),
        ({"file": (b"x" * 2048, "big.tiktoken")}, {}, 413, "larger than the limit"),
    ],
)
def test_refused_imports_say_why(app, client, files, form, status, message):
    app.config["MAX_IMPORT_BYTES"] = 1024
    response = upload(client, "/import", files, **form)
    if status == 422:
        # Only reading the file tells: the job ends failed, its page says why.
        assert response.status_code == 303
        job = client.get(response.headers["Location"]).get_data(as_text=True)
        assert 'data-status="failed"' in job
        assert unescape(message) in unescape(job)
    else:
        assert response.status_code == status
        assert message in response.get_data(as_text=True)
    api = upload(client, "/api/tokenizers/import", files, **form)
    assert api.status_code == status and api.get_json()["status"] == status


def test_the_form_sits_next_to_the_upload_form(client):
    html = client.get("/").get_data(as_text=True)
    assert html.index("Upload a corpus") < html.index("Import a tokeniser")
    assert 'action="/import"' in html and 'name="sidecar"' in html


# ----- the site's references ----------------------------------------------------------------------
@pytest.fixture
def fake_reference_dir(tmp_path, small_tok):
    # Small stand-ins under the reference script's names: the command's logic, quickly.
    for name in ("gpt2", "cl100k_base", "o200k_base"):
        (tmp_path / f"{name}.tiktoken").write_text(rank_file_text(small_tok), encoding="ascii")
        (tmp_path / f"{name}.tiktoken.json").write_bytes(sidecar(small_tok))
    return tmp_path


def test_import_references_then_pages_offer_them(
    app, runner, client, make_tokenizer, fake_reference_dir
):
    result = runner.invoke(args=["import-references", str(fake_reference_dir)])
    assert result.exit_code == 0, result.output
    assert [line.split(":")[0] for line in result.output.splitlines()] == [
        "GPT-2",
        "GPT-4",
        "GPT-4o",
    ]
    assert "imported as" in result.output
    again = runner.invoke(args=["import-references", str(fake_reference_dir)])
    assert again.output.count("already there") == 3
    with app.extensions["bpe_db"].session_scope() as session:
        refs = {
            r.reference: r.slug
            for r in session.query(Tokenizer).filter(Tokenizer.reference.isnot(None))
        }
    assert set(refs) == {"GPT-2", "GPT-4", "GPT-4o"}
    own = make_tokenizer(vocab_size=300)
    page = client.get(f"/t/{own.slug}").get_data(as_text=True)
    assert f'href="/compare/{own.slug}/{refs["GPT-4"]}"' in page and "compare with GPT-4" in page
    for tab in ("merges", "vocab"):
        assert "compare with GPT-4" in client.get(f"/t/{own.slug}/{tab}").get_data(as_text=True)
    played = client.post(f"/t/{own.slug}/encode", data={"text": "the cat"}).get_data(as_text=True)
    assert f'action="/t/{refs["GPT-4o"]}/encode"' in played  # the playground's switch
    switched = client.post(f"/t/{refs['GPT-4o']}/encode", data={"text": "the cat"})
    assert switched.status_code == 200 and "the cat" in switched.get_data(as_text=True)


def test_import_references_names_a_missing_file(runner, tmp_path):
    result = runner.invoke(args=["import-references", str(tmp_path)])
    assert result.exit_code != 0
    assert "cannot read" in result.output and "gpt2.tiktoken" in result.output


# ----- compare pages made of imported tokenisers only ----------------------------------------
@pytest.fixture
def imported_slugs(client):
    """Four imported tokenisers, tiktoken files and tokenizer.json files of different sizes: none
    was trained here, so none has a compression curve."""
    text = "the cat sat on the mat; the cat ate the rat. 123 456 东京 😀\n" * 5
    slugs = []
    for size, as_hf in ((290, False), (300, True), (310, False), (320, True)):
        tok = bpe.train(text, vocab_size=size, mode="chunked", trainer="reference")
        if as_hf:  # a tokenizer.json carries its own pre-tokenizer
            files, form = {"file": (to_hf_json(tok).encode(), f"t{size}.json")}, {}
        else:
            files = {"file": (rank_file_text(tok).encode(), f"r{size}.tiktoken")}
            form = {"pattern": "gpt4"}
        response = upload(client, "/api/tokenizers/import", files, **form)
        assert response.status_code == 201, response.get_json()
        slugs.append(response.get_json()["slug"])
    return slugs


@pytest.mark.parametrize("size", [2, 3, 4])
def test_compare_pages_of_imported_tokenisers_render(client, imported_slugs, size):
    url = "/compare/" + "/".join(imported_slugs[:size])
    response = client.get(url)
    assert response.status_code == 200, response.get_data(as_text=True)[:300]
    html = response.get_data(as_text=True)
    assert "Imported tokenisers were not trained here, so they have no curve" in html
    assert client.get(url + "/merges").status_code == 200
    encoded = client.post(url + "/encode", data={"text": "the cat sat"})
    assert encoded.status_code == 200
