"""Imports run as background jobs: a table of their own, the file waiting in it until read.

Revision ID: 0017_import_jobs
Revises: 0016_ids_never_reused
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_import_jobs"
down_revision = "0016_ids_never_reused"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "import_jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner_id", sa.Integer, sa.ForeignKey("owners.id"), index=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("phase", sa.String(16)),
        sa.Column("error", sa.Text),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("heartbeat_at", sa.DateTime),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("started_at", sa.DateTime),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("elapsed_seconds", sa.Float),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("pattern", sa.Text),
        sa.Column("data", sa.LargeBinary),
        sa.Column("sidecar", sa.LargeBinary),
        sa.Column("tokenizer_id", sa.Integer, sa.ForeignKey("tokenizers.id", ondelete="SET NULL")),
        sqlite_autoincrement=True,  # ids are in URLs (0016)
    )


def downgrade() -> None:
    op.drop_table("import_jobs")
