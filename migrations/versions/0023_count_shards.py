"""Shards of a training's text, counted by any Celery worker that claims one
(webapp/jobs/shard_store.py).

Revision ID: 0023_count_shards
Revises: 0022_pipeline_token_rows
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_count_shards"
down_revision = "0022_pipeline_token_rows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "count_shards",
        sa.Column(
            "job_id",
            sa.Integer,
            sa.ForeignKey("training_jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("claimed_at", sa.DateTime),
        sa.Column("counted_by", sa.String(255)),
        sa.Column("counts", sa.Text),
    )


def downgrade() -> None:
    op.drop_table("count_shards")
