"""Corpus previews: the first 2,000 characters of each corpus, stored beside it at upload, so
a corpus page never reads the corpus text (SQLite loads a whole value even for a substring).

A table of its own because `corpora.text` must stay the last column (uploads stream into a
zeroblob placeholder there). Existing corpora are backfilled here in batches of rows, reading
at most a few kilobytes of each text: SQLite through incremental blob I/O, PostgreSQL with a
server-side substring.

Revision ID: 0009_corpus_previews
Revises: 0008_control_category
Create Date: 2026-12-01
"""

import codecs

import sqlalchemy as sa
from alembic import op

revision = "0009_corpus_previews"
down_revision = "0008_control_category"
branch_labels = None
depends_on = None

PREVIEW_CHARS = 2000  # webapp.storage.uploads.PREVIEW_CHARS when this revision was written
BATCH = 100


def upgrade() -> None:
    op.create_table(
        "corpus_previews",
        sa.Column(
            "corpus_id",
            sa.Integer,
            sa.ForeignKey("corpora.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("text", sa.Text, nullable=False),
    )
    _backfill(op.get_bind())


def _backfill(bind) -> None:
    previews = sa.table("corpus_previews", sa.column("corpus_id"), sa.column("text"))
    last_id = 0
    while True:
        ids = bind.scalars(
            sa.text("SELECT id FROM corpora WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last_id, "n": BATCH},
        ).all()
        if not ids:
            return
        rows = [{"corpus_id": i, "text": _head(bind, i)} for i in ids]
        bind.execute(sa.insert(previews), rows)
        last_id = ids[-1]


def _head(bind, corpus_id: int) -> str:
    if bind.dialect.name == "sqlite":
        sqlite = bind.connection.driver_connection
        with sqlite.blobopen("corpora", "text", corpus_id, readonly=True) as blob:
            data = blob.read(PREVIEW_CHARS * 4)  # at most 4 UTF-8 bytes per character
        # final=False drops a character cut in half at the end of the slice
        text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final=False)
        return text[:PREVIEW_CHARS]
    return bind.scalar(
        sa.text("SELECT substr(text, 1, :n) FROM corpora WHERE id = :id"),
        {"n": PREVIEW_CHARS, "id": corpus_id},
    )


def downgrade() -> None:
    op.drop_table("corpus_previews")
