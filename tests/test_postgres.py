"""PostgreSQL-only checks, opt-in: set TEST_DATABASE_URL=postgresql://user:pass@host/db.

With that variable set, every other test file runs against PostgreSQL too (see conftest.py);
this file adds what only PostgreSQL has. Without it, the file is skipped.
"""

from __future__ import annotations

import hashlib
import threading

import pytest
from sqlalchemy import func, select, text

from webapp.storage.models import Corpus

pytestmark = pytest.mark.database("postgresql")  # skipped on SQLite (see conftest.py)


def test_runs_on_postgresql_with_psycopg3(app):
    database = app.extensions["bpe_db"]
    assert database.url.startswith("postgresql+psycopg://")
    with database.engine.connect() as conn:
        assert conn.dialect.name == "postgresql"
        assert conn.execute(text("SHOW server_version")).scalar().split(".")[0].isdigit()


def test_text_is_converted_on_the_server_exactly(app, client, owner):
    data = "naïve 東京 😀 \\ ' \" line\n".encode() * 100
    response = client.post(
        "/api/corpora", data=data, content_type="text/plain", headers=owner.bearer
    )
    assert response.status_code == 201
    with app.extensions["bpe_db"].read_scope() as session:
        stored = session.scalar(select(Corpus.text))
    assert stored.encode() == data
    assert response.get_json()["sha256"] == hashlib.sha256(data).hexdigest()


def test_writes_take_turns(app):
    """The write path's advisory lock: a second writer waits for the first to commit."""
    database = app.extensions["bpe_db"]
    order = []
    first_has_lock = threading.Event()

    def first():
        with database.session_scope() as session:
            session.execute(text("SELECT 1"))
            first_has_lock.set()
            threading.Event().wait(0.3)
            order.append("first")

    def second():
        first_has_lock.wait()
        with database.session_scope() as session:
            session.execute(text("SELECT 1"))
            order.append("second")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert order == ["first", "second"]


def _set_read_only(database, on: bool) -> None:
    """The database made read-only for new sessions, as a hot standby is (and back); through
    a connection of its own, so the app's pool gets no fresh session from it."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    name = database.engine.url.database
    admin = create_engine(database.engine.url, poolclass=NullPool)
    try:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("SET default_transaction_read_only = off"))  # this one may write
            setting = "= on" if on else "TO DEFAULT"
            conn.execute(
                text(f'ALTER DATABASE "{name}" SET default_transaction_read_only {setting}')
            )
    finally:
        admin.dispose()


def test_a_read_only_database_answers_503_and_heals_without_a_restart(app, client, owner):
    database = app.extensions["bpe_db"]
    assert client.post("/api/corpora", json={"text": "before"}).status_code == 201
    _set_read_only(database, True)
    try:
        database.engine.dispose()  # a failover drops the sessions: new ones are read-only
        refused = client.post("/api/corpora", json={"text": "while read-only"})
        assert refused.status_code == 503 and "cannot be written" in refused.get_json()["error"]
        raw = client.post(  # the COPY path (a temporary table is refused too)
            "/api/corpora", data=b"raw text", content_type="text/plain", headers=owner.bearer
        )
        assert raw.status_code == 503, raw.get_data(as_text=True)
        assert client.get("/").status_code == 200
        # Read-only sessions in the pool, as a busy server has them when the primary is back.
        with database.engine.connect() as one, database.engine.connect() as two:
            for conn in (one, two):
                assert conn.execute(text("SHOW transaction_read_only")).scalar() == "on"
    finally:
        _set_read_only(database, False)
    # The same app: a session refused as read-only is let go with the pool, so at most the
    # first write still meets one.
    answers = [client.post("/api/corpora", json={"text": "writable"}).status_code]
    if answers[0] != 201:
        answers.append(client.post("/api/corpora", json={"text": "writable"}).status_code)
    assert answers[-1] == 201 and answers[0] in (201, 503), answers
    with database.read_scope() as session:
        assert session.scalar(select(func.count()).select_from(Corpus)) == 2
