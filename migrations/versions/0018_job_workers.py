"""Every job row says which worker ran it and when its message was last sent.

`sent_at` and `send_count` let a sweep send again a queued job whose message the broker lost;
`worker_host` and `worker_pid` tell an operator where a job ran (or is running).

Revision ID: 0018_job_workers
Revises: 0017_import_jobs
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_job_workers"
down_revision = "0017_import_jobs"
branch_labels = None
depends_on = None

TABLES = ("training_jobs", "evaluations", "import_jobs")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("sent_at", sa.DateTime))
            batch.add_column(
                sa.Column("send_count", sa.Integer, nullable=False, server_default="0")
            )
            batch.add_column(sa.Column("worker_host", sa.String(255)))
            batch.add_column(sa.Column("worker_pid", sa.Integer))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for column in ("worker_pid", "worker_host", "send_count", "sent_at"):
                batch.drop_column(column)
