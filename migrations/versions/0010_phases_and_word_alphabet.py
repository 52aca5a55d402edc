"""Training jobs say which phase they are in.

`training_jobs.phase` (reading, splitting, counting, merging, storing) lets the job page show
where a job is before its first merge.

Revision ID: 0010_phases_and_word_alphabet
Revises: 0009_corpus_previews
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_phases_and_word_alphabet"
down_revision = "0009_corpus_previews"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.add_column(sa.Column("phase", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_column("phase")
