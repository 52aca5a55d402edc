"""Every page works for every model import: the eight model tokenisers the site fetches (GPT-2,
GPT-4's cl100k_base, GPT-4o's o200k_base from tiktoken rank files; gpt-oss, Llama 3, Qwen 3,
DeepSeek-V3 and Llama 2 from HF tokenizer.json files) are imported through the import form once
per module, then each page of each is asked for and held to what the real libraries
(`tiktoken`, HF `tokenizers`) say: the tokeniser page, the playground, the merge scrubber at a k
within the file's merges, "why this split?", the merges and a later page of them, the
vocabulary with each of its facets, a token's page, compare pages of two to four imports and an
evaluation.

The files are not in the repository (tests/reference_files.py and tests/test_hf_models.py say
where they are found and which script makes them); a model whose file is absent skips, naming
the script.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from functools import cache
from html import unescape
from pathlib import Path
from typing import Any

import pytest

import bpe
from bpe.importers import import_path
from bpe.token_info import CATEGORIES, token_category
from tests.conftest import _backend_config, _database_url
from tests.reference_files import read_ranks, reference_dir
from tests.test_hf_models import model_path
from tests.test_web_imports import imported_slug
from webapp import create_app, stop_runners

tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")

RANK_FILES = {"gpt2": "gpt2", "cl100k": "cl100k_base", "o200k": "o200k_base"}
HF_FILES = ("gptoss", "llama3", "qwen3", "deepseek_v3", "llama2")
MODELS = (*RANK_FILES, *HF_FILES)
HX = {"HX-Request": "true"}
# NFC changes `e` + U+0301, Llama 2's vocabulary lacks 🧬 (byte fallback), double spaces, a tab.
TEXT = "Hello world, café naïve  two  spaces\n\tx = 12345; 東京 🧬 Cafe\u0301!"


@dataclass(frozen=True)
class Model:
    name: str
    slug: str
    tok: bpe.Tokenizer  # the library's import of the same file
    real: Any  # tiktoken.Encoding or tokenizers.Tokenizer
    path: Path

    def real_ids(self, text: str) -> list[int]:
        if isinstance(self.real, tiktoken.Encoding):
            return self.real.encode_ordinary(text)
        return self.real.encode(text, add_special_tokens=False).ids


def _files(name: str) -> tuple[Path, Path | None]:
    if name in RANK_FILES:
        directory = reference_dir()
        stem = RANK_FILES[name]
        return directory / f"{stem}.tiktoken", directory / f"{stem}.tiktoken.json"
    return model_path(name), None


@cache
def _real(name: str) -> Any:
    path, sidecar = _files(name)
    if sidecar is None:
        real = tokenizers.Tokenizer.from_file(str(path))
        real.encode_special_tokens = True  # specials as text, as the playground's default
        return real
    meta = json.loads(sidecar.read_text(encoding="utf-8"))
    return tiktoken.Encoding(
        name=name,
        pat_str=meta["pat_str"],
        mergeable_ranks=read_ranks(path),
        special_tokens=meta["special_tokens"],
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """An app whose tokenisers are the model imports, each imported on first use."""
    tmp = tmp_path_factory.mktemp("import-pages")
    app = create_app(
        {
            "TESTING": True,
            "SECRET_KEY": "test",
            "DATABASE_URL": _database_url(tmp),
            "UPLOAD_TMP_DIR": str(tmp / "uploads-tmp"),
            "JOBS_EXECUTION": "manual",
            "JOBS_PROGRESS_INTERVAL": 0.0,
            **_backend_config(),
        }
    )
    client = app.test_client()
    imported: dict[str, Model] = {}

    def model(name: str) -> Model:
        if name not in imported:
            path, sidecar = _files(name)  # skips when the file is absent
            files = {"file": (io.BytesIO(path.read_bytes()), path.name)}
            if sidecar is not None:
                files["sidecar"] = (io.BytesIO(sidecar.read_bytes()), sidecar.name)
            response = client.post("/import", data=files, content_type="multipart/form-data")
            slug = imported_slug(client, response)  # the import job ran within the request
            imported[name] = Model(name, slug, import_path(path), _real(name), path)
        return imported[name]

    yield client, model
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


def ids_in(html: str) -> list[int]:
    """The token ids a fragment shows, in order (every chip's tooltip names its ids: one, or
    each of the tokens it joins to show whole characters)."""
    return [
        int(found)
        for tip in re.findall(r'data-tip="([^"]*)"', html)
        for found in re.findall(r"(?:^|; |: )id (\d+) ·", tip)
    ]


def listed_ids(html: str) -> list[int]:
    """The ids of encoded text, from the playground's "ids as a list" box."""
    found = re.search(r'aria-label="Token ids, comma separated">([^<]*)</textarea>', html)
    assert found, html[-2000:]
    return [int(i) for i in found.group(1).split(",") if i.strip()]


def pieces_text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


# ----- the tokeniser page and the playground ------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_tokeniser_page_names_the_file_and_its_rule(site, name):
    client, model = site
    m = model(name)
    response = client.get(f"/t/{m.slug}")
    assert response.status_code == 200
    html = unescape(response.get_data(as_text=True))
    assert m.path.name in html and "imported" in html
    rule = {
        "tiktoken": "lowest rank of the joined bytes",
        "hf": "the file's merge order",
        "hf_pipeline": "HF's whole pipeline: normalizer, pre-tokenizer",
    }[m.tok.rule]
    assert rule in html
    assert f"{m.tok.vocab_size:,} tokens" in html


def _fact(html: str, term: str) -> str:
    found = re.search(rf"<dt>{term}</dt><dd>(.*?)</dd>", html, re.S)
    assert found, f"no {term} in the header"
    return pieces_text(found.group(1))


@pytest.mark.parametrize(
    ("name", "normalizer", "pre_tokenizer"),
    [
        ("llama2", "Sequence [Prepend, Replace]", "none: the whole normalized text is one word"),
        ("deepseek_v3", "Sequence []", "Sequence [Split, Split, Split, ByteLevel]"),
        ("qwen3", "NFC", "Sequence [Split, ByteLevel]"),
    ],
)
def test_a_pipeline_imports_header_names_its_normalizer_and_pre_tokenizer(
    site, name, normalizer, pre_tokenizer
):
    """Not one regex: Llama 2 has none (it was "none (naive mode)") and DeepSeek-V3 splits
    three times (it showed only the first regex)."""
    client, model = site
    html = client.get(f"/t/{model(name).slug}").get_data(as_text=True)
    assert _fact(html, "normalizer") == normalizer
    assert _fact(html, "pre-tokenizer").startswith(pre_tokenizer)
    assert "<dt>pattern</dt>" not in html


@pytest.mark.parametrize("name", MODELS)
def test_playground_shows_the_real_librarys_ids(site, name):
    client, model = site
    m = model(name)
    response = client.post(f"/t/{m.slug}/encode", data={"text": TEXT, "view": "ids"}, headers=HX)
    assert response.status_code == 200
    assert listed_ids(response.get_data(as_text=True)) == m.real_ids(TEXT)
    # The text view's chips, put together, read as the text (Llama 2's `▁` a space again).
    text_view = client.post(f"/t/{m.slug}/encode", data={"text": TEXT}, headers=HX)
    shown = pieces_text(text_view.get_data(as_text=True))
    assert "naïve" in shown and "東京" in shown and "🧬" in shown


def _limited_real(m: Model, k: int) -> Any:
    """The real library with only the first k merges of the file."""
    if isinstance(m.real, tiktoken.Encoding):
        bound = m.tok.merges[k][2]  # merge k+1's token: tiktoken ranks are ids
        ranks = {b: r for b, r in m.real._mergeable_ranks.items() if r < bound}
        return tiktoken.Encoding(
            name=f"{m.name}-{k}",
            pat_str=m.real._pat_str,
            mergeable_ranks=ranks,
            special_tokens=m.real._special_tokens,
        )
    data = json.loads(m.path.read_text(encoding="utf-8"))
    data["model"]["merges"] = data["model"]["merges"][:k]
    data["model"]["ignore_merges"] = False  # a word is taken whole only with every merge
    real = tokenizers.Tokenizer.from_str(json.dumps(data))
    real.encode_special_tokens = True
    return real


@pytest.mark.parametrize("name", MODELS)
def test_scrubber_encodes_with_the_first_k_merges_of_the_file(site, name):
    client, model = site
    m = model(name)
    k = len(m.tok.merges) // 50  # within the file's merges, far below all of them
    response = client.post(
        f"/t/{m.slug}/encode", data={"text": TEXT, "view": "ids", "k": str(k)}, headers=HX
    )
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    want = Model(m.name, m.slug, m.tok, _limited_real(m, k), m.path).real_ids(TEXT)
    assert want != m.real_ids(TEXT)
    assert f"merge {k:,} of {len(m.tok.merges):,}" in html
    left, right, new = m.tok.merges[k - 1]
    merge = html[html.index('class="scrub-merge"') : html.index("</p>")]
    assert ids_in(merge) == [left, right, new]  # merge k's parts, then what they make
    assert listed_ids(html) == want


# ----- why this split? ------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_why_this_split_ends_in_the_playgrounds_tokens(site, name):
    client, model = site
    m = model(name)
    ids = m.real_ids(TEXT)
    for k in ("", str(len(m.tok.merges) // 50)):
        for number in (1, len(ids) // 2, len(ids)):
            response = client.post(
                f"/t/{m.slug}/why", data={"text": TEXT, "token": str(number), "k": k}, headers=HX
            )
            assert response.status_code == 200, (number, k, response.get_data(as_text=True))
            html = response.get_data(as_text=True)
            assert "exactly the tokens the playground shows here" in html or (
                "exactly the token the playground shows here" in html
            ), (number, k)
            if m.tok.rule == "hf_pipeline":
                assert 'class="pipeline-stages"' in html and "Normalizer" in html


# ----- merges ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_merges_and_a_later_page_of_them(site, name):
    client, model = site
    m = model(name)
    for page in (1, 3):
        response = client.get(f"/t/{m.slug}/merges?per_page=25&page={page}", headers=HX)
        assert response.status_code == 200
        html = response.get_data(as_text=True)
        assert f"page {page} of {-(-len(m.tok.merges) // 25):,}" in html
        for left, right, new in m.tok.merges[(page - 1) * 25 : page * 25]:
            assert ids_in(html).count(new) >= 1 and {left, right} <= set(ids_in(html))
        assert f"/t/{m.slug}/token/{m.tok.merges[(page - 1) * 25][2]}" in html
    full = client.get(f"/t/{m.slug}/merges")
    assert full.status_code == 200 and "Merges" in full.get_data(as_text=True)


# ----- vocabulary -------------------------------------------------------------------------------
def _matches(html: str) -> int:
    found = re.search(r"([\d,]+) match(?:es)?</span>", html)
    assert found, html[-2000:]
    return int(found.group(1).replace(",", ""))


def _expected(m: Model) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """The ids of each kind and of each category, from the library's import of the file."""
    tok = m.tok
    ids = set(tok.vocab)
    special = {i for i in ids if tok.is_special(i)}
    learned = {i for i in ids - special if tok.merge_rank(i) is not None}
    kinds = {"all": ids, "special": special, "learned": learned, "base": ids - special - learned}
    categories: dict[str, set[int]] = {c: set() for c in CATEGORIES}
    for i in ids:
        categories[token_category(tok.display_bytes(i), special=i in special)].add(i)
    return kinds, categories


@pytest.mark.parametrize("name", MODELS)
def test_vocabulary_facets_hold_what_they_say(site, name):
    client, model = site
    m = model(name)
    kinds, categories = _expected(m)
    for kind, ids in kinds.items():
        response = client.get(f"/t/{m.slug}/vocab?kind={kind}&per_page=25", headers=HX)
        assert response.status_code == 200
        html = response.get_data(as_text=True)
        assert _matches(html) == len(ids), kind
        assert set(ids_in(html)) <= ids, kind
    for category in CATEGORIES:
        response = client.get(f"/t/{m.slug}/vocab?kind=all&category={category}", headers=HX)
        assert response.status_code == 200
        html = response.get_data(as_text=True)
        want = categories[category]
        assert _matches(html) == len(want) if want else "No token matches" in html, category
        assert set(ids_in(html)) <= want, category
    for sort in ("id", "-id", "-length", "length", "-count", "count"):
        response = client.get(f"/t/{m.slug}/vocab?kind=all&sort={sort}", headers=HX)
        assert response.status_code == 200, sort
    longest = client.get(f"/t/{m.slug}/vocab?kind=learned&sort=-length&per_page=25", headers=HX)
    first = ids_in(longest.get_data(as_text=True))[0]
    assert len(m.tok.display_bytes(first)) == max(
        len(m.tok.display_bytes(i)) for i in kinds["learned"]
    )
    hello = m.real_ids("Hello")[0]
    found = client.get(f"/t/{m.slug}/vocab?match=id&q={hello}", headers=HX)
    assert ids_in(found.get_data(as_text=True)) == [hello]
    page = client.get(f"/t/{m.slug}/vocab")
    assert page.status_code == 200 and "Vocabulary" in page.get_data(as_text=True)


# ----- a token's page ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_token_page_shows_the_token_and_its_parts(site, name):
    client, model = site
    m = model(name)
    token = max(m.real_ids(TEXT), key=lambda i: len(m.tok.display_bytes(i)))
    response = client.get(f"/t/{m.slug}/token/{token}")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    rank = m.tok.merge_rank(token)
    assert rank is not None
    left, right, _ = m.tok.merges[rank]
    for part in (left, right):
        assert f"/t/{m.slug}/token/{part}" in html
    shown = m.tok.display_bytes(token).decode("utf-8").replace(" ", "·")
    assert shown in pieces_text(html)


# ----- compare and evaluate -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "names",
    [
        ("gpt2", "llama2"),
        ("cl100k", "qwen3", "deepseek_v3"),
        ("o200k", "gptoss", "llama3", "llama2"),
    ],
)
def test_compare_pages_of_imports(site, names):
    client, model = site
    models = [model(name) for name in names]
    url = "/compare/" + "/".join(m.slug for m in models)
    for page in (url, url + "/merges"):
        assert client.get(page).status_code == 200, page
    response = client.post(url + "/encode", data={"text": TEXT}, headers=HX)
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    shown = ids_in(html)
    for m in models:
        want = m.real_ids(TEXT)
        assert any(shown[i : i + len(want)] == want for i in range(len(shown))), m.name


@pytest.mark.parametrize("name", MODELS)
def test_evaluation_counts_the_real_tokens(site, name):
    client, model = site
    m = model(name)
    assert client.get(f"/t/{m.slug}/evaluate").status_code == 200
    response = client.post(f"/t/{m.slug}/evaluate", data={"text": TEXT})
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    tokens = len(m.real_ids(TEXT))
    assert f"{len(TEXT.encode()) / tokens:.3f}" in html  # bytes per token
    api = client.post(f"/api/t/{m.slug}/evaluate", json={"text": TEXT}).get_json()
    assert api["tokens"] == tokens


# ----- how the lists draw and sort imported tokens -------------------------------------------
def _row(html: str, token_id: int) -> str:
    """The vocabulary table's row of one token."""
    found = re.search(
        rf'<tr>\s*<td class="num"><a href="[^"]*/token/{token_id}">.*?</tr>', html, re.S
    )
    assert found, token_id
    return found.group(0)


def _cells(row: str) -> list[str]:
    return [pieces_text(cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


@pytest.mark.parametrize(
    ("name", "token", "drawn", "category", "size"),
    [
        # SentencePiece-style (Llama 2): `▁` is a space, `<0xNN>` the byte it stands for.
        ("llama2", "\u2581the", "·the", "leading-space", 4),
        ("llama2", "\u2581\u2581", "··", "whitespace", 2),
        ("llama2", "<0x0A>", "↵", "whitespace", 1),
        ("llama2", "<0xE4>", "E4", "partial-utf8", 1),
        ("llama2", "<0x41>", "A", "letters", 1),
        ("llama2", "\u00e9", "é", "letters", 2),
        # Byte-level (Qwen 3, DeepSeek-V3): `Ġ` and `Ċ` are the bytes 0x20 and 0x0A.
        ("qwen3", "\u0120the", "·the", "leading-space", 4),
        ("qwen3", "\u010a", "↵", "whitespace", 1),
        ("deepseek_v3", "\u0120\u0120", "··", "whitespace", 2),
    ],
)
def test_vocabulary_draws_tokens_as_what_they_stand_for(site, name, token, drawn, category, size):
    client, model = site
    m = model(name)
    token_id = m.real.token_to_id(token)
    assert token_id is not None
    html = client.get(f"/t/{m.slug}/vocab?kind=all&match=id&q={token_id}", headers=HX)
    cells = _cells(_row(html.get_data(as_text=True), token_id))
    assert cells[1] == drawn and cells[5] == category and cells[3] == str(size), cells
    facets = f"kind=all&category={category}&min_len={size}&max_len={size}"
    listed = client.get(f"/t/{m.slug}/vocab?{facets}&q={token_id}&match=id", headers=HX)
    assert ids_in(listed.get_data(as_text=True)) == [token_id]
    page = client.get(f"/t/{m.slug}/token/{token_id}").get_data(as_text=True)
    assert drawn in pieces_text(page) and category in page


def test_llama2_base_vocabulary_is_its_characters_and_bytes(site):
    """Llama 2's base tokens (no merge makes them) are characters of any length and the 256
    `<0xNN>` bytes: the base list holds them and says which is which."""
    client, model = site
    m = model("llama2")
    e_acute, byte = m.real.token_to_id("\u00e9"), m.real.token_to_id("<0xE4>")
    the = m.real.token_to_id("\u2581the")
    for token_id, kind in ((e_acute, "base"), (byte, "base"), (the, "learned")):
        html = client.get(f"/t/{m.slug}/vocab?kind={kind}&match=id&q={token_id}", headers=HX)
        assert ids_in(html.get_data(as_text=True)) == [token_id], kind
    listed = client.get(f"/t/{m.slug}/vocab?kind=base&match=id&q={byte}", headers=HX)
    assert f'data-tip="id {byte} · base byte' in listed.get_data(as_text=True)
    page = client.get(f"/t/{m.slug}/token/{e_acute}").get_data(as_text=True)
    assert "base character" in page


# ----- downloads ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_downloads_give_files_that_encode_alike(site, name):
    """The project's JSON always; a tokenizer.json of an import through HF's whole pipeline,
    which `tokenizers` runs as the original; the other formats are refused, saying why."""
    client, model = site
    m = model(name)
    saved = client.get(f"/t/{m.slug}/download/json")
    assert saved.status_code == 200
    assert bpe.formats.loads(saved.data).encode(TEXT) == m.real_ids(TEXT)
    hf = client.get(f"/t/{m.slug}/download/hf")
    if m.tok.rule == "hf_pipeline":
        assert hf.status_code == 200
        again = tokenizers.Tokenizer.from_str(hf.get_data(as_text=True))
        for add in (False, True):
            assert (
                again.encode(TEXT, add_special_tokens=add).ids
                == m.real.encode(TEXT, add_special_tokens=add).ids
            )
    else:
        assert hf.status_code == 422 and "use the original file" in hf.get_data(as_text=True)
    rank_file = client.get(f"/t/{m.slug}/download/tiktoken")
    assert rank_file.status_code == (200 if m.tok.rule == "tiktoken" else 422)


@pytest.mark.parametrize("name", ["llama2", "qwen3"])
def test_vocabulary_text_search_finds_what_the_reader_sees(site, name):
    """Searching " the" finds the token drawn `·the`, however the file spells its space."""
    client, model = site
    m = model(name)
    the = m.real_ids(" the")[-1]  # Llama 2 encodes " the" as `▁`, `▁the`
    response = client.get(f"/t/{m.slug}/vocab?kind=all&match=text&q=+the&per_page=100", headers=HX)
    listed = ids_in(response.get_data(as_text=True))
    assert the in listed
    assert all(b" the" in m.tok.display_bytes(i) for i in listed)
