"""Crash safety of the README's server: `kill -9` at a random moment while four clients upload
and a job trains, then a restart; twenty times.

After every restart: each upload that was answered 2xx is stored with the right sha256 (of
the text actually in the database), `PRAGMA integrity_check` is ok, the job that was training
is `interrupted`, and no upload temp file is left. At the end, the last interrupted job is run
again and its tokeniser must equal an uninterrupted training of the same corpus.

Loopback only, every wait bounded. Slow: about a minute or two on a quiet machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import random
import signal
import sqlite3
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import bpe
from tests.readme_server import start_readme_server
from tests.waiting import free_port, wait_for_server

ROUNDS = 20
UPLOADERS = 4
VOCAB = 3000
TRAIN_FORM = f"mode=chunked&vocab_size={VOCAB}&trainer=efficient".encode()
FORM = "application/x-www-form-urlencoded"


def training_text(seed: int = 8) -> str:
    """~1.5 MB of words from 20,000 made-up ones: a few seconds of training, many pairs."""
    rng = random.Random(seed)
    syllables = [a + b for a in "bcdfghklmnprstvz" for b in "aeiou"]
    words = [
        "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(20_000)
    ]
    return " ".join(rng.choice(words) for _ in range(250_000))


class Served:
    """The README's server in its own session (so one killpg takes it whole, children too)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            "PORT": str(self.port),
            "DATABASE_URL": f"sqlite:///{workdir / 'crash.sqlite3'}",
            "BPE_UPLOAD_TMP_DIR": str(workdir / "uploads-tmp"),
            "BPE_JOBS_EXECUTION": "thread",
        }
        self.log = open(workdir / "server.log", "ab")  # noqa: SIM115 - closed in kill()
        self.process = start_readme_server(env, stdout=self.log, stderr=self.log, own_session=True)
        wait_for_server(lambda: _get(self.base + "/")[0] == 200, timeout=120)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # gunicorn, its worker, training children
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self.log.close()


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(
        urllib.request.Request(url, headers=headers), timeout=30
    ) as response:
        return response.status, response.read()


def _owner_token(base: str) -> str:
    """A fresh owner, as a script gets one: its token goes along as a bearer token."""
    request = urllib.request.Request(
        base + "/api/owners", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return str(json.loads(response.read())["owner_token"])


def _post(base: str, path: str, body: bytes, content_type: str, token: str) -> tuple[bytes, str]:
    """POST as the owner, following a redirect; -> (body, path of the page it ended on)."""
    headers = {"Content-Type": content_type, "Authorization": f"Bearer {token}"}
    request = urllib.request.Request(base + path, data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read(), urllib.parse.urlsplit(response.url).path


def _uploader(
    base: str, token: str, rng: random.Random, stop: threading.Event, acked: list
) -> None:
    """Uploads random texts until told to stop or the server dies; records each 2xx."""
    host, port = base.removeprefix("http://").split(":")
    while not stop.is_set():
        size = rng.choice((200, 5_000, 50_000, 200_000))
        text = "".join(rng.choice("abcdefgh ij\n") for _ in range(size)).encode()
        text = b"x" + text  # never empty
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            conn.request(
                "POST",
                "/api/corpora?name=crash",
                body=text,
                headers={"Content-Type": "text/plain", "Authorization": f"Bearer {token}"},
            )
            response = conn.getresponse()
            reply = response.read()
            conn.close()
        except (OSError, http.client.HTTPException):
            return  # killed under us: this upload may or may not be stored, both are fine
        if 200 <= response.status < 300:
            acked.append((json.loads(reply)["slug"], hashlib.sha256(text).hexdigest()))


def _check_database(path: Path, acked: list, checked: int) -> None:
    """Integrity, every acknowledged upload's row and sha256; the text itself is hashed again
    for the uploads acknowledged since the last check (`acked[checked:]`)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        for n, (slug, sha) in enumerate(acked):
            row = conn.execute(
                "SELECT sha256, id FROM corpora WHERE slug = ? AND deleted_at IS NULL", (slug,)
            ).fetchone()
            if row is None:  # the same text uploaded again later got the row's new slug
                row = conn.execute(
                    "SELECT sha256, id FROM corpora WHERE sha256 = ?", (sha,)
                ).fetchone()
            assert row is not None and row[0] == sha, (slug, sha)
            if n < checked:
                continue
            with conn.blobopen("corpora", "text", row[1], readonly=True) as blob:
                digest = hashlib.sha256()
                while chunk := blob.read(1 << 20):
                    digest.update(chunk)
            assert digest.hexdigest() == sha, slug
    finally:
        conn.close()


def _job_status(path: Path, job_id: int) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        return conn.execute("SELECT status FROM training_jobs WHERE id = ?", (job_id,)).fetchone()[
            0
        ]
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.database("sqlite")  # the README's server on its default SQLite database
def test_kill_9_while_uploading_and_training_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(8)
    corpus_text = training_text()
    database = tmp_path / "crash.sqlite3"
    acked: list[tuple[str, str]] = []
    checked = 0
    server = Served(tmp_path)
    token = _owner_token(server.base)
    reply, _ = _post(
        server.base,
        "/api/corpora",
        json.dumps({"text": corpus_text}).encode(),
        "application/json",
        token,
    )
    corpus = json.loads(reply)["slug"]
    interrupted: list[str] = []  # paths of the jobs killed mid-training
    job: str | None = None  # the job path of this round
    try:
        for round_ in range(ROUNDS):
            if job is None:
                job = _post(server.base, f"/c/{corpus}/train", TRAIN_FORM, FORM, token)[1]
            job_id = int(job.rsplit("/", 1)[1])
            base = server.base
            wait_for_server(
                lambda base=base, job=job: (
                    b'data-status="queued"' not in _get(f"{base}{job}/status", token)[1]
                ),
                120,
            )
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=_uploader, args=(base, token, random.Random(rng.random()), stop, acked)
                )
                for _ in range(UPLOADERS)
            ]
            for thread in threads:
                thread.start()
            try:
                time.sleep(rng.uniform(0.05, 3.0))
            finally:
                server.kill()
                stop.set()
                for thread in threads:
                    thread.join(120)
            was = _job_status(database, job_id)  # what the kill interrupted
            server = Served(tmp_path)  # the restart: recovery and clean-up run at start-up
            temp = tmp_path / "uploads-tmp"
            assert not temp.exists() or os.listdir(temp) == [], round_
            _check_database(database, acked, checked)
            checked = len(acked)
            now = _job_status(database, job_id)
            if was == "running":
                assert now == "interrupted", (round_, now)
                interrupted.append(job)
                job = _post(server.base, f"{job}/rerun", b"", FORM, token)[1]
            else:
                assert was == now == "succeeded", (round_, was, now)
                job = None
        print(f"{len(interrupted)} of {ROUNDS} kills mid-training, {len(acked)} uploads acked")
        assert len(interrupted) >= ROUNDS // 2  # most kills caught the job mid-training
        assert len(acked) > ROUNDS  # and uploads were acknowledged all along
        # the last re-run, left alone this time, equals a training nobody interrupted
        final = job or _post(server.base, f"{interrupted[-1]}/rerun", b"", FORM, token)[1]
        base = server.base
        wait_for_server(
            lambda: b'data-status="succeeded"' in _get(f"{base}{final}/status", token)[1], 600
        )
        page = _get(base + final, token)[1].decode()
        slug = page.split('href="/t/', 1)[1].split('"', 1)[0]
        stored = bpe.formats.loads(_get(f"{base}/t/{slug}/download/json", token)[1].decode())
        expected = bpe.train(corpus_text, vocab_size=VOCAB, mode="chunked", trainer="efficient")
        assert stored.merges == expected.merges
    finally:
        server.kill()
