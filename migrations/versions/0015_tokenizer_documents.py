"""A tokeniser row keeps the tokeniser's header (`bpe.formats.header_dict`: the saved file
without its merges, tokens and per-merge counts) as one JSON document, `tokenizers.document`;
the merges and vocab_entries rows stay its bulk. Loading reads the document through the file
format's own checks, so a new field of the format needs no new column.

Rows stored before get theirs from their columns, as the loader used to read them. The header is
written out here as it stood in format version 1, not through `bpe`, so this migration keeps
meaning what it meant when the library changes. Neither adding the column nor dropping it
rebuilds the table on SQLite.

Revision ID: 0015_tokenizer_documents
Revises: 0014_evaluation_owners
Create Date: 2026-12-01
"""

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0015_tokenizer_documents"
down_revision = "0014_evaluation_owners"
branch_labels = None
depends_on = None

COLUMNS = (
    "id",
    "mode",
    "pattern",
    "trainer",
    "vocab_size_requested",
    "min_frequency",
    "special_tokens",
    "alphabet",
    "initial_tokens",
    "training_seconds",
    "source_format",
    "source_filename",
    "source_sha256",
    "source_name",
    "encode_rule",
    "pre_tokenizer",
    "ignore_merges",
)


def upgrade() -> None:
    with op.batch_alter_table("tokenizers") as batch:
        batch.add_column(sa.Column("document", sa.Text))
    bind = op.get_bind()
    tokenizers = sa.table("tokenizers", *(sa.column(name) for name in (*COLUMNS, "document")))
    rows = bind.execute(sa.select(*(tokenizers.c[name] for name in COLUMNS))).mappings().all()
    for row in rows:
        document = json.dumps(_header(row), ensure_ascii=False, separators=(",", ":"))
        bind.execute(
            sa.update(tokenizers).where(tokenizers.c.id == row["id"]).values(document=document)
        )


def _header(row: Any) -> dict[str, Any]:
    """Format version 1's header from the columns the loader read before this revision."""
    header: dict[str, Any] = {
        "format": "bpe-workbench.tokenizer",
        "version": 1,
        "mode": row["mode"],
        "pattern": row["pattern"],
        "special_tokens": json.loads(row["special_tokens"] or "{}"),
        "alphabet": None if row["alphabet"] is None else json.loads(row["alphabet"]),
        "training": None,
    }
    if row["source_format"] is None:  # trained here; missing numbers were read as 0
        header["training"] = {
            "trainer": row["trainer"] or "",
            "vocab_size": row["vocab_size_requested"] or 0,
            "min_frequency": row["min_frequency"] or 0,
            "initial_tokens": row["initial_tokens"] or 0,
            "seconds": row["training_seconds"],
        }
        return header
    header.update(
        rule=row["encode_rule"],
        pre_tokenizer=None if row["pre_tokenizer"] is None else json.loads(row["pre_tokenizer"]),
        ignore_merges=bool(row["ignore_merges"]),
        source={
            "format": row["source_format"],
            "filename": row["source_filename"] or "",
            "sha256": row["source_sha256"] or "",
            "name": row["source_name"],
        },
    )
    return header


def downgrade() -> None:
    # Never a rebuild: on SQLite, dropping the old `tokenizers` table with foreign keys on
    # would cascade to every merge and vocabulary row. SQLite 3.35+ drops a plain column.
    with op.batch_alter_table("tokenizers", recreate="never") as batch:
        batch.drop_column("document")
