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


def test_no_query_is_prepared_on_the_server(app):
    """A prepared statement's generic plan ignores which tokeniser a query asks for: with one
    import of 446,000 merges beside small tokenisers it made a merges page minutes long."""
    database = app.extensions["bpe_db"]
    with database.engine.connect() as connection:
        for _ in range(8):  # psycopg would prepare from the 5th run on
            connection.execute(
                text("SELECT count(*) FROM merges WHERE tokenizer_id = :t"), {"t": 1}
            )
        prepared = connection.execute(text("SELECT count(*) FROM pg_prepared_statements"))
        assert prepared.scalar_one() == 0
        assert connection.connection.dbapi_connection.prepare_threshold is None


def test_storing_a_large_tokeniser_refreshes_the_planners_statistics(app):
    """Planned on statistics from before a large import, its vocabulary page took a nested
    loop of minutes until autovacuum got to the tables: storing it analyzes them."""
    from bpe.importers import import_path
    from tests.reference_files import reference_dir
    from webapp.storage.convert import store_imported

    database = app.extensions["bpe_db"]
    with database.session_scope() as session:
        row = store_imported(session, import_path(reference_dir() / "gpt2.tiktoken"))
    with database.read_scope() as session:
        stats = session.execute(
            text(
                "SELECT relname, last_analyze FROM pg_stat_user_tables"
                " WHERE relname IN ('merges', 'vocab_entries')"
            )
        ).all()
        assert len(stats) == 2 and all(analyzed is not None for _, analyzed in stats), stats
        # ...and the statistics know the new tokeniser: the planner expects its rows.
        plan = (
            session.execute(
                text("EXPLAIN SELECT * FROM vocab_entries WHERE tokenizer_id = :t"), {"t": row.id}
            )
            .scalars()
            .all()
        )
        first = next(line for line in plan if "rows=" in line)
        rows = int(first.split("rows=")[1].split()[0])
        assert rows > 10_000, plan


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


@pytest.fixture
def small_temp_tablespace(app):
    """The app's temporary tables (an upload's COPY lands in one) on a 2 MB tmpfs: a disk that
    fills. Needs root, to mount it and to create a tablespace as the postgres superuser."""
    import os
    import shutil
    import subprocess
    import tempfile

    if os.geteuid() != 0 or shutil.which("psql") is None:
        pytest.skip("the disk-full test mounts a tmpfs and runs psql as postgres (root only)")
    database = app.extensions["bpe_db"]
    url = database.engine.url
    folder = tempfile.mkdtemp(prefix="bpe-pg-space-", dir="/var/tmp")
    os.chmod(folder, 0o755)

    def superuser(sql: str) -> None:
        command = ["su", "postgres", "-c", f'psql -q -p {url.port} -v ON_ERROR_STOP=1 -c "{sql}"']
        subprocess.run(command, check=True, capture_output=True, text=True)

    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,uid=postgres,mode=700", "tmpfs", folder],
        check=True,
    )
    try:
        superuser(f"CREATE TABLESPACE bpe_small LOCATION '{folder}'")
        superuser(f"GRANT CREATE ON TABLESPACE bpe_small TO {url.username}")
        superuser(f'ALTER DATABASE "{url.database}" SET temp_tablespaces = bpe_small')
        database.engine.dispose()  # new sessions take the setting
        yield folder
    finally:
        database.engine.dispose()
        subprocess.run(["mount", "-o", "remount,size=20m", folder], check=False)
        for sql in (
            f'ALTER DATABASE "{url.database}" RESET temp_tablespaces',
            "DROP TABLESPACE IF EXISTS bpe_small",
        ):
            superuser(sql)
        subprocess.run(["umount", "-l", folder], check=False)
        os.rmdir(folder)


def test_a_full_disk_under_an_upload_answers_507_and_heals(
    app, client, owner, small_temp_tablespace
):
    """The COPY of an upload's text runs on psycopg's own cursor, whose errors SQLAlchemy never
    wraps: PostgreSQL's disk_full (53100) must still be a 507, not a 500."""
    import os
    import subprocess

    body = os.urandom(1_500_000).hex().encode()  # 3 MB: more than the 2 MB disk holds
    refused = client.post(
        "/api/corpora", data=body, content_type="text/plain", headers=owner.bearer
    )
    assert refused.status_code == 507, refused.get_data(as_text=True)
    assert "storage is full" in refused.get_json()["error"]
    with app.extensions["bpe_db"].read_scope() as session:
        assert session.scalar(select(func.count()).select_from(Corpus)) == 0
    # room again (the disk grows): the same upload, the same app
    subprocess.run(["mount", "-o", "remount,size=20m", small_temp_tablespace], check=True)
    stored = client.post("/api/corpora", data=body, content_type="text/plain", headers=owner.bearer)
    assert stored.status_code == 201, stored.get_data(as_text=True)
    assert stored.get_json()["sha256"] == hashlib.sha256(body).hexdigest()
