"""Imported tokenisers: storing a tiktoken or HF file as a tokeniser row, the site's reference
tokenisers (GPT-2, GPT-4, GPT-4o from `flask import-references DIR`; those and the open models'
from `flask fetch-models`, webapp/content/fetch_models.py).

The library parses and checks the file (`bpe.importers`); this module stores the result in one
transaction (`convert.store_imported`, bulk inserts) and owns the queries about references.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import click
from flask import Flask
from flask.cli import with_appcontext
from sqlalchemy import select
from sqlalchemy.orm import Session

import bpe
from bpe.importers import import_bytes, import_path
from webapp.content.model_sources import LABELS
from webapp.storage import db
from webapp.storage.convert import store_imported
from webapp.storage.models import Tokenizer

# reference-script file name -> the label pages show, in the order pages list them
REFERENCES = {"gpt2": "GPT-2", "cl100k_base": "GPT-4", "o200k_base": "GPT-4o"}


def import_upload(
    database: db.Database,
    raw: bytes,
    *,
    filename: str,
    sidecar: bytes | None = None,
    pattern: str | None = None,
    owner_id: int | None = None,
) -> Tokenizer:
    """Parse an uploaded file and store it; TokenizerFileError (a ValueError) if refused."""
    tok = import_bytes(raw, filename=filename, sidecar=sidecar, pattern=pattern)
    return store_upload(database, tok, owner_id=owner_id)


def store_upload(database: db.Database, tok: bpe.Tokenizer, *, owner_id: int | None) -> Tokenizer:
    """Store a parsed import as `owner_id`'s tokeniser (None: the site's)."""
    with database.session_scope() as session:
        row = store_imported(session, tok, owner_id=owner_id)
        session.flush()
        session.expunge(row)
    return row


def import_reference_dir(database: db.Database, directory: Path) -> list[tuple[str, str, bool]]:
    """Import the reference script's three tokenisers; (label, slug, newly made) for each.

    Running it again changes nothing: a reference already stored from a file with the same
    SHA-256 is kept.
    """
    done = []
    for name, label in REFERENCES.items():
        path = directory / f"{name}.tiktoken"
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise bpe.TokenizerFileError(f"cannot read {path}: {exc.strerror}") from None
        slug = stored_reference(database, label, digest)
        if slug is not None:
            done.append((label, slug, False))
            continue
        done.append((label, store_reference(database, import_path(path), label), True))
    return done


def stored_reference(database: db.Database, label: str, digest: str) -> str | None:
    """The slug of the reference `label` if it is stored from a file of SHA-256 `digest`."""
    with database.read_scope() as session:
        return session.scalar(
            select(Tokenizer.slug).where(
                Tokenizer.reference == label,
                Tokenizer.source_sha256 == digest,
                Tokenizer.deleted_at.is_(None),
            )
        )


def store_reference(database: db.Database, tok: bpe.Tokenizer, label: str) -> str:
    """Store an import as the site's reference `label` (no owner); its slug."""
    with database.session_scope() as session:
        for old in session.scalars(select(Tokenizer).where(Tokenizer.reference == label)):
            old.reference = None  # a newer file takes the label over
        row = store_imported(session, tok)
        row.reference = label
        return row.slug


def references(session: Session) -> list[Tokenizer]:
    """The site's reference tokenisers, in the order of `model_sources.LABELS`."""
    rows = session.scalars(
        select(Tokenizer).where(Tokenizer.reference.is_not(None), Tokenizer.deleted_at.is_(None))
    ).all()
    order = list(LABELS)
    return sorted(rows, key=lambda r: order.index(r.reference) if r.reference in order else 99)


def missing_references(session: Session) -> list[str]:
    """The labels of `model_sources.MODELS` the site has no tokeniser for (`flask fetch-models`
    brings them)."""
    present = set(
        session.scalars(
            select(Tokenizer.reference).where(
                Tokenizer.reference.is_not(None), Tokenizer.deleted_at.is_(None)
            )
        )
    )
    return [label for label in LABELS if label not in present]


@click.command("import-references")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@with_appcontext
def import_references_command(directory: Path) -> None:
    """Import GPT-2, GPT-4 (cl100k_base) and GPT-4o (o200k_base) from DIRECTORY, a folder of
    NAME.tiktoken files each with its NAME.json (docs/using.md, "Imported tokenisers")."""
    try:
        done = import_reference_dir(db.get_db(), directory)
    except bpe.TokenizerFileError as exc:
        raise click.ClickException(str(exc)) from None
    for label, slug, new in done:
        click.echo(f"{label}: {'imported as' if new else 'already there,'} /t/{slug}")


def init_app(app: Flask) -> None:
    app.cli.add_command(import_references_command)
