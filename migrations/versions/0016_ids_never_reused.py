"""Job and evaluation ids are never handed out twice on SQLite.

Their ids are in their URLs (`/c/<corpus>/jobs/<id>`), and deleting a tokeniser deletes the job
that made it. Without AUTOINCREMENT SQLite gives a new row the largest id in use plus one, so
after the newest job was deleted the next job on the same corpus got its id, and a link to the
deleted job led to someone else's. AUTOINCREMENT keeps the largest id ever used. PostgreSQL's
sequences never reuse an id, so there this revision does nothing.

Revision ID: 0016_ids_never_reused
Revises: 0015_tokenizer_documents
Create Date: 2026-12-01
"""

from alembic import op

revision = "0016_ids_never_reused"
down_revision = "0015_tokenizer_documents"
branch_labels = None
depends_on = None

TABLES = ("training_jobs", "evaluations")


def upgrade() -> None:
    _rebuild(autoincrement=True)


def downgrade() -> None:
    _rebuild(autoincrement=False)


def _rebuild(*, autoincrement: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    # Rebuilding drops the old table, which with foreign keys on is a DELETE of its rows (and
    # of what cascades from them): rebuild with them off, then check them, as 0012 does. The
    # pragma acts only between transactions.
    bind.exec_driver_sql("COMMIT")
    bind.exec_driver_sql("PRAGMA foreign_keys=OFF")
    bind.exec_driver_sql("BEGIN IMMEDIATE")
    for table in TABLES:
        with op.batch_alter_table(
            table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
        ):
            pass
    broken = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"rows point at missing rows after rebuilding tables: {broken}")
    bind.exec_driver_sql("COMMIT")
    bind.exec_driver_sql("PRAGMA foreign_keys=ON")
    bind.exec_driver_sql("BEGIN IMMEDIATE")
