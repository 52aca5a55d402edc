"""A tokeniser in the database is the file format in two parts: the row's `document` (the header,
`bpe.formats.header_dict`) and its merge and vocabulary rows (the bulk). File -> database -> file
is byte-identical for every mode and for imports; a damaged row is refused with the corrupt
file's error and its message, and the web app answers it with a page that says so."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from sqlalchemy import delete, text, update

import bpe
from bpe.formats import dumps, loads
from bpe.importers import import_bytes
from webapp.storage.convert import (
    MERGE_COLUMNS,
    VOCAB_COLUMNS,
    load_tokenizer,
    merge_rows,
    store_imported,
    store_tokenizer,
    vocab_rows,
)
from webapp.storage.models import Merge, Tokenizer, VocabEntry

SAVED = Path(__file__).parent / "saved_tokenizers"
# naive, chunked with a special token, words with two, and a tiktoken and an HF import
SAVED_NAMES = ("naive", "chunked", "words", "tiktoken", "hf")


def saved(name: str) -> str:
    return (SAVED / f"{name}.json").read_text(encoding="utf-8")


def store(app, make_corpus, tok: bpe.Tokenizer) -> tuple[int, str]:
    with app.extensions["bpe_db"].session_scope() as session:
        if tok.imported:
            row = store_imported(session, tok)
        else:
            row = store_tokenizer(session, tok, corpus_id=make_corpus().id)
        return row.id, row.slug


def load(app, tokenizer_id: int) -> bpe.Tokenizer:
    with app.extensions["bpe_db"].read_scope() as session:
        return load_tokenizer(session, session.get_one(Tokenizer, tokenizer_id))


@pytest.mark.parametrize("name", SAVED_NAMES)
def test_a_file_stored_and_loaded_again_is_the_same_file(app, make_corpus, name):
    raw = saved(name)
    tokenizer_id, _ = store(app, make_corpus, loads(raw))
    assert dumps(load(app, tokenizer_id)) == raw


def test_a_long_import_filename_is_whole_in_the_document_and_cut_in_its_column(app, make_corpus):
    data = json.loads(saved("hf"))
    data["source"]["filename"] = "f" * 300 + ".json"
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    tokenizer_id, _ = store(app, make_corpus, loads(raw))
    assert dumps(load(app, tokenizer_id)) == raw
    with app.extensions["bpe_db"].read_scope() as session:
        assert session.get_one(Tokenizer, tokenizer_id).source_filename == "f" * 255


@pytest.mark.parametrize("name", SAVED_NAMES)
def test_the_columns_sql_reads_are_copied_from_the_document(app, make_corpus, name):
    tok = loads(saved(name))
    tokenizer_id, _ = store(app, make_corpus, tok)
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.get_one(Tokenizer, tokenizer_id)
        header = json.loads(row.document or "")
        assert header == bpe.formats.header_dict(tok)
        assert (row.mode, row.pattern, row.vocab_size, row.merge_count) == (
            tok.mode,
            tok.pattern,
            tok.vocab_size,
            len(tok.merges),
        )
        assert row.special_tokens_dict == tok.special_tokens
        assert row.alphabet_list == tok.alphabet
        if tok.source is not None:
            assert (row.source_format, row.source_sha256, row.encode_rule) == (
                tok.source.format,
                tok.source.sha256,
                tok.rule,
            )
            assert row.id_limit == tok.id_limit and row.trainer is None
        else:
            assert tok.training is not None
            assert (row.trainer, row.vocab_size_requested, row.initial_tokens) == (
                tok.training.trainer,
                tok.training.vocab_size,
                tok.training.initial_tokens,
            )
            assert row.final_token_count == tok.training.tokens_after[-1]
            assert row.source_format is None and row.encode_rule == "merges"


# ----- a damaged row ---------------------------------------------------------------------------
def _document(change):
    def corrupt(session, tokenizer_id: int) -> None:
        row = session.get_one(Tokenizer, tokenizer_id)
        row.document = change(row.document)

    return corrupt


def _with(**values):
    return _document(lambda document: json.dumps({**json.loads(document), **values}))


def _drop_first_merge(session, tokenizer_id: int) -> None:
    session.execute(delete(Merge).where(Merge.tokenizer_id == tokenizer_id, Merge.rank == 0))


def _drop_byte_token(session, tokenizer_id: int) -> None:
    session.execute(
        delete(VocabEntry).where(VocabEntry.tokenizer_id == tokenizer_id, VocabEntry.token_id == 0)
    )


def _lose_pair_count(session, tokenizer_id: int) -> None:
    session.execute(update(Merge).where(Merge.tokenizer_id == tokenizer_id).values(pair_count=None))


DAMAGES = [
    ("chunked", _document(lambda document: document[:-1]), "not valid JSON"),
    ("chunked", _document(lambda document: "[1, 2]"), "expected a JSON object"),
    ("chunked", _document(lambda document: None), "has no document"),
    ("chunked", _with(mode="bytes"), "mode must be one of"),
    ("chunked", _with(version=2), "unsupported version"),
    ("words", _with(alphabet=None), "needs its alphabet"),
    ("chunked", _drop_first_merge, "merge 0 should create id 256"),
    ("naive", _lose_pair_count, "training is incomplete"),
    ("tiktoken", _with(rule="bytes"), "rule must be"),
    ("hf", _drop_byte_token, "single bytes have no token"),
]


def _damaged(app, make_corpus, name: str, damage) -> str:
    tokenizer_id, slug = store(app, make_corpus, loads(saved(name)))
    with app.extensions["bpe_db"].session_scope() as session:
        damage(session, tokenizer_id)
    return slug


@pytest.mark.parametrize(("name", "damage", "message"), DAMAGES)
def test_a_damaged_row_is_refused_like_a_corrupt_file(app, make_corpus, name, damage, message):
    slug = _damaged(app, make_corpus, name, damage)
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.query(Tokenizer).filter_by(slug=slug).one()
        with pytest.raises(bpe.TokenizerFileError, match=f"stored tokeniser {slug}\\b.*{message}"):
            load_tokenizer(session, row)


@pytest.mark.parametrize(("name", "damage", "message"), [DAMAGES[0], DAMAGES[3], DAMAGES[6]])
def test_a_damaged_row_gets_a_page_and_json_that_say_so(
    app, client, make_corpus, name, damage, message
):
    slug = _damaged(app, make_corpus, name, damage)
    page = client.get(f"/t/{slug}/download/json")
    assert page.status_code == 422
    html = page.get_data(as_text=True)
    assert "cannot be loaded: its stored record is damaged" in html
    assert message in html
    api = client.post(f"/api/t/{slug}/encode", json={"text": "the cat"})
    assert api.status_code == 422
    assert message in api.get_json()["error"]


def _big_ids_import() -> bpe.Tokenizer:
    """A rank file whose ids pass 2**21: merges SQLite cannot take packed (convert.py)."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 2**21 + 3, b"abc": 2**22}
    lines = "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items())
    return import_bytes(lines.encode(), filename="big.tiktoken", pattern="gpt2")


@pytest.mark.parametrize("name", [*SAVED_NAMES, "big ids"])
def test_the_stored_rows_are_merge_rows_and_vocab_rows(app, make_corpus, name):
    # The store leaves out of each statement what every row shares, and packs an import's
    # merges into one JSON array on SQLite: the rows must be what the row builders give.
    tok = _big_ids_import() if name == "big ids" else loads(saved(name))
    tokenizer_id, _ = store(app, make_corpus, tok)
    with app.extensions["bpe_db"].read_scope() as session:
        for model, columns, rows, order in (
            (Merge, MERGE_COLUMNS, merge_rows(tok, tokenizer_id), "rank"),
            (VocabEntry, VOCAB_COLUMNS, vocab_rows(tok, tokenizer_id), "token_id"),
        ):
            table = model.__tablename__
            stored = session.execute(
                text(
                    f"SELECT {', '.join(columns)} FROM {table}"
                    f" WHERE tokenizer_id = :id ORDER BY {order}"
                ),
                {"id": tokenizer_id},
            ).all()
            assert [tuple(row) for row in stored] == rows, table
    assert dumps(load(app, tokenizer_id)) == dumps(tok)
