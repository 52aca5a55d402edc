"""The set-up the page benchmarks share: an app on a throw-away SQLite database with jobs left
queued, and corpora and tokenisers stored through the app's own paths (webapp.storage.uploads,
webapp.storage.convert), as an upload and a finished job store them."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bpe  # after the path: this checkout's own bpe and webapp
from webapp import create_app
from webapp.storage.convert import store_tokenizer
from webapp.storage.uploads import store_text


def bench_app(prefix: str, **config: Any):
    """A fresh app in a temporary folder (database and upload space), no job runner."""
    folder = tempfile.mkdtemp(prefix=prefix)
    return create_app(
        {
            "DATABASE_URL": f"sqlite:///{folder}/bench.sqlite3",
            "JOBS_EXECUTION": "manual",
            "UPLOAD_TMP_DIR": folder,
            **config,
        }
    )


def store_corpus(app, text: str, name: str = "bench") -> int:
    """Store text as an uploaded corpus; its id."""
    corpus, _ = store_text(
        app.extensions["bpe_db"], text, name=name, tmp_dir=app.config["UPLOAD_TMP_DIR"]
    )
    return corpus.id


def store_tokenizers(app, toks: list[bpe.Tokenizer], corpus_id: int) -> list[str]:
    """Store each tokeniser as a finished job on that corpus would; their slugs, in order."""
    slugs = []
    for tok in toks:
        with app.extensions["bpe_db"].session_scope() as session:
            slugs.append(store_tokenizer(session, tok, corpus_id=corpus_id).slug)
    return slugs


def owner_headers(client) -> dict[str, str]:
    """Headers that prove a new owner the way a script does (a bearer token, so no CSRF token
    or same-origin headers): the playground's form posts need one, as on the site."""
    token = client.post("/api/owners", json={}).get_json()["owner_token"]
    return {"Authorization": f"Bearer {token}"}
