"""SQLite indexes each vocabulary's tokens by what they stand for (`hex`), for the vocabulary diff.

Comparing two 100,000-token vocabularies probes one with every token of the other; without an
index SQLite scans the whole vocabulary per probe. PostgreSQL answers the same query with a
hash join and gets no index (its btree refuses keys over ~2.7 kB, and a token may be 16 kB).

Revision ID: 0019_vocab_bytes_index
Revises: 0018_job_workers
Create Date: 2026-12-02
"""

from alembic import op

revision = "0019_vocab_bytes_index"
down_revision = "0018_job_workers"
branch_labels = None
depends_on = None

COLUMNS = ["tokenizer_id", "hex", "ends_word"]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index("ix_vocab_tokenizer_hex", "vocab_entries", COLUMNS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_vocab_tokenizer_hex", table_name="vocab_entries")
