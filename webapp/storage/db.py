"""The one place that talks to the database: engines, the request session, the write path.

- Requests read through `db.session` (a scoped session, removed when the app context ends).
- Every write goes through `session_scope()`: one transaction, committed or rolled back as a
  whole. On SQLite it starts with BEGIN IMMEDIATE, so a writer takes the write lock up front
  (waiting up to the busy timeout) instead of upgrading a read lock half-way, the case that
  fails at once with "database is locked". On PostgreSQL a transaction-scoped advisory lock
  gives writes the same one-at-a-time order, so both back ends behave alike.
- The schema comes only from the Alembic migrations in `migrations/`.
- A SQLite file on read-only media (its folder remounted read-only, the files made immutable)
  is still read: SQLite cannot open a WAL database there without its -shm file, so such a
  connection opens it immutable (or read-only when a -wal is left to be read), and writes are
  refused with SQLITE_READONLY (503, webapp/storage/faults.py). Once the file can be written
  again, the pool drops those connections at their next checkout: no restart needed.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy import CursorResult, create_engine, event
from sqlalchemy.engine import Connection, Engine, ExceptionContext
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, scoped_session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.sql.dml import Update

from webapp.storage import faults

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
_WRITE_LOCK_KEY = 4_242_001  # PostgreSQL advisory lock id for the write path


def normalize_url(url: str) -> str:
    """Accept the URLs hosting platforms hand out (`postgres://`) and pick psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Database:
    """Engines and session factories for one database URL; shared by requests and the runner."""

    def __init__(self, url: str, *, busy_timeout: float = 30.0) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self.engine = _make_engine(self.url, busy_timeout)
        # Same pool, but connections taken through it begin as writers (see module docstring).
        self.write_engine = self.engine.execution_options(bpe_write=True)
        self.session = scoped_session(sessionmaker(bind=self.engine, expire_on_commit=False))
        self._writer = sessionmaker(bind=self.write_engine, expire_on_commit=False)
        self._reader = sessionmaker(bind=self.engine, expire_on_commit=False)

    @contextmanager
    def session_scope(self) -> Iterator[Session]:
        """The write path: one transaction, committed when the block ends, rolled back on error."""
        session = self._writer()
        try:
            yield session
            session.commit()
            self._end_read_snapshot()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def _end_read_snapshot(self) -> None:
        """After a write, let this thread's read session see it: on SQLite a read transaction
        keeps the snapshot of its first SELECT, so a request that looked up its owner before
        storing a corpus would answer with the corpus's stats missing. The read session never
        holds changes of its own (writes go through `session_scope`), so ending it loses nothing."""
        if not self.session.registry.has():
            return
        reader = self.session()
        if reader.in_transaction() and not (reader.new or reader.dirty or reader.deleted):
            reader.commit()

    @contextmanager
    def read_scope(self) -> Iterator[Session]:
        """A short read-only session for code outside a request (the job runner)."""
        session = self._reader()
        try:
            yield session
        finally:
            session.close()  # ends the transaction; loaded objects stay readable, detached

    def ping(self) -> None:
        """Raise (an OperationalError) unless the database answers a query now."""
        with self.engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")

    def dispose(self) -> None:
        self.session.remove()
        self.engine.dispose()


def execute_update(session: Session, statement: Update) -> CursorResult[Any]:
    """Run an UPDATE and give its result, whose rowcount says how many rows it changed.

    Session.execute is typed for SELECTs; an UPDATE's result is a CursorResult."""
    return cast(CursorResult[Any], session.execute(statement))


def _pg_connect_args(url: str) -> dict[str, Any]:
    return {"prepare_threshold": None} if url.startswith("postgresql+psycopg") else {}


def _make_engine(url: str, busy_timeout: float) -> Engine:
    if not url.startswith("sqlite"):
        # No server-side prepared statements (psycopg prepares a query after 5 runs): their
        # generic plan ignores which tokeniser is asked for, and one import's 446,000 merges
        # beside tokenisers of a few hundred made it a plan for the small ones, minutes long.
        engine = create_engine(url, pool_pre_ping=True, connect_args=_pg_connect_args(url))

        @event.listens_for(engine, "begin")
        def _pg_begin(conn: Connection) -> None:
            if conn.get_execution_options().get("bpe_write"):
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_WRITE_LOCK_KEY})")

        @event.listens_for(engine, "handle_error")
        def _pg_read_only(context: ExceptionContext) -> None:
            # Read-only is a session's setting, fixed when it connects (a hot standby, or
            # default_transaction_read_only): such a connection stays read-only after the
            # database is writable again, so the pool lets it go rather than keep it.
            if getattr(context.original_exception, "sqlstate", None) in faults.PG_READ_ONLY:
                context.is_disconnect = True

        return engine

    path = sqlite_path(url)
    if path is not None and not read_only_media(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": busy_timeout, "check_same_thread": False})

    if path is not None and "?" not in url:  # a plain file path; URLs with options are left alone

        @event.listens_for(engine, "do_connect")
        def _sqlite_open(
            _dialect: object, record: ConnectionPoolEntry, cargs: list[Any], cparams: dict[str, Any]
        ) -> None:
            if not read_only_media(path):
                return
            # No -wal to replay: nothing can change the file while it is read-only, so SQLite
            # may skip the locks and the -shm it cannot create. A -wal left behind holds pages
            # the file lacks, and is read through its -shm (which then exists) instead.
            wal = Path(f"{path}-wal")
            option = "mode=ro" if wal.exists() and wal.stat().st_size else "immutable=1"
            cargs[0] = f"file:{path}?{option}"
            cparams["uri"] = True
            record.info["bpe_read_only"] = True

        @event.listens_for(engine, "checkout")
        def _sqlite_heal(
            _dbapi: sqlite3.Connection, record: ConnectionPoolEntry, _proxy: object
        ) -> None:
            if record.info.get("bpe_read_only") and not read_only_media(path):
                raise DisconnectionError("the database file can be written again")  # reconnect

    @event.listens_for(engine, "connect")
    def _sqlite_connect(dbapi_connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself instead of pysqlite's implicit one.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("bpe_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


# ----- migrations -------------------------------------------------------------------------------
def _alembic_config(database: Database) -> AlembicConfig:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["engine"] = database.write_engine
    return config


def upgrade(database: Database, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(_alembic_config(database), revision)


def downgrade(database: Database, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(_alembic_config(database), revision)


def current_revision(database: Database) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with database.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


# ----- Flask wiring -----------------------------------------------------------------------------
class DatabaseCorrupt(SystemExit):
    """Start-up stops: the SQLite file fails its integrity check. A SystemExit, so the process
    ends with this one line on stderr rather than a traceback."""


def check_sqlite_file(url: str) -> None:
    """`PRAGMA quick_check` on an existing SQLite file; raises DatabaseCorrupt naming it."""
    path = sqlite_path(url)
    if path is None or not path.exists() or path.stat().st_size == 0:
        return
    try:
        # Straight through sqlite3, read-only: no WAL set-up or migration touches a bad file.
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code not in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return  # cannot even be opened (permissions, a read-only folder): not corruption
        problems = [str(exc)]
    if problems != ["ok"]:
        detail = " ".join("; ".join(problems).split())[:300]  # one line, whatever SQLite said
        raise DatabaseCorrupt(
            f"bpe-workbench: the database file {path} is corrupt ({detail})."
            " Restore it from a backup, or move it away to start with an empty database."
        )


def read_only_media(path: Path) -> bool:
    """The SQLite file (or, when it does not exist yet, its folder) cannot be written: a
    read-only mount, or an immutable file (access(2) refuses those even to root)."""
    try:
        if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            return True
    except FileNotFoundError:
        return False
    return path.exists() and not os.access(path, os.W_OK)


def sqlite_path(url: str) -> Path | None:
    if url.startswith("sqlite:///") and ":memory:" not in url:
        return Path(url[len("sqlite:///") :].split("?", 1)[0])
    return None


def init_app(app: Flask) -> Database:
    check_sqlite_file(app.config["DATABASE_URL"])
    database = Database(app.config["DATABASE_URL"], busy_timeout=app.config["SQLITE_BUSY_TIMEOUT"])
    app.extensions["bpe_db"] = database
    if app.config["AUTO_MIGRATE"]:
        upgrade(database)
    app.teardown_appcontext(lambda _exc: database.session.remove())
    app.cli.add_command(db_upgrade_command)
    app.cli.add_command(db_downgrade_command)
    return database


def get_db() -> Database:
    return current_app.extensions["bpe_db"]


def session() -> Session:
    """The request's read session (a scoped session; removed on teardown)."""
    return get_db().session()


def session_scope() -> AbstractContextManager[Session]:
    return get_db().session_scope()


@click.command("db-upgrade")
@click.argument("revision", default="head")
@with_appcontext
def db_upgrade_command(revision: str) -> None:
    """Create or upgrade the database schema to REVISION (default: the latest)."""
    database = get_db()
    upgrade(database, revision)
    click.echo(f"database at {_safe_url(database.url)} is at revision {current_revision(database)}")


@click.command("db-downgrade")
@click.argument("revision")
@with_appcontext
def db_downgrade_command(revision: str) -> None:
    """Downgrade the database schema to REVISION (`base` drops every table)."""
    database = get_db()
    downgrade(database, revision)
    click.echo(f"database is at revision {current_revision(database)}")


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


__all__ = ["Database", "downgrade", "get_db", "init_app", "session", "session_scope", "upgrade"]
