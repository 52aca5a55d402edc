"""The schema comes only from the migrations: empty database -> head -> base, and the models
agree with what the migrations build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table, Text, inspect

from webapp.storage import db
from webapp.storage.models import Base, objects_of

TABLES = {
    "corpora",
    "corpus_previews",
    "corpus_stats",
    "tokenizers",
    "merges",
    "vocab_entries",
    "training_jobs",
    "playground_shares",
    "owners",
}


def _tables(database: db.Database) -> set[str]:
    return set(inspect(database.engine).get_table_names()) - {"alembic_version"}


def test_empty_database_upgrades_to_head_and_back_to_base(app_config):
    database = db.Database(app_config["DATABASE_URL"])
    try:
        assert _tables(database) == set()
        db.upgrade(database)
        assert _tables(database) >= TABLES  # other areas' migrations add their own tables
        assert db.current_revision(database) is not None
        db.downgrade(database, "base")
        assert _tables(database) == set()
        assert db.current_revision(database) is None
        db.upgrade(database)  # and up again: the downgrade left nothing in the way
        assert _tables(database) >= TABLES
    finally:
        database.dispose()


def _drift(database: db.Database, metadata: MetaData) -> list:
    """What autogenerate would write: how the migrated schema differs from these models."""
    with database.engine.connect() as conn:
        options = {"include_object": objects_of(conn.dialect.name)}
        return compare_metadata(MigrationContext.configure(conn, opts=options), metadata)


def test_models_match_the_migrations(app):
    # The app imports every model, so Base.metadata holds every table of every area; a table
    # only a migration makes shows up as "remove_table" and one only a model makes as "add_table".
    assert _drift(app.extensions["bpe_db"], Base.metadata) == []


def test_a_model_change_without_a_migration_fails_the_check(app):
    changed = MetaData()
    for table in Base.metadata.tables.values():
        copied = table.to_metadata(changed)
        infos = {index.name: index.info for index in table.indexes}
        for index in copied.indexes:  # to_metadata leaves out which dialects an index is for
            index.info.update(infos[index.name])
    Table("unmigrated", changed, Column("id", Integer, primary_key=True))
    changed.tables["corpora"].append_column(Column("unmigrated_note", Text, nullable=True))
    drift = _drift(app.extensions["bpe_db"], changed)
    kinds = {(d[0], d[-1].name) for d in drift if isinstance(d, tuple)}
    assert kinds == {("add_table", "unmigrated"), ("add_column", "unmigrated_note")}


def test_schema_has_the_agreed_indexes(app):
    inspector = inspect(app.extensions["bpe_db"].engine)
    vocab = {tuple(ix["column_names"]) for ix in inspector.get_indexes("vocab_entries")}
    assert ("tokenizer_id", "category") in vocab
    assert ("tokenizer_id", "byte_length") in vocab
    merges = {tuple(ix["column_names"]) for ix in inspector.get_indexes("merges")}
    assert ("tokenizer_id", "new_id") in merges
    # One corpus per text and owner: two owners may upload the same text and each gets a corpus
    # of their own, so the upload's lookup is by both, and the text alone is not unique.
    corpora = {ix["name"]: ix for ix in inspector.get_indexes("corpora")}
    assert corpora["ix_corpora_owner_sha256"]["column_names"] == ["owner_id", "sha256"]
    assert "ix_corpora_sha256" not in corpora


def test_cli_db_upgrade_reports_the_revision(runner):
    result = runner.invoke(args=["db-upgrade"])
    assert result.exit_code == 0, result.output
    assert "is at revision" in result.output
    assert "None" not in result.output


def test_app_does_not_migrate_when_told_not_to(app_config):
    from webapp import create_app

    app_config["AUTO_MIGRATE"] = False
    app = create_app(app_config)
    try:
        assert _tables(app.extensions["bpe_db"]) == set()
    finally:
        app.extensions["bpe_db"].dispose()


@pytest.mark.database("sqlite")
def test_corpus_text_is_the_last_column(app):
    """Uploads stream into a zeroblob placeholder, which SQLite keeps lazy only at a row's end."""
    columns = [c["name"] for c in inspect(app.extensions["bpe_db"].engine).get_columns("corpora")]
    assert columns[-1] == "text"


def test_previews_of_existing_corpora_are_backfilled(app_config):
    """Corpora stored before the preview table get theirs from the migration, cut at a whole
    character, from a few kilobytes of the text (blob I/O on SQLite, a substring elsewhere)."""
    from sqlalchemy import text as sql

    database = db.Database(app_config["DATABASE_URL"])
    try:
        db.upgrade(database, "0008_control_category")
        long_text = "é東😀x" * 1000  # 4,000 characters, 10,000 bytes: a cut lands mid-character
        with database.session_scope() as session:
            for n, body in enumerate([long_text, "short\u202e one"]):
                session.execute(
                    sql(
                        "INSERT INTO corpora (slug, name, size_bytes, sha256, char_count,"
                        " line_count, source_encoding, created_at, text) VALUES (:slug, 'c',"
                        " :size, :sha, :chars, 1, 'utf-8', CURRENT_TIMESTAMP, :text)"
                    ),
                    {
                        "slug": f"s{n}",
                        "size": len(body.encode()),
                        "sha": f"{n:064d}",
                        "chars": len(body),
                        "text": body,
                    },
                )
        db.upgrade(database)
        with database.read_scope() as session:
            rows = session.execute(
                sql("SELECT text FROM corpus_previews ORDER BY corpus_id")
            ).scalars()
            assert list(rows) == [long_text[:2000], "short\u202e one"]
    finally:
        database.dispose()


def test_corpus_stats_count_existing_corpora_and_keep_every_row(app_config):
    """Corpora stored before the stats table get words mode's alphabet from the migration, read
    a slice at a time (a slice boundary lands inside a character here), and nothing already
    stored is lost: adding the table must not rebuild `corpora` (a rebuild once emptied
    `corpus_previews`)."""
    from sqlalchemy import text as sql

    from bpe.training import word_sequences

    database = db.Database(app_config["DATABASE_URL"])
    try:
        db.upgrade(database, "0012_owners")
        # Over one 1 MiB slice: 3-byte and 4-byte characters, and whitespace str.split() cuts
        # at (U+3000, U+2028, \x1c) but a careless count would keep.
        long_text = "a" + "é東😀x\u3000" * 90_000 + "\u2028tail\x1cend"
        bodies = [long_text, "short\u202e one", "ab"]
        with database.session_scope() as session:
            for n, body in enumerate(bodies):
                corpus_id = session.execute(
                    sql(
                        "INSERT INTO corpora (slug, name, size_bytes, sha256, char_count,"
                        " line_count, source_encoding, created_at, allow_training, text)"
                        " VALUES (:slug, 'c', :size, :sha, :chars, 1, 'utf-8',"
                        " CURRENT_TIMESTAMP, false, :text) RETURNING id"
                    ),
                    {
                        "slug": f"s{n}",
                        "size": len(body.encode()),
                        "sha": f"{n:064d}",
                        "chars": len(body),
                        "text": body,
                    },
                ).scalar_one()
                session.execute(
                    sql("INSERT INTO corpus_previews (corpus_id, text) VALUES (:id, :text)"),
                    {"id": corpus_id, "text": body[:20]},
                )
        db.upgrade(database)
        with database.read_scope() as session:
            previews = session.execute(
                sql("SELECT text FROM corpus_previews ORDER BY corpus_id")
            ).scalars()
            assert list(previews) == [body[:20] for body in bodies]
            kept = session.execute(sql("SELECT sha256 FROM corpora ORDER BY id")).scalars()
            assert list(kept) == [f"{n:064d}" for n in range(len(bodies))]
            counted = session.execute(
                sql("SELECT word_alphabet_size FROM corpus_stats ORDER BY corpus_id")
            ).scalars()
            assert list(counted) == [len(word_sequences(body)[0]) for body in bodies]
    finally:
        database.dispose()


def _old_tokenizer_row(tok, slug: str) -> dict:
    """The columns a tokeniser was stored in before 0015 (convert.store_tokenizer and
    store_imported as they were), every field of the tokeniser in a column of its own."""
    from webapp.storage.convert import final_token_count
    from webapp.storage.models import utcnow

    values = {
        "slug": slug,
        "mode": tok.mode,
        "pattern": tok.pattern,
        "vocab_size": tok.vocab_size,
        "special_tokens": json.dumps(tok.special_tokens, ensure_ascii=False),
        "alphabet": None if tok.alphabet is None else json.dumps(tok.alphabet, ensure_ascii=False),
        "merge_count": len(tok.merges),
        "created_at": utcnow(),
        "encode_rule": tok.rule,
        "ignore_merges": tok.ignore_merges,
    }
    if tok.source is not None:
        pre = tok.pre_tokenizer
        return values | {
            "source_format": tok.source.format,
            "source_filename": tok.source.filename,
            "source_sha256": tok.source.sha256,
            "source_name": tok.source.name,
            "pre_tokenizer": None if pre is None else json.dumps(pre.to_dict(), ensure_ascii=False),
            "id_limit": tok.id_limit,
        }
    stats = tok.training
    return values | {
        "trainer": stats.trainer,
        "vocab_size_requested": stats.vocab_size,
        "min_frequency": stats.min_frequency,
        "initial_tokens": stats.initial_tokens,
        "final_token_count": final_token_count(tok),
        "training_seconds": stats.seconds,
    }


def test_tokenizers_stored_before_documents_get_theirs_and_load_as_before(app_config):
    """Rows from before 0015 get their document from their columns and load into the same
    tokeniser (the same file, byte for byte); the downgrade drops the column and nothing else:
    rebuilding `tokenizers` on SQLite would cascade to every merge and vocabulary row."""
    import sqlalchemy as sa

    from bpe.formats import dumps, loads
    from webapp.storage import convert
    from webapp.storage.models import Merge, Tokenizer, VocabEntry

    saved = Path(__file__).parent / "saved_tokenizers"
    raws = {
        name: (saved / f"{name}.json").read_text(encoding="utf-8")
        for name in ("naive", "chunked", "words", "tiktoken", "hf")
    }
    database = db.Database(app_config["DATABASE_URL"])
    try:
        db.upgrade(database, "0014_evaluation_owners")
        with database.session_scope() as session:
            corpus_id = session.execute(
                sa.text(
                    "INSERT INTO corpora (slug, name, size_bytes, sha256, char_count, line_count,"
                    " source_encoding, created_at, allow_training, text) VALUES ('c', 'c', 1,"
                    " :sha, 1, 1, 'utf-8', CURRENT_TIMESTAMP, false, 'c') RETURNING id"
                ),
                {"sha": "0" * 64},
            ).scalar_one()
            for name, raw in raws.items():
                tok = loads(raw)
                values = _old_tokenizer_row(tok, slug=name)
                if not tok.imported:
                    values["corpus_id"] = corpus_id
                table = sa.table("tokenizers", *(sa.column(column) for column in values))
                session.execute(sa.insert(table).values(**values))
                row_id = session.scalar(sa.text(f"SELECT id FROM tokenizers WHERE slug = '{name}'"))
                for model, columns, rows in (
                    (Merge, convert.MERGE_COLUMNS, convert.merge_rows(tok, row_id)),
                    (VocabEntry, convert.VOCAB_COLUMNS, convert.vocab_rows(tok, row_id)),
                ):
                    session.execute(
                        sa.insert(model), [dict(zip(columns, r, strict=True)) for r in rows]
                    )

        def counts() -> tuple[int, int]:
            with database.read_scope() as session:
                return (
                    session.scalar(sa.text("SELECT count(*) FROM merges")),
                    session.scalar(sa.text("SELECT count(*) FROM vocab_entries")),
                )

        before = counts()
        db.upgrade(database)
        with database.read_scope() as session:
            for name, raw in raws.items():
                row = session.query(Tokenizer).filter_by(slug=name).one()
                assert dumps(convert.load_tokenizer(session, row)) == raw, name
        db.downgrade(database, "0014_evaluation_owners")
        columns = {c["name"] for c in inspect(database.engine).get_columns("tokenizers")}
        assert "document" not in columns and "mode" in columns
        assert counts() == before
    finally:
        database.dispose()


def test_the_vocabulary_diff_index_is_sqlite_only(app):
    """SQLite probes vocabularies by their bytes through an index; PostgreSQL hash-joins
    instead (its btree refuses keys over ~2.7 kB, and a token may be 16 kB)."""
    engine = app.extensions["bpe_db"].engine
    names = {ix["name"] for ix in inspect(engine).get_indexes("vocab_entries")}
    assert ("ix_vocab_tokenizer_hex" in names) == (engine.dialect.name == "sqlite")


SENTENCEPIECE_FILE = {
    "model": {
        "type": "BPE",
        "vocab": {
            "<unk>": 0,
            "<0x0A>": 1,
            "<0xE4>": 2,
            "\u2581": 3,
            "t": 4,
            "h": 5,
            "e": 6,
            "\u2581t": 7,
            "\u2581th": 8,
            "\u2581the": 9,
        },
        "merges": ["\u2581 t", "\u2581t h", "\u2581th e"],
        "byte_fallback": True,
        "unk_token": "<unk>",
    },
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    "added_tokens": [{"id": 0, "content": "<unk>", "special": True}],
}


def test_sentencepiece_rows_stored_before_0022_describe_what_tokens_stand_for(app_config):
    """Rows of a Llama-2-style import stored with the file's spelling (`▁the` 6 bytes of
    `mixed`) are recomputed by the migration as what each token stands for, as new imports
    are stored; the token bytes loading reads are left alone."""
    import sqlalchemy as sa

    from bpe.importers import import_bytes
    from webapp.storage import convert
    from webapp.storage.models import VocabEntry

    tok = import_bytes(json.dumps(SENTENCEPIECE_FILE).encode(), filename="tokenizer.json")
    database = db.Database(app_config["DATABASE_URL"])
    try:
        db.upgrade(database)
        with database.session_scope() as session:
            tokenizer_id = convert.store_imported(session, tok).id
            session.flush()
            for row in session.query(VocabEntry).filter_by(tokenizer_id=tokenizer_id):
                if row.category != "special":  # as rows were stored before: the file's text
                    raw = bytes(row.token_bytes)
                    row.display_text, row.hex = raw.decode(), raw.hex()
                    row.byte_length, row.char_length = len(raw), len(raw.decode())
                    row.category = "mixed"
        columns = ("display_text", "hex", "byte_length", "char_length", "category")

        def rows() -> dict[int, tuple]:
            with database.read_scope() as session:
                found = session.execute(
                    sa.select(VocabEntry.token_id, *(getattr(VocabEntry, c) for c in columns))
                ).all()
                return {r[0]: tuple(r[1:]) for r in found}

        assert rows()[9] == ("\u2581the", "e29681746865", 6, 4, "mixed")
        db.downgrade(database, "0018_job_workers")
        db.upgrade(database)
        want = {
            r[1]: tuple(r[convert.VOCAB_COLUMNS.index(c)] for c in columns)
            for r in convert.vocab_rows(tok, tokenizer_id)
        }
        assert rows() == want
        assert want[9] == (" the", "20746865", 4, 4, "leading-space")
        assert want[1][4] == "whitespace" and want[2][4] == "partial-utf8"
    finally:
        database.dispose()
