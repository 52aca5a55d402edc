"""Training jobs keep what their page draws while they run: how far splitting has got, the
range of the time left, and the latest merges and curves (webapp/jobs/learning.py).

Revision ID: 0020_job_learning
Revises: 0019_vocab_bytes_index
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_job_learning"
down_revision = "0019_vocab_bytes_index"
branch_labels = None
depends_on = None

COLUMNS = (
    ("estimate_low", sa.Float),
    ("estimate_high", sa.Float),
    ("split_done", sa.Integer),
    ("split_total", sa.Integer),
    ("learning", sa.Text),
)


def upgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind))


def downgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
