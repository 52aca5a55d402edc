"""Storage faults: which exceptions mean "the disk is full" or "the database cannot be written",
and what to tell the person (or the job) that hit them.

Requests answer 507 (storage full) or 503 (database not writable, or busy past its timeout);
a training job whose result cannot be stored ends `failed` with the same sentence. Both back
ends are covered: SQLite reports through its result codes, PostgreSQL through SQLSTATEs. The
drivers' own exceptions count as well as SQLAlchemy's wrappers of them: the upload path writes
through the raw connection (SQLite's blob I/O, PostgreSQL's COPY), whose errors SQLAlchemy
never sees (`FAULT_TYPES` are the classes an error page should look at).
"""

from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

try:  # PostgreSQL support is an optional extra
    from psycopg import Error as PsycopgError
except ImportError:  # pragma: no cover - the CI installs every extra
    PsycopgError = None  # type: ignore[assignment,misc]

STORAGE_FULL = (
    "The server's storage is full, so nothing was saved. Try again later; what was already"
    " stored is unchanged."
)
NOT_WRITABLE = (
    "The database cannot be written to right now, so nothing was saved. Pages can still be"
    " viewed; try again later."
)
FILES_NOT_WRITABLE = (
    "The server's storage cannot be written to right now, so nothing was saved. Pages can"
    " still be viewed; try again later."
)
BUSY = "The database stayed busy for too long, so nothing was saved. Please try again."

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_SQLITE_FULL = {sqlite3.SQLITE_FULL}
# SQLITE_IOERR is what a write to a file that cannot be written (an immutable -wal or -shm,
# a folder remounted read-only under a running server) reports; it heals when the file does.
_SQLITE_READONLY = {
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_IOERR,
}
_SQLITE_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_PG_FULL = {"53100", "53200"}  # disk_full, out_of_memory
# read_only_sql_transaction (a hot standby, default_transaction_read_only), cannot_connect_now
PG_READ_ONLY = {"25006", "57P03"}
# Where a storage fault can surface: SQLAlchemy's wrappers, the drivers' own errors (raw
# connection calls), and files (upload temp files, the job runner's lock).
FAULT_TYPES: tuple[type[Exception], ...] = (OSError, DBAPIError, sqlite3.Error) + (
    (PsycopgError,) if PsycopgError is not None else ()
)


@dataclass(frozen=True)
class Fault:
    status: int  # 507 or 503
    message: str


def classify(exc: BaseException) -> Fault | None:
    """The storage fault behind an exception, or None when it is not one."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        fault = _one(link)
        if fault is not None:
            return fault
        link = link.__cause__ or link.__context__
    return None


def _one(exc: BaseException) -> Fault | None:
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return _one(exc.orig)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary in _SQLITE_FULL:
            return Fault(507, STORAGE_FULL)
        if primary in _SQLITE_READONLY:
            return Fault(503, NOT_WRITABLE)
        if primary in _SQLITE_BUSY:
            return Fault(503, BUSY)
        return None
    sqlstate = getattr(exc, "sqlstate", None)  # psycopg 3
    if sqlstate in _PG_FULL:
        return Fault(507, STORAGE_FULL)
    if sqlstate in PG_READ_ONLY:
        return Fault(503, NOT_WRITABLE)
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return Fault(507, STORAGE_FULL)
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return Fault(503, FILES_NOT_WRITABLE)
    return None
