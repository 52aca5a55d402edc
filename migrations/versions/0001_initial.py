"""Initial schema: corpora, tokenizers with their merges and vocabulary, training jobs.

Revision ID: 0001
Revises:
Create Date: 2025-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "corpora",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("slug", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("filename", sa.String(255)),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("char_count", sa.Integer, nullable=False),
        sa.Column("line_count", sa.Integer, nullable=False),
        sa.Column("source_encoding", sa.String(20), nullable=False, server_default="utf-8"),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("deleted_at", sa.DateTime),
        # Last on purpose: SQLite keeps a zeroblob() placeholder unmaterialised only at the end
        # of a row, which lets uploads stream into it (webapp/storage/uploads.py).
        sa.Column("text", sa.Text, nullable=False),
    )
    op.create_index("ix_corpora_sha256", "corpora", ["sha256"], unique=True)
    op.create_index("ix_corpora_created_at", "corpora", ["created_at"])

    op.create_table(
        "tokenizers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("slug", sa.String(64), nullable=False, unique=True),
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id"), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("pattern", sa.Text),
        sa.Column("trainer", sa.String(16), nullable=False),
        sa.Column("vocab_size_requested", sa.Integer, nullable=False),
        sa.Column("vocab_size", sa.Integer, nullable=False),
        sa.Column("min_frequency", sa.Integer, nullable=False),
        sa.Column("special_tokens", sa.Text, nullable=False, server_default="{}"),
        sa.Column("alphabet", sa.Text),
        sa.Column("initial_tokens", sa.Integer, nullable=False),
        sa.Column("final_token_count", sa.Integer, nullable=False),
        sa.Column("training_seconds", sa.Float),
        sa.Column("merge_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("deleted_at", sa.DateTime),
    )
    op.create_index("ix_tokenizers_corpus_id", "tokenizers", ["corpus_id"])
    op.create_index("ix_tokenizers_created_at", "tokenizers", ["created_at"])

    op.create_table(
        "merges",
        sa.Column(
            "tokenizer_id",
            sa.Integer,
            sa.ForeignKey("tokenizers.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("rank", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("left_id", sa.Integer, nullable=False),
        sa.Column("right_id", sa.Integer, nullable=False),
        sa.Column("new_id", sa.Integer, nullable=False),
        sa.Column("pair_count", sa.Integer, nullable=False),
        sa.Column("tokens_after", sa.Integer, nullable=False),
    )
    op.create_index("ix_merges_tokenizer_new_id", "merges", ["tokenizer_id", "new_id"])

    op.create_table(
        "vocab_entries",
        sa.Column(
            "tokenizer_id",
            sa.Integer,
            sa.ForeignKey("tokenizers.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("token_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("token_bytes", sa.LargeBinary, nullable=False),
        sa.Column("display_text", sa.Text, nullable=False),
        sa.Column("hex", sa.Text, nullable=False),
        sa.Column("byte_length", sa.Integer, nullable=False),
        sa.Column("char_length", sa.Integer, nullable=False),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("pair_count", sa.Integer),
        sa.Column("is_special", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("ends_word", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_vocab_tokenizer_category", "vocab_entries", ["tokenizer_id", "category"])
    op.create_index(
        "ix_vocab_tokenizer_byte_length", "vocab_entries", ["tokenizer_id", "byte_length"]
    )

    op.create_table(
        "training_jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id"), nullable=False),
        sa.Column("settings", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("merges_done", sa.Integer, nullable=False, server_default="0"),
        sa.Column("merges_target", sa.Integer),
        sa.Column("current_pair", sa.Text),
        sa.Column("current_count", sa.Integer),
        sa.Column("elapsed_seconds", sa.Float),
        sa.Column("estimate_seconds", sa.Float),
        sa.Column("error", sa.Text),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("heartbeat_at", sa.DateTime),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("started_at", sa.DateTime),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("tokenizer_id", sa.Integer, sa.ForeignKey("tokenizers.id")),
        sa.Column("rerun_of_id", sa.Integer, sa.ForeignKey("training_jobs.id")),
    )
    op.create_index("ix_training_jobs_corpus_id", "training_jobs", ["corpus_id"])
    op.create_index("ix_training_jobs_status", "training_jobs", ["status"])


def downgrade() -> None:
    op.drop_table("training_jobs")
    op.drop_table("vocab_entries")
    op.drop_table("merges")
    op.drop_table("tokenizers")
    op.drop_table("corpora")
