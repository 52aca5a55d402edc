"""Storage faults: which exceptions mean "the disk is full" or "the database cannot be written",
and what to tell the person (or the job) that hit them.

Requests answer 507 (storage full) or 503 (database not writable, or busy past its timeout);
a training job whose result cannot be stored ends `failed` with the same sentence. Both back
ends are covered: SQLite reports through its result codes, PostgreSQL through SQLSTATEs.
"""

from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

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
_SQLITE_READONLY = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM}
_SQLITE_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_PG_FULL = {"53100", "53200"}  # disk_full, out_of_memory
_PG_READONLY = {"25006", "57P03"}  # read_only_sql_transaction, cannot_connect_now


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
    if sqlstate in _PG_READONLY:
        return Fault(503, NOT_WRITABLE)
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return Fault(507, STORAGE_FULL)
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return Fault(503, FILES_NOT_WRITABLE)
    return None
