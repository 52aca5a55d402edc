"""Imported tokenisers (tiktoken and HF files, kept with their own ids) and evaluations.

A tokeniser row may now have no corpus and no training record: it was imported. It keeps the
source file's name and SHA-256, its encoding rule and (HF) pre-tokenizer; merges derived for
display have no pair counts. An evaluation is one tokeniser measured on one corpus, run as a
background job with progress.

Revision ID: 0010_imported_tokenizers
Revises: 0009_corpus_previews
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_imported_tokenizers"
down_revision = "0009_corpus_previews"
branch_labels = None
depends_on = None

TRAINING_COLUMNS = (
    ("trainer", sa.String(16)),
    ("vocab_size_requested", sa.Integer()),
    ("min_frequency", sa.Integer()),
    ("initial_tokens", sa.Integer()),
    ("final_token_count", sa.Integer()),
)


def upgrade() -> None:
    with op.batch_alter_table("tokenizers") as batch:
        batch.alter_column("corpus_id", existing_type=sa.Integer(), nullable=True)
        for name, kind in TRAINING_COLUMNS:
            batch.alter_column(name, existing_type=kind, nullable=True)
        batch.add_column(sa.Column("source_format", sa.String(16)))
        batch.add_column(sa.Column("source_filename", sa.String(255)))
        batch.add_column(sa.Column("source_sha256", sa.String(64)))
        batch.add_column(sa.Column("source_name", sa.String(100)))
        batch.add_column(
            sa.Column("encode_rule", sa.String(16), nullable=False, server_default="merges")
        )
        batch.add_column(sa.Column("pre_tokenizer", sa.Text))
        batch.add_column(
            sa.Column("ignore_merges", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("id_limit", sa.Integer))
        # Set only by `flask import-references`: "GPT-2", "GPT-4", "GPT-4o".
        batch.add_column(sa.Column("reference", sa.String(32)))
        batch.create_index("ix_tokenizers_source_sha256", ["source_sha256"])
    with op.batch_alter_table("merges") as batch:
        batch.alter_column("pair_count", existing_type=sa.Integer(), nullable=True)
        batch.alter_column("tokens_after", existing_type=sa.Integer(), nullable=True)

    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "tokenizer_id",
            sa.Integer,
            sa.ForeignKey("tokenizers.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "corpus_id", sa.Integer, sa.ForeignKey("corpora.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("chars_done", sa.Integer, nullable=False, server_default="0"),
        sa.Column("chars_total", sa.Integer, nullable=False, server_default="0"),
        sa.Column("error", sa.Text),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("heartbeat_at", sa.DateTime),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("started_at", sa.DateTime),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("byte_count", sa.Integer),
        sa.Column("characters", sa.Integer),
        sa.Column("words", sa.Integer),
        sa.Column("tokens", sa.Integer),
        sa.Column("vocab_size", sa.Integer),
        sa.Column("used", sa.Integer),
        sa.Column("bytes_per_token", sa.Float),
        sa.Column("seconds", sa.Float),
        sa.Column("never_used", sa.LargeBinary),  # ids as little-endian uint32
        sa.Column("longest", sa.Text),  # JSON [[id, count], ...]
    )
    op.create_index(
        "ix_evaluations_corpus_tokenizer", "evaluations", ["corpus_id", "tokenizer_id"], unique=True
    )


def downgrade() -> None:
    op.drop_index("ix_evaluations_corpus_tokenizer", table_name="evaluations")
    op.drop_table("evaluations")
    op.execute("DELETE FROM merges WHERE pair_count IS NULL")
    with op.batch_alter_table("merges") as batch:
        batch.alter_column("pair_count", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("tokens_after", existing_type=sa.Integer(), nullable=False)
    op.execute(
        "DELETE FROM vocab_entries WHERE tokenizer_id IN "
        "(SELECT id FROM tokenizers WHERE source_format IS NOT NULL)"
    )
    op.execute(
        "DELETE FROM playground_shares WHERE tokenizer_id IN "
        "(SELECT id FROM tokenizers WHERE source_format IS NOT NULL)"
    )
    op.execute("DELETE FROM tokenizers WHERE source_format IS NOT NULL")
    with op.batch_alter_table("tokenizers") as batch:
        batch.drop_index("ix_tokenizers_source_sha256")
        for column in (
            "reference",
            "id_limit",
            "ignore_merges",
            "pre_tokenizer",
            "encode_rule",
            "source_name",
            "source_sha256",
            "source_filename",
            "source_format",
        ):
            batch.drop_column(column)
        for name, kind in TRAINING_COLUMNS:
            batch.alter_column(name, existing_type=kind, nullable=False)
        batch.alter_column("corpus_id", existing_type=sa.Integer(), nullable=False)
