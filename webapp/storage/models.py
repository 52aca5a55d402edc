"""The tables, as SQLAlchemy 2.0 ORM classes. The schema itself is made by `migrations/`.

Times are naive UTC datetimes (`utcnow()`), the same on SQLite and PostgreSQL. A job's
heartbeat and staleness are judged by the database's clock instead (`db_now()`), so a machine
whose clock is off cannot make a healthy job look lost.
A row with `deleted_at` set is treated everywhere like a missing one (same 404).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator

DB_ID_MAX = 2**31 - 1  # the largest value an id column holds (a 32-bit signed integer)


def in_id_range(value: int) -> bool:
    return 0 <= value <= DB_ID_MAX


class JobStatus(StrEnum):
    """A training job's state; the row stores the value. Equal to its plain string."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


ACTIVE_STATUSES = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})
FINISHED_STATUSES = frozenset(JobStatus) - ACTIVE_STATUSES


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class db_now(FunctionElement[datetime]):
    """The database server's current time as a naive UTC datetime, in SQL.

    Every machine writing heartbeats and every sweep reading them then share one clock.
    """

    type = DateTime()
    inherit_cache = True


@compiles(db_now, "postgresql")
def _db_now_postgresql(element: db_now, compiler: SQLCompiler, **kw: Any) -> str:
    # `timestamp without time zone` columns hold UTC; now() is in the session's time zone.
    return "timezone('utc', statement_timestamp())"


@compiles(db_now)
def _db_now_sqlite(element: db_now, compiler: SQLCompiler, **kw: Any) -> str:
    # The text SQLAlchemy stores a DateTime as on SQLite (microseconds: %f has milliseconds).
    return "strftime('%Y-%m-%d %H:%M:%f000', 'now')"


class Base(DeclarativeBase):
    pass


class CorpusText(TypeDecorator):
    """Text that SQLite may hold as its UTF-8 bytes: uploads stream straight into a blob there
    (see uploads.store_corpus), so the text is never held whole in memory; reads decode it."""

    impl = Text
    cache_ok = True

    def process_result_value(self, value: str | bytes | None, dialect: Dialect) -> str | None:
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return value


class Owner(Base):
    """Someone who made something here, known only by the SHA-256 of their random token."""

    __tablename__ = "owners"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Corpus(Base):
    __tablename__ = "corpora"
    # The same text uploaded twice by one owner is one corpus; two owners get one each, so an
    # upload never hands out another owner's link.
    __table_args__ = (Index("ix_corpora_owner_sha256", "owner_id", "sha256"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"))
    # Whether visitors with the link (not only the owner) may train on it.
    allow_training: Mapped[bool] = mapped_column(Boolean, default=False)
    name: Mapped[str] = mapped_column(String(200))
    filename: Mapped[str | None] = mapped_column(String(255))  # display only, never a path
    size_bytes: Mapped[int] = mapped_column(Integer)  # of the stored UTF-8 text
    sha256: Mapped[str] = mapped_column(String(64))  # of the stored UTF-8 text
    # Deferred: lists of corpora never load megabytes of text by accident.
    text: Mapped[str] = mapped_column(CorpusText, deferred=True)
    char_count: Mapped[int] = mapped_column(Integer)
    line_count: Mapped[int] = mapped_column(Integer)
    source_encoding: Mapped[str] = mapped_column(String(20), default="utf-8")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime)

    tokenizers: Mapped[list[Tokenizer]] = relationship(back_populates="corpus")
    jobs: Mapped[list[TrainingJob]] = relationship(back_populates="corpus")


class CorpusPreview(Base):
    """The first PREVIEW_CHARS characters of a corpus, kept apart from its text (computed while
    the upload streams) so a corpus page never reads the text: SQLite loads a whole value to
    take even a substring of it. Its own table, since `corpora.text` must stay the last column."""

    __tablename__ = "corpus_previews"

    corpus_id: Mapped[int] = mapped_column(
        ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True
    )
    text: Mapped[str] = mapped_column(Text)


class CorpusStats(Base):
    """What a corpus's settings are checked against, counted once while the upload streams.

    `word_alphabet_size`: the distinct characters outside whitespace (str.isspace, where words
    mode splits), words mode's base ids before `</w>`. A table of its own for the same reason as
    previews: adding a column to `corpora` rebuilds it on SQLite (text must stay last)."""

    __tablename__ = "corpus_stats"

    corpus_id: Mapped[int] = mapped_column(
        ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True
    )
    word_alphabet_size: Mapped[int] = mapped_column(Integer)


class Tokenizer(Base):
    __tablename__ = "tokenizers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    # Null for imported tokenisers, which have no corpus and no training record.
    corpus_id: Mapped[int | None] = mapped_column(ForeignKey("corpora.id"), index=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"), index=True)
    name: Mapped[str | None] = mapped_column(String(200))  # set by a rename; else mode · size
    # The tokeniser itself: bpe.formats.header_dict as JSON, with the merges and vocab_entries
    # rows as its bulk (convert.load_tokenizer reads only these). The columns below are copies
    # of its fields for SQL to filter, sort and show; null only before migration 0015.
    document: Mapped[str | None] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(16))
    pattern: Mapped[str | None] = mapped_column(Text)
    trainer: Mapped[str | None] = mapped_column(String(16))
    vocab_size_requested: Mapped[int | None] = mapped_column(Integer)
    vocab_size: Mapped[int] = mapped_column(Integer)  # ids that exist: ordinary + specials
    min_frequency: Mapped[int | None] = mapped_column(Integer)
    special_tokens: Mapped[str] = mapped_column(Text, default="{}")  # JSON {token: id}
    alphabet: Mapped[str | None] = mapped_column(Text)  # JSON list of characters, words mode
    initial_tokens: Mapped[int | None] = mapped_column(Integer)
    final_token_count: Mapped[int | None] = mapped_column(Integer)
    training_seconds: Mapped[float | None] = mapped_column(Float)
    merge_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime)
    # ----- imported tokenisers (all null / default for tokenisers trained here) -----
    source_format: Mapped[str | None] = mapped_column(String(16))  # "tiktoken" or "hf"
    source_filename: Mapped[str | None] = mapped_column(String(255))  # display only
    source_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    source_name: Mapped[str | None] = mapped_column(String(100))  # e.g. cl100k_base
    encode_rule: Mapped[str] = mapped_column(String(16), default="merges", server_default="merges")
    pre_tokenizer: Mapped[str | None] = mapped_column(Text)  # JSON, HF imports
    ignore_merges: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    id_limit: Mapped[int | None] = mapped_column(Integer)  # largest id + 1 (ids may have holes)
    # The site's reference tokenisers ("GPT-2", "GPT-4", "GPT-4o"), set by import-references only.
    reference: Mapped[str | None] = mapped_column(String(32))

    corpus: Mapped[Corpus | None] = relationship(back_populates="tokenizers")

    @property
    def imported(self) -> bool:
        return self.source_format is not None

    @property
    def label(self) -> str:
        """What lists call it: the owner's name for it, else its mode and size."""
        return self.name or f"{self.mode} · {self.vocab_size} tokens"

    @property
    def special_tokens_dict(self) -> dict[str, int]:
        return json.loads(self.special_tokens or "{}")

    @property
    def alphabet_list(self) -> list[str] | None:
        return None if self.alphabet is None else json.loads(self.alphabet)


class Merge(Base):
    __tablename__ = "merges"
    __table_args__ = (Index("ix_merges_tokenizer_new_id", "tokenizer_id", "new_id"),)

    tokenizer_id: Mapped[int] = mapped_column(
        ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # 0-based
    left_id: Mapped[int] = mapped_column(Integer)
    right_id: Mapped[int] = mapped_column(Integer)
    new_id: Mapped[int] = mapped_column(Integer)
    pair_count: Mapped[int | None] = mapped_column(Integer)  # null: derived for display (imports)
    tokens_after: Mapped[int | None] = mapped_column(Integer)


def sqlite_only(index: Index) -> Index:
    """An index made on SQLite alone: by `metadata.create_all` and the migrations there only,
    and left out of autogenerate's comparison elsewhere (`objects_of`)."""
    index.info["dialects"] = ("sqlite",)
    return index.ddl_if(dialect="sqlite")


def objects_of(dialect: str) -> Callable[..., bool]:
    """Alembic's `include_object` for a database of this dialect: an object made only on other
    dialects (`sqlite_only`) is not expected there."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, other: Any) -> bool:
        dialects = getattr(obj, "info", {}).get("dialects")
        return dialects is None or dialect in dialects

    return include


class VocabEntry(Base):
    __tablename__ = "vocab_entries"
    __table_args__ = (
        Index("ix_vocab_tokenizer_category", "tokenizer_id", "category"),
        Index("ix_vocab_tokenizer_byte_length", "tokenizer_id", "byte_length"),
        # The vocabulary diff's probe (webapp/storage/vocab_diff.py). SQLite only: PostgreSQL
        # hash-joins without it, and its btree could not hold a 16 kB token.
        sqlite_only(Index("ix_vocab_tokenizer_hex", "tokenizer_id", "hex", "ends_word")),
    )

    tokenizer_id: Mapped[int] = mapped_column(
        ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True
    )
    token_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    token_bytes: Mapped[bytes] = mapped_column(LargeBinary)
    display_text: Mapped[str] = mapped_column(Text)  # bytes decoded with "replace", + </w>
    hex: Mapped[str] = mapped_column(Text)  # lowercase hex of token_bytes
    byte_length: Mapped[int] = mapped_column(Integer)
    char_length: Mapped[int] = mapped_column(Integer)
    category: Mapped[str] = mapped_column(String(20))
    pair_count: Mapped[int | None] = mapped_column(Integer)  # null for base ids and specials
    is_special: Mapped[bool] = mapped_column(Boolean, default=False)
    ends_word: Mapped[bool] = mapped_column(Boolean, default=False)


class JobDelivery:
    """The columns every job table of the site's own kinds has for its delivery (migration
    0018): a mixin, so the three tables declare them once."""

    # The broker's message: when it was last sent, how often (a lost one is sent again).
    sent_at: Mapped[datetime | None] = mapped_column(DateTime)
    send_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Where the job ran: the worker machine's host name and process id.
    worker_host: Mapped[str | None] = mapped_column(String(255))
    worker_pid: Mapped[int | None] = mapped_column(Integer)


class TrainingJob(JobDelivery, Base):
    __tablename__ = "training_jobs"
    # Ids are in URLs: never give a new job a deleted one's (migration 0016).
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id"), index=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"), index=True)
    settings: Mapped[str] = mapped_column(Text)  # JSON: mode, pattern, trainer, vocab_size, ...
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    merges_done: Mapped[int] = mapped_column(Integer, default=0)
    merges_target: Mapped[int | None] = mapped_column(Integer)
    current_pair: Mapped[str | None] = mapped_column(Text)
    current_count: Mapped[int | None] = mapped_column(Integer)
    elapsed_seconds: Mapped[float | None] = mapped_column(Float)
    estimate_seconds: Mapped[float | None] = mapped_column(Float)  # remaining; None: not yet
    # The range the estimate lies in (webapp/jobs/progress.py: two fits at two paces), with it
    # (migration 0020).
    estimate_low: Mapped[float | None] = mapped_column(Float)
    estimate_high: Mapped[float | None] = mapped_column(Float)
    # While the text is split: characters split so far, of all (migration 0020).
    split_done: Mapped[int | None] = mapped_column(Integer)
    split_total: Mapped[int | None] = mapped_column(Integer)
    # JSON: the latest merges and the curves the job page draws (webapp/jobs/learning.py).
    learning: Mapped[str | None] = mapped_column(Text)
    # reading, splitting, counting, merging, storing (webapp/jobs/phases.py); None before start
    phase: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    tokenizer_id: Mapped[int | None] = mapped_column(ForeignKey("tokenizers.id"))
    rerun_of_id: Mapped[int | None] = mapped_column(ForeignKey("training_jobs.id"))

    corpus: Mapped[Corpus] = relationship(back_populates="jobs")
    tokenizer: Mapped[Tokenizer | None] = relationship(foreign_keys=[tokenizer_id])

    @property
    def settings_dict(self) -> dict[str, Any]:
        return json.loads(self.settings)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def wall_seconds(self) -> float:
        """Seconds since the job started, for a running one: the stored figure is written with
        progress, and reading a large corpus writes none, so the page would sit at 0 ms."""
        stored = self.elapsed_seconds or 0.0
        if self.status != "running" or self.started_at is None:
            return stored
        return max(stored, (utcnow() - self.started_at).total_seconds())

    @property
    def percent(self) -> int:
        if not self.merges_target:
            return 100 if self.status == "succeeded" else 0
        return min(100, int(100 * self.merges_done / self.merges_target))


class PlaygroundShare(Base):
    """The encode playground's text and view state behind a share link."""

    __tablename__ = "playground_shares"
    __table_args__ = (
        Index("ix_playground_shares_tokenizer_digest", "tokenizer_id", "digest", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    tokenizer_id: Mapped[int] = mapped_column(ForeignKey("tokenizers.id", ondelete="CASCADE"))
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"))
    # Bytes, not Text: PostgreSQL text cannot hold NUL, and pasted text may contain it.
    text_utf8: Mapped[bytes] = mapped_column(LargeBinary)
    view: Mapped[str] = mapped_column(String(8))  # "text" or "ids"
    options: Mapped[str] = mapped_column(Text)  # JSON: whitespace, invalid, specials
    digest: Mapped[str] = mapped_column(String(64))  # sha256 of text + view state
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ImportJob(JobDelivery, Base):
    """A tokeniser file being imported (`bpe.importers`), run as a background job: the file
    waits in `data` until the job has read it, then the column is emptied."""

    __tablename__ = "import_jobs"
    __table_args__ = ({"sqlite_autoincrement": True},)  # ids are in URLs (as migration 0016)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")  # a JobStatus value
    phase: Mapped[str | None] = mapped_column(String(16))  # "reading", "storing"
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    elapsed_seconds: Mapped[float | None] = mapped_column(Float)
    filename: Mapped[str] = mapped_column(String(255))
    size_bytes: Mapped[int] = mapped_column(Integer)
    pattern: Mapped[str | None] = mapped_column(Text)
    # Deferred: a page of the job never loads the file, only the task does.
    data: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    sidecar: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    tokenizer_id: Mapped[int | None] = mapped_column(
        ForeignKey("tokenizers.id", ondelete="SET NULL")
    )

    tokenizer: Mapped[Tokenizer | None] = relationship()

    @property
    def finished(self) -> bool:
        return JobStatus(self.status) not in ACTIVE_STATUSES


class EvaluationRow(JobDelivery, Base):
    """One tokeniser measured on one corpus (`bpe.evaluate`), run as a background job."""

    __tablename__ = "evaluations"
    __table_args__ = (
        Index("ix_evaluations_corpus_tokenizer", "corpus_id", "tokenizer_id", unique=True),
        {"sqlite_autoincrement": True},  # ids are in URLs (migration 0016)
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tokenizer_id: Mapped[int] = mapped_column(ForeignKey("tokenizers.id", ondelete="CASCADE"))
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"))
    # Who asked for it last: they may cancel it, and they see it even when the
    # tokeniser is not theirs. None: asked for before owners, or by the site.
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")  # a JobStatus value
    chars_done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    chars_total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    byte_count: Mapped[int | None] = mapped_column(Integer)
    characters: Mapped[int | None] = mapped_column(Integer)
    words: Mapped[int | None] = mapped_column(Integer)
    tokens: Mapped[int | None] = mapped_column(Integer)
    vocab_size: Mapped[int | None] = mapped_column(Integer)  # ordinary tokens
    used: Mapped[int | None] = mapped_column(Integer)
    bytes_per_token: Mapped[float | None] = mapped_column(Float)
    seconds: Mapped[float | None] = mapped_column(Float)
    never_used: Mapped[bytes | None] = mapped_column(LargeBinary)  # little-endian uint32 ids
    longest: Mapped[str | None] = mapped_column(Text)  # JSON [[id, count], ...]
    # How the corpus is written (bpe.scripts, migration 0021): tokens per word is shown only
    # where words are spaced, tokens per character elsewhere. Null: measured before 0019.
    script: Mapped[str | None] = mapped_column(String(32))
    spaced: Mapped[bool | None] = mapped_column(Boolean)

    tokenizer: Mapped[Tokenizer] = relationship()

    @property
    def percent(self) -> int:
        if self.status == "succeeded":
            return 100
        return min(99, int(100 * self.chars_done / self.chars_total)) if self.chars_total else 0


class ParallelText(Base):
    """One language of the parallel text (the UDHR; `flask fetch-udhr`), with how it is written
    (`bpe.scripts`), judged once when it is stored. In the database, not on disk: a job runs
    wherever a worker reaches the database, on another machine than the web server's files."""

    __tablename__ = "parallel_texts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(64), unique=True)  # "eng", "cmn_hans"
    name: Mapped[str] = mapped_column(String(200))
    bcp47: Mapped[str] = mapped_column(String(64), default="")
    iso6393: Mapped[str] = mapped_column(String(16), default="")
    direction: Mapped[str] = mapped_column(String(8), default="ltr")
    stage: Mapped[int] = mapped_column(Integer)  # 4-5: the complete text
    script: Mapped[str | None] = mapped_column(String(32))  # of most of its letters
    spaced: Mapped[bool] = mapped_column(Boolean)  # words separated by spaces
    byte_count: Mapped[int] = mapped_column(Integer)
    char_count: Mapped[int] = mapped_column(Integer)
    word_count: Mapped[int] = mapped_column(Integer)  # whitespace-separated
    source_sha256: Mapped[str] = mapped_column(String(64))  # of what it was read from
    text: Mapped[str] = mapped_column(Text, deferred=True)


class LanguageJob(JobDelivery, Base):
    """A set of tokenisers counted on every complete text of the parallel text, as a job."""

    __tablename__ = "language_jobs"
    __table_args__ = ({"sqlite_autoincrement": True},)  # ids are in URLs (as migration 0016)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")  # a JobStatus value
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    elapsed_seconds: Mapped[float | None] = mapped_column(Float)
    tokenizer_ids: Mapped[str] = mapped_column(Text)  # JSON list, in the order asked
    counts_done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    counts_total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    @property
    def tokenizer_id_list(self) -> list[int]:
        return [int(i) for i in json.loads(self.tokenizer_ids or "[]")]

    @property
    def finished(self) -> bool:
        return JobStatus(self.status) not in ACTIVE_STATUSES

    @property
    def percent(self) -> int:
        if self.status == "succeeded":
            return 100
        return min(99, int(100 * self.counts_done / self.counts_total)) if self.counts_total else 0


class LanguageCount(Base):
    """How many tokens one tokeniser spends on one language, measured by one job."""

    __tablename__ = "language_counts"

    job_id: Mapped[int] = mapped_column(
        ForeignKey("language_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    tokenizer_id: Mapped[int] = mapped_column(
        ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True
    )
    text_id: Mapped[int] = mapped_column(
        ForeignKey("parallel_texts.id", ondelete="CASCADE"), primary_key=True
    )
    tokens: Mapped[int] = mapped_column(Integer)


class CountShard(Base):
    """One shard of a training's text, counted by whichever worker claims it first
    (webapp/jobs/shard_store.py, docs/operations.md "Counting on every worker"): the text
    until it is counted, then its pre-tokens' counts as JSON. The rows live while the job
    counts; the job deletes them once it has added them up."""

    __tablename__ = "count_shards"

    job_id: Mapped[int] = mapped_column(
        ForeignKey("training_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)  # the shard's order
    state: Mapped[str] = mapped_column(String(16), default="todo")  # todo, counting, done
    text: Mapped[str] = mapped_column(Text)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime)
    counted_by: Mapped[str | None] = mapped_column(String(255))  # host:pid of the counter
    counts: Mapped[str | None] = mapped_column(Text)  # JSON {pre-token: count}, shard order
