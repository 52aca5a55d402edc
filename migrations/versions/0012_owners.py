"""Owners without accounts: an owners table (only each token's SHA-256), who owns each corpus,
tokeniser, job and share, whether others may train on a corpus, and a tokeniser's own name.

Rows made before this revision have no owner: anyone with their link can still view them, and
nobody can change them. The same text is now one corpus per owner (an upload must never hand
out another owner's link), so the unique index on corpora.sha256 becomes (owner_id, sha256).

Revision ID: 0012_owners
Revises: 0011_job_phases
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_owners"
down_revision = "0011_job_phases"
branch_labels = None
depends_on = None

# On SQLite corpora.text stays the last column (uploads stream into a zeroblob placeholder
# there), so the table is rebuilt with the new columns before it rather than altered in place.
CORPUS_ORDER = (
    "id",
    "slug",
    "owner_id",
    "allow_training",
    "name",
    "filename",
    "size_bytes",
    "sha256",
    "char_count",
    "line_count",
    "source_encoding",
    "created_at",
    "deleted_at",
    "text",
)


def upgrade() -> None:
    op.create_table(
        "owners",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    # SQLite rebuilds the table to keep `text` last; PostgreSQL adds the columns in place
    # (it cannot reorder columns, and the streaming placeholder is SQLite's alone).
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        # SQLite rebuilds a table by dropping the old one, which with foreign keys on is a
        # DELETE (refused for rows that point at it, cascading into previews). Its own advice:
        # rebuild with foreign keys off, then check them. The pragma only acts between
        # transactions, so this one is closed and reopened around it.
        bind = op.get_bind()
        bind.exec_driver_sql("COMMIT")
        bind.exec_driver_sql("PRAGMA foreign_keys=OFF")
        bind.exec_driver_sql("BEGIN IMMEDIATE")
    with op.batch_alter_table(
        "corpora",
        recreate="always" if sqlite else "auto",
        partial_reordering=[CORPUS_ORDER] if sqlite else None,
    ) as batch:
        batch.add_column(
            sa.Column(
                "owner_id", sa.Integer, sa.ForeignKey("owners.id", name="fk_corpora_owner_id")
            )
        )
        batch.add_column(
            sa.Column("allow_training", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.drop_index("ix_corpora_sha256")
        batch.create_index("ix_corpora_owner_sha256", ["owner_id", "sha256"])
    with op.batch_alter_table("tokenizers") as batch:
        batch.add_column(
            sa.Column(
                "owner_id", sa.Integer, sa.ForeignKey("owners.id", name="fk_tokenizers_owner_id")
            )
        )
        batch.add_column(sa.Column("name", sa.String(200)))
        batch.create_index("ix_tokenizers_owner_id", ["owner_id"])
    with op.batch_alter_table("training_jobs") as batch:
        batch.add_column(
            sa.Column(
                "owner_id", sa.Integer, sa.ForeignKey("owners.id", name="fk_training_jobs_owner_id")
            )
        )
        batch.create_index("ix_training_jobs_owner_id", ["owner_id"])
    with op.batch_alter_table("playground_shares") as batch:
        batch.add_column(
            sa.Column(
                "owner_id",
                sa.Integer,
                sa.ForeignKey("owners.id", name="fk_playground_shares_owner_id"),
            )
        )
    if sqlite:
        broken = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"rows point at missing rows after rebuilding tables: {broken}")
        bind.exec_driver_sql("COMMIT")
        bind.exec_driver_sql("PRAGMA foreign_keys=ON")
        bind.exec_driver_sql("BEGIN IMMEDIATE")


def downgrade() -> None:
    with op.batch_alter_table("playground_shares") as batch:
        batch.drop_column("owner_id")
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_index("ix_training_jobs_owner_id")
        batch.drop_column("owner_id")
    with op.batch_alter_table("tokenizers") as batch:
        batch.drop_index("ix_tokenizers_owner_id")
        batch.drop_column("name")
        batch.drop_column("owner_id")
    duplicated = op.get_bind().scalar(
        sa.text(
            "SELECT COUNT(*) FROM"
            " (SELECT sha256 FROM corpora GROUP BY sha256 HAVING COUNT(*) > 1) d"
        )
    )
    # Several owners' copies of one text cannot share the old unique index; rather than delete
    # anyone's corpus, the index comes back non-unique then (the old code reads the first).
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("corpora", recreate="always" if sqlite else "auto") as batch:
        batch.drop_index("ix_corpora_owner_sha256")
        batch.drop_column("allow_training")
        batch.drop_column("owner_id")
        batch.create_index("ix_corpora_sha256", ["sha256"], unique=not duplicated)
    op.drop_table("owners")
