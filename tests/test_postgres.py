"""PostgreSQL-only checks, opt-in: set TEST_DATABASE_URL=postgresql://user:pass@host/db.

With that variable set, every other test file runs against PostgreSQL too (see conftest.py);
this file adds what only PostgreSQL has. Without it, the file is skipped.
"""

from __future__ import annotations

import hashlib
import threading

import pytest
from sqlalchemy import select, text

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
