"""Training jobs say which phase they are in.

`training_jobs.phase` (reading, splitting, counting, merging, storing) lets the job page show
where a job is before its first merge.

Revision ID: 0011_job_phases
Revises: 0010_imported_tokenizers
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_job_phases"
down_revision = "0010_imported_tokenizers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.add_column(sa.Column("phase", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_column("phase")
