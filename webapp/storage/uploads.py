"""Uploads: stream a body to a temporary file as normalised UTF-8, then store it as a corpus.

The body is read in chunks and never held whole in memory: each chunk is decoded strictly,
re-encoded as UTF-8, hashed and written to a temporary file under the instance folder. Only a
fully valid upload reaches the database, in one transaction; the temporary file is removed on
every path (success, refusal, dropped connection).

Rules: a UTF-8 BOM is stripped; UTF-16 or UTF-32 with a BOM is transcoded; anything else must
be UTF-8, or it is refused with the byte offset of the first bad byte; an empty text and a text
with NUL characters (a binary file, and PostgreSQL cannot store it) are refused too.

The stored text is then copied from the file into the row in chunks, so a 100 MB corpus never
sits in the web process's memory whole: on SQLite by incremental blob I/O into a zero-filled
blob, on PostgreSQL by COPY into a temporary table that the INSERT then reads from.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import fcntl
import hashlib
import os
import tempfile
import unicodedata
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from sqlalchemy import ColumnElement, ScalarSelect, column, func, insert, select, table
from sqlalchemy.orm import Session

from webapp.refusals import UserError, human_bytes
from webapp.storage import faults
from webapp.storage.db import Database
from webapp.storage.models import Corpus, CorpusPreview, CorpusStats, utcnow
from webapp.storage.slugs import new_slug

CHUNK = 1024 * 1024
PREVIEW_CHARS = 2000  # characters of a corpus shown on its page, stored with the upload
# Longest BOM first: UTF-32-LE's BOM starts with UTF-16-LE's.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class UploadTooLarge(UserError):
    status = 413


class ConnectionDropped(UserError):
    status = 400

    def __init__(
        self,
        message: str = "The upload ended before all its bytes arrived; nothing"
        " was stored. Please try again.",
    ) -> None:
        super().__init__(message)


class ByteReader(Protocol):
    """What an upload is read from: a request body, an uploaded file, a CountingReader."""

    def read(self, size: int = -1, /) -> bytes: ...

    def tell(self) -> int: ...  # bytes read so far, to notice a body cut short


class CountingReader:
    """Wraps a body stream and counts what was read (to notice a body cut short)."""

    def __init__(self, stream: ByteReader) -> None:
        self._stream = stream
        self._count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._count += len(data)
        return data

    def tell(self) -> int:
        return self._count


@dataclass
class NormalizedText:
    """A validated upload waiting in a temporary file as UTF-8 (no BOM)."""

    path: str
    size_bytes: int  # of the UTF-8 text
    sha256: str  # of the UTF-8 text
    char_count: int
    line_count: int
    source_encoding: str
    preview: str = ""  # the first PREVIEW_CHARS characters
    lock_fd: int = -1  # held open with an exclusive flock until discarded (see remove_leftovers)
    word_alphabet_size: int = 0  # distinct characters outside whitespace (CorpusStats)

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


TMP_PREFIX = "upload-"


def normalize_stream(stream: ByteReader, *, limit: int, tmp_dir: str) -> NormalizedText:
    """Validate and normalise a byte stream into a temporary UTF-8 file (caller discards it)."""
    os.makedirs(tmp_dir, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".txt", dir=tmp_dir)
    try:
        # The lock says "in use" to remove_leftovers; the kernel drops it when this process dies.
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(fd, "wb", closefd=False) as out:
            result = _normalize_into(stream, out, limit=limit)
        result.path, result.lock_fd = path, fd
        return result
    except BaseException:
        os.unlink(path)
        os.close(fd)
        raise


def remove_leftovers(tmp_dir: str) -> int:
    """Delete upload temp files that no live process holds (a killed server left them).

    Returns how many went. A file still locked belongs to an upload in progress elsewhere. On
    read-only media they stay (the server still starts).
    """
    removed = 0
    try:
        names = os.listdir(tmp_dir)
    except FileNotFoundError:
        return 0
    for name in names:
        if not name.startswith(TMP_PREFIX):
            continue
        path = os.path.join(tmp_dir, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        else:
            try:
                os.unlink(path)
                removed += 1
            except FileNotFoundError:
                pass
            except OSError as exc:
                if faults.classify(exc) is None:
                    raise
                return removed  # a read-only folder: the next start-up with write access will
        finally:
            os.close(fd)
    return removed


def _normalize_into(stream: ByteReader, out: BinaryIO, *, limit: int) -> NormalizedText:
    head = _read_at_least(stream, 4)
    encoding, bom = "utf-8", b""
    for candidate, name in BOMS:
        if head.startswith(candidate):
            encoding, bom = name, candidate
            break
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    digest = hashlib.sha256()
    raw_total = len(head)  # bytes of the upload read so far, BOM included
    fed = len(bom)  # raw offset of the first byte not yet given to the decoder
    size = chars = newlines = 0
    last_char = preview = ""
    seen: set[str] = set()  # at most every character Unicode has, whatever the upload's size
    chunk = head[len(bom) :]
    while True:
        final = not chunk
        if raw_total > limit:
            raise UploadTooLarge(f"The file is larger than the limit of {human_bytes(limit)}.")
        pending = len(decoder.getstate()[0])
        try:
            text = decoder.decode(chunk, final=final)
        except UnicodeDecodeError as exc:
            offset = fed - pending + exc.start
            raise UserError(_bad_bytes_message(encoding, offset, exc)) from None
        if "\x00" in text:
            offset = fed - pending + len(text[: text.index("\x00")].encode(encoding))
            utf16 = _utf16_without_bom(chunk) if not bom else None
            if utf16 is not None:
                raise UserError(
                    f"The file looks like {utf16} without a byte-order mark (every other byte"
                    " is 0). Save it as UTF-8, or as UTF-16 with a byte-order mark, and upload"
                    " it again."
                )
            raise UserError(
                f"The text contains a NUL character (near byte offset {offset}); this looks like"
                " a binary file, not a text corpus."
            )
        fed += len(chunk)
        if text:
            encoded = text.encode("utf-8")
            out.write(encoded)
            digest.update(encoded)
            size += len(encoded)
            chars += len(text)
            newlines += text.count("\n")
            seen.update(text)
            last_char = text[-1]
            if len(preview) < PREVIEW_CHARS:
                preview += text[: PREVIEW_CHARS - len(preview)]
        if final:
            break
        chunk = _read(stream)
        raw_total += len(chunk)
    if size == 0:
        raise UserError("The text is empty; upload a file or paste some text with content.")
    lines = newlines + (0 if last_char == "\n" else 1)
    alphabet = sum(1 for c in seen if not c.isspace())
    return NormalizedText(
        "", size, digest.hexdigest(), chars, lines, encoding, preview, word_alphabet_size=alphabet
    )


def _read(stream: ByteReader) -> bytes:
    try:
        return stream.read(CHUNK)
    except OSError as exc:  # the client went away mid-body (or a spooled form hit a full disk)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise ConnectionDropped() from None


def _read_at_least(stream: ByteReader, n: int) -> bytes:
    data = b""
    while len(data) < n:
        piece = _read(stream)
        if not piece:
            break
        data += piece
    return data


def _utf16_without_bom(raw: bytes) -> str | None:
    """UTF-16LE or BE if the bytes look like mostly-ASCII text in it: a NUL in every odd (LE)
    or every even (BE) position of the first 64 bytes, and none in the others.

    >>> _utf16_without_bom("hello world".encode("utf-16-le")), _utf16_without_bom(b"ab\\0\\0cd")
    ('UTF-16LE', None)
    """
    sample = raw[:64] if len(raw) >= 64 else raw[: len(raw) // 2 * 2]
    if len(sample) < 8:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) == len(odd) and even.count(0) == 0:
        return "UTF-16LE"
    if even.count(0) == len(even) and odd.count(0) == 0:
        return "UTF-16BE"
    return None


def _bad_bytes_message(encoding: str, offset: int, exc: UnicodeDecodeError) -> str:
    bad = exc.object[exc.start : exc.end][:4].hex(" ")
    if encoding == "utf-8":
        return (
            f"The file is not valid UTF-8: the first bad byte is at byte offset {offset}"
            f" (0x{bad}). Save it as UTF-8 (or UTF-16/UTF-32 with a byte-order mark) and"
            " upload it again."
        )
    return (
        f"The file starts with a {encoding.upper()} byte-order mark but is not valid"
        f" {encoding.upper()}: the first bad byte is at byte offset {offset} (0x{bad})."
    )


# ----- storing -------------------------------------------------------------------------------
def clean_display(value: str | None, *, max_length: int) -> str:
    """A user-supplied filename fit for display: no folders, no control characters (a corpus's
    name is cleaned by `webapp.storage.manage.clean_name`, which keeps its slashes)."""
    if not value:
        return ""
    value = value.replace("\\", "/").rsplit("/", 1)[-1]
    value = "".join(c for c in value if unicodedata.category(c)[0] != "C")
    return value.strip()[:max_length]


def store_corpus(
    database: Database,
    upload: NormalizedText,
    *,
    name: str,
    filename: str | None,
    owner_id: int | None = None,
) -> tuple[Corpus, bool]:
    """Store the upload as a corpus, or reuse this owner's row with the same text.
    -> (row, created). Another owner's copy is never reused: its link is theirs to give."""
    with database.session_scope() as session:
        existing = session.scalar(
            select(Corpus)
            .where(Corpus.sha256 == upload.sha256, _same_owner(owner_id))
            .order_by(Corpus.id)
            .limit(1)
        )
        if existing is not None:
            if existing.deleted_at is not None:
                # Uploading deleted text again brings it back, under a new link.
                existing.deleted_at = None
                existing.slug = new_slug()
                existing.created_at = utcnow()
            if session.get(CorpusStats, existing.id) is None:  # stored before anything counted
                session.add(_stats(existing.id, upload))
            return existing, False
        # A Core insert: the ORM would fetch the SQL-computed text back (RETURNING), in memory.
        corpus_id = session.execute(
            insert(Corpus)
            .values(
                slug=new_slug(),
                owner_id=owner_id,
                allow_training=False,
                name=name,
                filename=filename,
                size_bytes=upload.size_bytes,
                sha256=upload.sha256,
                text=_placeholder(database, session, upload),
                char_count=upload.char_count,
                line_count=upload.line_count,
                source_encoding=upload.source_encoding,
                created_at=utcnow(),
            )
            .returning(Corpus.id)
        ).scalar_one()
        if database.is_sqlite:
            _stream_into_blob(session, corpus_id, upload)
        session.add(CorpusPreview(corpus_id=corpus_id, text=upload.preview))
        session.add(_stats(corpus_id, upload))
        session.flush()
        return session.get_one(Corpus, corpus_id), True


def _stats(corpus_id: int, upload: NormalizedText) -> CorpusStats:
    return CorpusStats(corpus_id=corpus_id, word_alphabet_size=upload.word_alphabet_size)


def _same_owner(owner_id: int | None) -> ColumnElement[bool]:
    return Corpus.owner_id.is_(None) if owner_id is None else Corpus.owner_id == owner_id


def _placeholder(
    database: Database, session: Session, upload: NormalizedText
) -> ColumnElement[bytes] | ScalarSelect[str]:
    """What the INSERT puts in `text`. SQLite: a zero-filled blob of the right size that
    `_stream_into_blob` then fills from the file, so neither Python nor SQLite ever holds the
    whole text. PostgreSQL: the text COPYed in chunks into a temporary table, read from there."""
    if database.is_sqlite:
        return func.zeroblob(upload.size_bytes)
    _copy_into_upload_table(session, upload)
    return select(_UPLOAD_TEXT.c.text).scalar_subquery()


# PostgreSQL: one row of one column, dropped with the transaction that stores the corpus.
_UPLOAD_TEXT = table("upload_text", column("text"))
_COPY_ESCAPES = ((b"\\", b"\\\\"), (b"\n", b"\\n"), (b"\r", b"\\r"), (b"\t", b"\\t"))


def _copy_into_upload_table(session: Session, upload: NormalizedText) -> None:
    """COPY's text format, written a chunk at a time: the only bytes it treats specially are
    backslash, newline, carriage return and tab, each escaped by a backslash. All are ASCII, and
    no byte of a multi-byte UTF-8 character is ASCII, so chunks can be cut anywhere."""
    connection = session.connection()
    connection.exec_driver_sql("CREATE TEMPORARY TABLE upload_text (text text) ON COMMIT DROP")
    raw = connection.connection.driver_connection  # psycopg 3
    assert raw is not None  # a live connection of this session's transaction
    cursor = raw.cursor()  # psycopg's, same transaction
    with (
        cursor.copy("COPY upload_text (text) FROM STDIN") as copy,
        open(upload.path, "rb") as src,
    ):
        while chunk := src.read(CHUNK):
            for special, escaped in _COPY_ESCAPES:
                chunk = chunk.replace(special, escaped)
            copy.write(chunk)
        copy.write(b"\n")  # the end of the one row


def _stream_into_blob(session: Session, corpus_id: int, upload: NormalizedText) -> None:
    connection = session.connection().connection.driver_connection  # the sqlite3 connection
    assert connection is not None  # a live connection of this session's transaction
    with connection.blobopen("corpora", "text", corpus_id) as blob, open(upload.path, "rb") as src:
        while chunk := src.read(CHUNK):
            blob.write(chunk)


def store_text(
    database: Database,
    text: str,
    *,
    name: str,
    filename: str | None = None,
    tmp_dir: str,
    owner_id: int | None = None,
) -> tuple[Corpus, bool]:
    """Validate and store a str (pasted text, tests); same rules and path as a file upload."""
    import io

    upload = normalize_stream(
        io.BytesIO(text.encode("utf-8")), limit=len(text) * 4 + 1, tmp_dir=tmp_dir
    )
    try:
        return store_corpus(database, upload, name=name, filename=filename, owner_id=owner_id)
    finally:
        upload.discard()
