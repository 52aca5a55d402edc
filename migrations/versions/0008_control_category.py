"""Vocabulary entries made only of control characters get their own category, `control`.

They were stored as `mixed` (the bytes 0x00-0x08, 0x0E-0x1B, 0x7F and the like), which told a
reader nothing; recomputed here with the library's own rule, so old and new rows agree.

Revision ID: 0008_control_category
Revises: 0005_playground_shares
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from bpe.token_info import token_category

revision = "0008_control_category"
down_revision = "0005_playground_shares"
branch_labels = None
depends_on = None

vocab = sa.table(
    "vocab_entries",
    sa.column("tokenizer_id", sa.Integer),
    sa.column("token_id", sa.Integer),
    sa.column("token_bytes", sa.LargeBinary),
    sa.column("category", sa.String),
)


def upgrade() -> None:
    conn = op.get_bind()
    # Only `mixed` entries can be all control characters; the library decides which are.
    rows = conn.execute(
        sa.select(vocab.c.tokenizer_id, vocab.c.token_id, vocab.c.token_bytes).where(
            vocab.c.category == "mixed"
        )
    )
    changed = [{"t": t, "i": i} for t, i, data in rows if token_category(bytes(data)) == "control"]
    for start in range(0, len(changed), 1000):
        conn.execute(
            sa.update(vocab)
            .where(vocab.c.tokenizer_id == sa.bindparam("t"), vocab.c.token_id == sa.bindparam("i"))
            .values(category="control"),
            changed[start : start + 1000],
        )


def downgrade() -> None:
    op.execute(vocab.update().where(vocab.c.category == "control").values(category="mixed"))
