"""The one module that turns a `bpe.Tokenizer` into rows and rows back into one.

`store_tokenizer` (trained here) and `store_imported` (a tiktoken or HF file) write the
tokeniser, its merges and its whole vocabulary with the caller's session, so they land in the
caller's single transaction. The row's `document` is the tokeniser's header as the file format
writes it (`bpe.formats.header_dict`) and its merge and vocabulary rows are the bulk; the other
columns are copies for SQL, filled by `row_columns` alone. `load_tokenizer` rebuilds the library
object from the document and the rows through `bpe.formats.from_parts`, the file's own checks,
and refuses a damaged row with `StoredTokenizerError`; tokenisers never change, so it is cached
by slug. An imported tokeniser's ordinary tokens are its vocabulary rows that are not only
special (`is_special` false), with the file's ids.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

import bpe
import bpe.formats
from bpe.token_info import text_category
from webapp.refusals import UserError
from webapp.storage.models import Merge, Tokenizer, VocabEntry
from webapp.storage.slugs import new_slug

log = logging.getLogger(__name__)

_BATCH = 5000  # rows per executemany; keeps parameter lists small on both back ends
ANALYZE_AFTER_ROWS = 20_000  # merges + vocabulary rows of one tokeniser


def final_token_count(tok: bpe.Tokenizer) -> int:
    """Tokens in the training corpus after the last merge (special tokens aside)."""
    stats = tok.training
    if stats is None:
        raise ValueError("the tokeniser has no training record; store only freshly trained ones")
    return stats.tokens_after[-1] if stats.tokens_after else stats.initial_tokens


def store_tokenizer(
    session: Session, tok: bpe.Tokenizer, *, corpus_id: int, owner_id: int | None = None
) -> Tokenizer:
    """Add the tokeniser, its merges and vocabulary rows to `session` (flushed, not committed)."""
    if tok.training is None:
        raise ValueError("the tokeniser has no training record; store only freshly trained ones")
    return _store(session, tok, corpus_id=corpus_id, owner_id=owner_id)


def store_imported(
    session: Session, tok: bpe.Tokenizer, *, owner_id: int | None = None
) -> Tokenizer:
    """Add an imported tokeniser (no corpus, no training) and its rows to `session`."""
    if tok.source is None or tok.tokens is None:
        raise ValueError("only imported tokenisers (bpe.importers) are stored this way")
    return _store(session, tok, corpus_id=None, owner_id=owner_id)


def _store(
    session: Session, tok: bpe.Tokenizer, *, corpus_id: int | None, owner_id: int | None
) -> Tokenizer:
    row = Tokenizer(
        slug=new_slug(),
        corpus_id=corpus_id,
        owner_id=owner_id,
        **row_columns(tok, bpe.formats.header_dict(tok)),
    )
    session.add(row)
    session.flush()  # assigns row.id
    if not _insert_merges_packed(session, tok, row.id):
        _insert_batched(session, Merge, MERGE_COLUMNS, merge_rows(tok, row.id))
    _insert_batched(session, VocabEntry, VOCAB_COLUMNS, vocab_rows(tok, row.id))
    _analyze_if_large(session, len(tok.merges) + tok.vocab_size)
    return row


def _analyze_if_large(session: Session, rows: int) -> None:
    """PostgreSQL: fresh statistics once a tokeniser adds many rows. Planned on statistics
    from before a 446,000-merge import, a vocabulary page of that import took a nested loop of
    minutes, until autovacuum's next analyze; ANALYZE counts this transaction's own rows."""
    if rows >= ANALYZE_AFTER_ROWS and session.get_bind().dialect.name == "postgresql":
        session.execute(text("ANALYZE merges, vocab_entries"))


def row_columns(tok: bpe.Tokenizer, header: dict[str, Any]) -> dict[str, Any]:
    """The `tokenizers` row's values: `document`, the header loading reads, and the columns SQL
    filters, sorts and pages on, copied from it (the counts from the bulk). Columns of the other
    kind stay null: training's for an import, the source's for a tokeniser trained here."""
    columns: dict[str, Any] = {
        "document": json.dumps(header, ensure_ascii=False, separators=(",", ":")),
        "mode": header["mode"],
        "pattern": header["pattern"],
        "vocab_size": tok.vocab_size,
        "special_tokens": json.dumps(header["special_tokens"], ensure_ascii=False),
        "alphabet": None
        if header["alphabet"] is None
        else json.dumps(header["alphabet"], ensure_ascii=False),
        "merge_count": len(tok.merges),
    }
    source = header.get("source")
    if source is not None:
        pre = header["pre_tokenizer"]
        return columns | {
            "source_format": source["format"],
            "source_filename": source["filename"][:255],
            "source_sha256": source["sha256"],
            "source_name": None if source["name"] is None else source["name"][:100],
            "encode_rule": header["rule"],
            "pre_tokenizer": None if pre is None else json.dumps(pre, ensure_ascii=False),
            "ignore_merges": header["ignore_merges"],
            "id_limit": tok.id_limit,
        }
    training = header["training"]
    return columns | {
        "trainer": training["trainer"],
        "vocab_size_requested": training["vocab_size"],
        "min_frequency": training["min_frequency"],
        "initial_tokens": training["initial_tokens"],
        "final_token_count": final_token_count(tok),
        "training_seconds": training["seconds"],
    }


MERGE_COLUMNS = (
    "tokenizer_id",
    "rank",
    "left_id",
    "right_id",
    "new_id",
    "pair_count",
    "tokens_after",
)
VOCAB_COLUMNS = (
    "tokenizer_id",
    "token_id",
    "token_bytes",
    "display_text",
    "hex",
    "byte_length",
    "char_length",
    "category",
    "pair_count",
    "is_special",
    "ends_word",
)


def merge_rows(tok: bpe.Tokenizer, tokenizer_id: int) -> list[tuple]:
    """One tuple per merge, in MERGE_COLUMNS order."""
    stats = tok.training
    if stats is None and not tok.imported:
        # each stored merge keeps its count: only a trained tokeniser is stored so
        raise ValueError("a tokeniser without its training record cannot be stored")
    if stats is None:
        return [
            (tokenizer_id, rank, left, right, new, None, None)
            for rank, (left, right, new) in enumerate(tok.merges)
        ]
    counts, after = stats.merge_counts, stats.tokens_after
    return [
        (tokenizer_id, rank, left, right, new, counts[rank], after[rank])
        for rank, (left, right, new) in enumerate(tok.merges)
    ]


def vocab_rows(tok: bpe.Tokenizer, tokenizer_id: int) -> list[tuple]:
    """One tuple per id (VOCAB_COLUMNS order), base ids included; what the vocabulary browser
    filters and sorts on. Tuples, not dicts: an imported o200k_base is 200,000 of them.

    An id that is both a special token and an ordinary one (HF files list e.g. GPT-2's
    `<|endoftext|>` in the model's vocabulary too) is stored as ordinary, in category special.
    """
    counts = tok.training.merge_counts if tok.training is not None else None
    specials = set(tok.special_tokens.values())
    ordinary = set(tok.ordinary_ids)
    vocab = tok.vocab
    # What a token stands for, which the lists show, measure and sort by: its bytes, but a
    # space for Llama 2's `▁` and the byte for its `<0xNN>` (the row keeps `raw`, which loading
    # reads back). Asked per token only where a pipeline respells them: 200,000 calls else.
    pipeline = tok.hf_pipeline
    respelled = pipeline is not None and pipeline.spelling != "byte_level"
    ends = tok.ends_word
    rows = []
    for token_id in sorted(vocab):
        raw = vocab[token_id]
        shown = tok.display_bytes(token_id) if respelled else raw
        ends_word = ends(token_id)
        special = token_id in specials
        try:  # decoded once, for the category and the text shown
            text = shown.decode("utf-8")
            category = "special" if special else text_category(text)
        except UnicodeDecodeError:
            text = shown.decode("utf-8", errors="replace")
            category = "special" if special else "partial-utf8"
        # NUL becomes U+FFFD like any undecodable byte: PostgreSQL text cannot hold it.
        if "\x00" in text:
            text = text.replace("\x00", "\ufffd")
        rank = tok.merge_rank(token_id) if counts is not None else None
        rows.append(
            (
                tokenizer_id,
                token_id,
                raw,
                text + bpe.END_OF_WORD if ends_word else text,
                shown.hex(),
                len(shown),
                len(text),
                category,
                counts[rank] if counts is not None and rank is not None else None,
                special and token_id not in ordinary,
                ends_word,
            )
        )
    return rows


def _insert_batched(
    session: Session,
    model: type[Merge] | type[VocabEntry],
    columns: tuple[str, ...],
    rows: list[tuple[object, ...]],
) -> None:
    """Bulk insert, the fastest way each back end offers: PostgreSQL's COPY, SQLite's
    executemany with a page cache big enough for the whole batch (an imported o200k_base is
    400,000 rows, and the ORM's per-row parameter handling took most of the import's time).
    `columns[0]` is `tokenizer_id`, the same in every row."""
    if not rows:
        return
    connection = session.connection()
    table = model.__tablename__
    if connection.dialect.name == "postgresql":
        raw = connection.connection.driver_connection  # psycopg 3
        assert raw is not None  # a live connection of this session's transaction
        statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
        with raw.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
        return
    # The driver binds every value of every row, one call each: what all rows share is not
    # bound. The tokeniser's id is written into the statement once, and a column null in every
    # row (an import's counts) is left to its default, null.
    tokenizer_id = int(cast(int, rows[0][0]))
    bound = [k for k in range(1, len(columns)) if any(row[k] is not None for row in rows)]
    names = ", ".join(["tokenizer_id", *(columns[k] for k in bound)])
    style = connection.dialect.paramstyle
    marks = ", ".join([str(tokenizer_id), *("?" if style == "qmark" else "%s" for _ in bound)])
    sql = f"INSERT INTO {table} ({names}) VALUES ({marks})"
    if len(bound) == 1:
        values: list[Any] = [(row[bound[0]],) for row in rows]
    else:
        values = list(map(itemgetter(*bound), rows))
    with _big_cache(connection, len(rows)):
        for start in range(0, len(values), _BATCH):
            connection.exec_driver_sql(sql, values[start : start + _BATCH])


@contextmanager
def _big_cache(connection: Connection, rows: int) -> Iterator[None]:
    """SQLite: the default 2 MB cache spills a big transaction's index pages to the WAL again
    and again; 64 MB holds them. Set for this transaction only, then put back."""
    if connection.dialect.name != "sqlite" or rows <= _BATCH:
        yield
        return
    before = connection.exec_driver_sql("PRAGMA cache_size").scalar_one()
    connection.exec_driver_sql("PRAGMA cache_size=-65536")
    try:
        yield
    finally:
        connection.exec_driver_sql(f"PRAGMA cache_size={int(before)}")


_ID_BITS = 21  # three ids below 2**21 fit one JSON integer below 2**63


def _insert_merges_packed(session: Session, tok: bpe.Tokenizer, tokenizer_id: int) -> bool:
    """SQLite, a tokeniser without counts (an import): its merges in one statement, each merge
    one integer of a JSON array (left | right << 21 | new << 42) that SQLite's json_each
    unpacks, its position the rank. Binding 200,000 rows of values one by one took twice as
    long. False (nothing done) elsewhere, and for ids of 2**21 or more."""
    connection = session.connection()
    merges = tok.merges
    if connection.dialect.name != "sqlite" or tok.training is not None or not merges:
        return False
    if max(map(max, merges)) >> _ID_BITS or min(map(min, merges)) < 0:
        return False
    one, two = _ID_BITS, 2 * _ID_BITS
    packed = json.dumps([left | right << one | new << two for left, right, new in merges])
    mask = (1 << _ID_BITS) - 1
    with _big_cache(connection, len(merges)):
        connection.exec_driver_sql(
            "INSERT INTO merges (tokenizer_id, rank, left_id, right_id, new_id)"
            f" SELECT {int(tokenizer_id)}, key, value & {mask}, (value >> {one}) & {mask},"
            f" value >> {two} FROM json_each(?)",
            (packed,),
        )
    return True


# ----- rows -> bpe.Tokenizer -----------------------------------------------------------------
_CACHE_SIZE = 32
_cache: OrderedDict[tuple[int, str], bpe.Tokenizer] = OrderedDict()  # (id, slug) -> tokeniser
_cache_lock = threading.Lock()


def load_tokenizer(session: Session, row: Tokenizer) -> bpe.Tokenizer:
    """The stored tokeniser as a `bpe.Tokenizer` (cached: stored tokenisers never change)."""
    return _cached((row.id, row.slug), lambda: _build(session, row))


def load_tokenizer_by_id(session: Session, tokenizer_id: int, slug: str) -> bpe.Tokenizer:
    """load_tokenizer for a live row known by id and slug: the row is read only on a miss."""
    return _cached(
        (tokenizer_id, slug), lambda: _build(session, session.get_one(Tokenizer, tokenizer_id))
    )


def loaded_tokenizer(tokenizer_id: int, slug: str) -> bpe.Tokenizer | None:
    """The tokeniser if this process has it loaded already, else None (nothing is read)."""
    with _cache_lock:
        return _cache.get((tokenizer_id, slug))


_building: dict[tuple[int, str], threading.Lock] = {}  # key -> held while one thread builds it


def _cached(key: tuple[int, str], build: Callable[[], bpe.Tokenizer]) -> bpe.Tokenizer:
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
        building = _building.setdefault(key, threading.Lock())
    # One build per tokeniser: a request that wants one the warm-up thread (storage/warming.py)
    # is loading waits for it instead of loading a second copy beside it.
    with building:
        with _cache_lock:
            if key in _cache:
                return _cache[key]
        try:
            return _remember(key, build())
        finally:
            with _cache_lock:
                _building.pop(key, None)


def _remember(key: tuple[int, str], tok: bpe.Tokenizer) -> bpe.Tokenizer:
    with _cache_lock:
        _cache[key] = tok
        evicted = len(_cache) > _CACHE_SIZE
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        _out_of_the_collectors_way(evicted=evicted)
    return tok


def _out_of_the_collectors_way(*, evicted: bool) -> None:
    """A loaded tokeniser is millions of long-lived objects (GPT-4o's 200,000 tokens and their
    tables) that every full garbage collection would walk again, 100 ms and more each time in
    the middle of some request (benchmarks/home_counts.py). Frozen, the collector skips them.
    An evicted one is handed back first, so that anything of it in a cycle can be freed."""
    if evicted:
        gc.unfreeze()
    gc.freeze()


class StoredTokenizerError(bpe.TokenizerFileError, UserError):
    """A stored tokeniser whose document or rows fail the file format's checks: the same error
    as a corrupt file, and a refusal page that names the problem (not a 500)."""

    def __init__(self, message: str) -> None:
        UserError.__init__(self, message)


def _build(session: Session, row: Tokenizer) -> bpe.Tokenizer:
    """The document through `bpe.formats.from_parts`, with the merge (and, for an import,
    vocabulary) rows as its bulk."""
    source = f"the stored tokeniser {row.slug}"
    try:
        return _from_rows(session, row, source)
    except bpe.TokenizerFileError as exc:
        log.error("cannot load a stored tokeniser: %s", exc)
        raise StoredTokenizerError(
            f"This tokeniser cannot be loaded: its stored record is damaged ({exc})."
        ) from None


def _driver_rows(session: Session, sql: str, *params: object) -> list[Any]:
    """The rows of a query (`?` for each parameter) read with the driver's own cursor, in the
    session's transaction: SQLAlchemy's result rows cost a third of a load of GPT-4o's 200,000
    merge and 200,000 vocabulary rows on top of reading them."""
    connection = session.connection()
    if connection.dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    cursor = connection.connection.cursor()
    try:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _from_rows(session: Session, row: Tokenizer, source: str) -> bpe.Tokenizer:
    if row.document is None:
        raise bpe.TokenizerFileError(f"{source} has no document (migration 0015 fills it)")
    header = bpe.formats.parse_json(row.document, source=source)
    rows = _driver_rows(
        session,
        "SELECT left_id, right_id, new_id, pair_count, tokens_after FROM merges"
        " WHERE tokenizer_id = ? ORDER BY rank",
        row.id,
    )
    # Unpacked, not read by attribute: half the cost, on 50,000-200,000 rows per load.
    merges = [(left, right, new) for left, right, new, _, _ in rows]
    tokens = None
    if bpe.formats.is_imported_header(header):
        # ordinary tokens only: an id that is only special is the header's
        tokens = [
            (token_id, bytes(data))
            for token_id, data in _driver_rows(
                session,
                "SELECT token_id, token_bytes FROM vocab_entries"
                " WHERE tokenizer_id = ? AND NOT is_special",
                row.id,
            )
        ]
    return bpe.formats.from_parts(
        header,
        merges=merges,
        tokens=tokens,
        merge_counts=[count for _, _, _, count, _ in rows],
        tokens_after=[after for _, _, _, _, after in rows],
        source=source,
    )
