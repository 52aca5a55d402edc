"""`flask fetch-udhr` against a local HTTP server serving a udhr-like tarball this test builds
(the fetcher of tests/test_fetch_models.py): a good download is stored in the database, one
language a row, with its script; a corrupt one is refused and stores nothing; a second run
downloads nothing new; `--from` and `--dir` take it from folders. The real package's texts are
compared with make_udhr.sh's output when both are at hand."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.test_fetch_models import Site, handler_for, tarball
from tests.udhr_files import udhr_dir
from webapp.content import parallel_text
from webapp.content.model_sources import Package
from webapp.storage.models import ParallelText

INDEX = """/** docs */
export const udhr = [
  {bcp47: 'en', code: 'eng', direction: 'ltr', iso6393: 'eng', latitude: 53, longitude: -1.5,
   name: 'English', ohchr: 'eng', stage: 5},
  {bcp47: 'zh-Hans', code: 'cmn_hans', direction: 'ltr', iso6393: 'cmn', latitude: 1,
   longitude: 2, name: 'Chinese, Mandarin (Simplified)', stage: 4},
  {bcp47: 'fr', code: 'fra', direction: 'ltr', iso6393: 'fra', name: 'Fran\\'çais', stage: 4},
  {bcp47: 'xx', code: 'xxx', direction: 'ltr', iso6393: 'xxx', name: 'No file', stage: 4}
]
"""
ENG = """<!doctype html><html><head><title>English</title></head><body>
<h1>Universal Declaration of Human Rights</h1>
<header><h2>Preamble</h2><p>Whereas recognition   of the
inherent dignity &amp; rights,</p></header>
<article><h2>Article 1</h2><p>All human beings are <em>born</em> free.</p>
<ol><li>(a) first</li></ol></article></body></html>"""
CMN = "<html><body><h1>世界人权宣言</h1><p>人人生而自由，在尊严和权利上一律平等。</p></body></html>"
FRA = "<html><body><h1>Déclaration</h1><p>Tous les êtres humains naissent libres.</p></body></html>"


@pytest.fixture
def site(monkeypatch) -> Iterator[Site]:
    from http.server import ThreadingHTTPServer

    data = tarball(
        {
            "package/index.js": INDEX.encode(),
            "package/declaration/eng.html": ENG.encode(),
            "package/declaration/cmn_hans.html": CMN.encode(),
            "package/declaration/fra.html": FRA.encode(),
            "package/readme.md": b"not a declaration",
        }
    )
    package = Package("udhr", "1.0.0", hashlib.sha256(data).hexdigest(), len(data))
    monkeypatch.setattr(parallel_text, "UDHR", package)
    site = Site({f"/udhr/-/{package.filename}": data}, [], {package.filename: data})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield site
    server.shutdown()
    server.server_close()


@pytest.fixture
def app_config(app_config, tmp_path):
    return {**app_config, "MODEL_CACHE_DIR": str(tmp_path / "model-cache")}


def stored(app) -> dict[str, tuple[str, str | None, bool, int]]:
    with app.extensions["bpe_db"].read_scope() as session:
        return {
            row.code: (row.text, row.script, row.spaced, row.stage)
            for row in session.scalars(select(ParallelText))
        }


def test_fetches_checks_and_stores_each_language(app, runner, site):
    result = runner.invoke(args=["fetch-udhr", "--base-url", site.url])
    assert result.exit_code == 0, result.output
    assert "3 languages stored" in result.output
    rows = stored(app)
    assert rows["eng"] == (
        "Universal Declaration of Human Rights\nPreamble\n"
        "Whereas recognition of the inherent dignity & rights,\nArticle 1\n"
        "All human beings are born free.\n(a) first\n",
        "Latin",
        True,
        5,
    )
    assert rows["cmn_hans"][1:] == ("Han", False, 4)
    assert "xxx" not in rows  # listed, but the package has no text for it
    with app.extensions["bpe_db"].read_scope() as session:
        fra = session.scalar(select(ParallelText).where(ParallelText.code == "fra"))
        assert fra.name == "Fran'çais" and fra.bcp47 == "fr"

    site.requests.clear()
    again = runner.invoke(args=["fetch-udhr", "--base-url", site.url])
    assert again.exit_code == 0 and "already there, unchanged" in again.output
    assert site.requests == []  # the checked tarball in the cache is used


def test_a_corrupt_tarball_is_refused_and_nothing_stored(app, runner, site):
    path = next(iter(site.files))
    data = bytearray(site.files[path])
    data[len(data) // 2] ^= 0xFF
    site.files[path] = bytes(data)
    result = runner.invoke(args=["fetch-udhr", "--base-url", site.url])
    assert result.exit_code != 0 and "SHA-256 mismatch" in result.output
    assert stored(app) == {}


def test_from_a_folder_and_from_a_text_dir(app, runner, site, tmp_path):
    (tmp_path / "tarballs").mkdir()
    for name, data in site.tarballs.items():
        (tmp_path / "tarballs" / name).write_bytes(data)
    result = runner.invoke(args=["fetch-udhr", "--from", str(tmp_path / "tarballs")])
    assert result.exit_code == 0, result.output
    assert set(stored(app)) == {"eng", "cmn_hans", "fra"} and site.requests == []
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "index.json").write_text('[{"code": "eng", "name": "English", "stage": 5}]')
    (texts / "eng.txt").write_text("All human beings are born free.\n")
    result = runner.invoke(args=["fetch-udhr", "--dir", str(texts)])
    assert result.exit_code == 0 and "1 languages stored" in result.output
    assert set(stored(app)) == {"eng"}  # a new edition replaces the old one whole
    bad = runner.invoke(args=["fetch-udhr", "--dir", str(tmp_path / "tarballs")])
    assert bad.exit_code != 0 and "make_udhr.sh" in bad.output


def test_the_real_package_gives_make_udhr_sh_texts(app, runner):
    """The pinned package, if a copy is at hand (BPE_UDHR_TARBALL_DIR, else make_udhr.sh's
    work folder): every text equals the script's output."""
    import os

    folder = Path(os.environ.get("BPE_UDHR_TARBALL_DIR", "/tmp/udhr-build"))
    if not (folder / parallel_text.UDHR.filename).is_file():
        pytest.skip(f"no {parallel_text.UDHR.filename} in {folder}")
    expected = udhr_dir()
    result = runner.invoke(args=["fetch-udhr", "--from", str(folder)])
    assert result.exit_code == 0, result.output
    rows = stored(app)
    files = {p.stem: p.read_text(encoding="utf-8") for p in expected.glob("*.txt")}
    assert len(rows) == len(files) > 500
    assert {code: row[0] for code, row in rows.items()} == files
