"""Evaluations have an owner: whoever asked for one may cancel it and sees it in the corpus
page's table (the same rules as for training jobs). Rows made before have none.

Revision ID: 0014_evaluation_owners
Revises: 0013_corpus_stats
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_evaluation_owners"
down_revision = "0013_corpus_stats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(
            sa.Column(
                "owner_id", sa.Integer, sa.ForeignKey("owners.id", name="fk_evaluations_owner_id")
            )
        )
        batch.create_index("ix_evaluations_owner_id", ["owner_id"])


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_index("ix_evaluations_owner_id")
        batch.drop_column("owner_id")
