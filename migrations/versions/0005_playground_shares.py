"""Playground shares: the encode playground's text and view state behind a short link.

Revision ID: 0005_playground_shares
Revises: 0001
Create Date: 2025-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_playground_shares"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "playground_shares",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("slug", sa.String(64), nullable=False, unique=True),
        sa.Column(
            "tokenizer_id",
            sa.Integer,
            sa.ForeignKey("tokenizers.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("text_utf8", sa.LargeBinary, nullable=False),
        sa.Column("view", sa.String(8), nullable=False),
        sa.Column("options", sa.Text, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index(
        "ix_playground_shares_tokenizer_digest",
        "playground_shares",
        ["tokenizer_id", "digest"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("ix_playground_shares_tokenizer_digest", table_name="playground_shares")
    op.drop_table("playground_shares")
