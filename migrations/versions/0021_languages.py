"""Languages: the parallel text (the UDHR), its jobs and their token counts; and how an
evaluated corpus is written, so that tokens per word is shown only where words are spaced.

Revision ID: 0021_languages
Revises: 0020_job_learning
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_languages"
down_revision = "0020_job_learning"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "parallel_texts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("code", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("bcp47", sa.String(64), nullable=False),
        sa.Column("iso6393", sa.String(16), nullable=False),
        sa.Column("direction", sa.String(8), nullable=False),
        sa.Column("stage", sa.Integer, nullable=False),
        sa.Column("script", sa.String(32)),
        sa.Column("spaced", sa.Boolean, nullable=False),
        sa.Column("byte_count", sa.Integer, nullable=False),
        sa.Column("char_count", sa.Integer, nullable=False),
        sa.Column("word_count", sa.Integer, nullable=False),
        sa.Column("source_sha256", sa.String(64), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
    )
    op.create_table(
        "language_jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner_id", sa.Integer, sa.ForeignKey("owners.id"), index=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("heartbeat_at", sa.DateTime),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("started_at", sa.DateTime),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("elapsed_seconds", sa.Float),
        sa.Column("tokenizer_ids", sa.Text, nullable=False),
        sa.Column("counts_done", sa.Integer, nullable=False, server_default="0"),
        sa.Column("counts_total", sa.Integer, nullable=False, server_default="0"),
        sa.Column("sent_at", sa.DateTime),
        sa.Column("send_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("worker_host", sa.String(255)),
        sa.Column("worker_pid", sa.Integer),
        sqlite_autoincrement=True,  # ids are in URLs (0016)
    )
    op.create_table(
        "language_counts",
        sa.Column(
            "job_id",
            sa.Integer,
            sa.ForeignKey("language_jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "tokenizer_id",
            sa.Integer,
            sa.ForeignKey("tokenizers.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "text_id",
            sa.Integer,
            sa.ForeignKey("parallel_texts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tokens", sa.Integer, nullable=False),
    )
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("script", sa.String(32)))
        batch.add_column(sa.Column("spaced", sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("spaced")
        batch.drop_column("script")
    op.drop_table("language_counts")
    op.drop_table("language_jobs")
    op.drop_table("parallel_texts")
