"""Corpus stats: words mode's alphabet size per corpus, so a vocab size that cannot work is
refused on the form instead of failing a queued job.

A table of its own, not a column on `corpora`: on SQLite a new column there means rebuilding
the table (its `text` must stay the last column), and that rebuild once emptied
`corpus_previews`. Existing corpora are counted here, one slice of text at a time (SQLite through
incremental blob I/O, PostgreSQL with server-side substrings), so no corpus is held whole.

Revision ID: 0013_corpus_stats
Revises: 0012_owners
Create Date: 2026-12-01
"""

import codecs

import sqlalchemy as sa
from alembic import op

revision = "0013_corpus_stats"
down_revision = "0012_owners"
branch_labels = None
depends_on = None

SLICE = 1 << 20  # bytes (SQLite) or characters (PostgreSQL) read per step


def upgrade() -> None:
    op.create_table(
        "corpus_stats",
        sa.Column(
            "corpus_id",
            sa.Integer,
            sa.ForeignKey("corpora.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("word_alphabet_size", sa.Integer, nullable=False),
    )
    bind = op.get_bind()
    stats = sa.table("corpus_stats", sa.column("corpus_id"), sa.column("word_alphabet_size"))
    for corpus_id in bind.scalars(sa.text("SELECT id FROM corpora ORDER BY id")).all():
        seen: set[str] = set()
        for piece in _slices(bind, corpus_id):
            seen.update(piece)
        size = sum(1 for c in seen if not c.isspace())
        bind.execute(sa.insert(stats).values(corpus_id=corpus_id, word_alphabet_size=size))


def _slices(bind, corpus_id: int):
    if bind.dialect.name == "sqlite":
        sqlite = bind.connection.driver_connection
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with sqlite.blobopen("corpora", "text", corpus_id, readonly=True) as blob:
            while data := blob.read(SLICE):
                yield decoder.decode(data)
        yield decoder.decode(b"", final=True)
        return
    start = 1
    while piece := bind.scalar(
        sa.text("SELECT substr(text, :start, :n) FROM corpora WHERE id = :id"),
        {"start": start, "n": SLICE, "id": corpus_id},
    ):
        yield piece
        start += SLICE


def downgrade() -> None:
    op.drop_table("corpus_stats")
