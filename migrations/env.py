"""Alembic environment: the app hands us its engine; the command line falls back to DATABASE_URL.

Run through the app: `flask --app webapp db-upgrade` (and the app upgrades itself at start-up).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import pool

from webapp.storage.db import Database
from webapp.storage.models import Base, objects_of

config = context.config
target_metadata = Base.metadata


def _engine():
    engine = config.attributes.get("engine")
    if engine is not None:
        return engine
    url = os.environ.get("DATABASE_URL") or "sqlite:///instance/bpe-workbench.sqlite3"
    return Database(url).write_engine.execution_options(poolclass=pool.NullPool)


def run_migrations_online() -> None:
    with _engine().connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            include_object=objects_of(connection.dialect.name),
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; run db-upgrade")
run_migrations_online()
