"""A hypothesis state machine over what visitors do: upload, train, cancel, rename,
delete, view, encode and share, with random bytes and names, by two owners and a stranger.

After every step: no answer was a 5xx; every acknowledged corpus is present with its sha256
unless its owner deleted it; no orphan rows; no upload temp files; and the stranger (who only
ever tries to change what others own) changed nothing: names, training permissions and
existence match what the owners' own actions made them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from sqlalchemy import select

from tests.conftest import BrowserClient, ensure_owner
from tests.test_owners import assert_no_orphans
from webapp import create_app, stop_runners
from webapp.plumbing.owners import new_token
from webapp.storage.models import Corpus, Tokenizer, TrainingJob

ACTORS = ("a", "b", "stranger")
OWNERS = ("a", "b")
TRAIN = {"mode": "chunked", "vocab_size": "270", "trainer": "reference", "pattern": "gpt4"}
names = st.text(max_size=30)
bodies = st.one_of(
    st.binary(max_size=120),
    st.text(max_size=80).map(lambda t: t.encode("utf-8")),
    st.sampled_from([b"", b"\xef\xbb\xbfbom text", b"a\x00b", b"\xff\xfe", "ü".encode()]),
)


@dataclass
class CorpusModel:
    slug: str
    owner: str
    sha256: str
    name: str
    allow_training: bool = False
    deleted: bool = False
    tokenizers: list[str] = field(default_factory=list)


@dataclass
class TokenizerModel:
    slug: str
    owner: str
    corpus: str
    name: str | None = None
    deleted: bool = False


def _expected_sha(body: bytes) -> str | None:
    """What the upload rules store for plain UTF-8 without a BOM; None when not predictable
    here (a BOM, or a refusal)."""
    if body.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or "\x00" in text:
        return None
    return hashlib.sha256(body).hexdigest()


class OwnersMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="owners-machine-")
        self.app = create_app(
            {
                "TESTING": True,
                "SECRET_KEY": "machine",
                "DATABASE_URL": f"sqlite:///{os.path.join(self.tmp, 'db.sqlite3')}",
                "UPLOAD_TMP_DIR": os.path.join(self.tmp, "uploads-tmp"),
                "JOBS_EXECUTION": "manual",
                "JOBS_PROGRESS_INTERVAL": 0.0,
                "JOBS_PER_OWNER": 3,
            }
        )
        self.tokens = {name: new_token() for name in OWNERS}
        self.clients = {
            name: BrowserClient(self.app, self.app.response_class, owner_token=token)
            for name, token in self.tokens.items()
        }
        self.clients["stranger"] = BrowserClient(
            self.app, self.app.response_class, owner_token=None
        )
        self.corpora: list[CorpusModel] = []
        self.tokenizers: list[TokenizerModel] = []
        self.jobs: list[tuple[int, str, str]] = []  # (job id, corpus slug, owner)

    def teardown(self) -> None:
        stop_runners(self.app)
        self.app.extensions["bpe_db"].dispose()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ----- helpers -------------------------------------------------------------------------------
    def send(self, actor: str, method: str, url: str, **kwargs):
        response = self.clients[actor].open(url, method=method, **kwargs)
        assert response.status_code < 500, (actor, method, url, response.status_code)
        # --hypothesis-show-statistics lists which answers the runs reached
        route = re.sub(r"[A-Za-z0-9_-]{22}|\d+", "*", url)
        event(
            f"{actor if actor == 'stranger' else 'owner'} {method} {route}: {response.status_code}"
        )
        return response

    def owner_only(self, actor: str, item, response) -> bool:
        """A change only the owner may make: a deleted item is 404, someone else 403. True when
        the answer is the owner's to check further."""
        if item.deleted:
            assert response.status_code == 404
            return False
        if actor != item.owner:
            assert response.status_code == 403
            return False
        return True

    def pick(self, items: list, index: int):
        return items[index % len(items)] if items else None

    def live_tokenizers_of(self, corpus: CorpusModel) -> list[TokenizerModel]:
        return [t for t in self.tokenizers if t.corpus == corpus.slug and not t.deleted]

    # ----- rules ---------------------------------------------------------------------------------
    @initialize(texts=st.lists(st.text(min_size=1, max_size=60), min_size=2, max_size=2))
    def each_owner_has_a_trained_corpus(self, texts: list[str]) -> None:
        """A start with something to act on: one corpus per owner, each with a tokeniser."""
        for actor, text in zip(OWNERS, texts, strict=True):
            body = f"{actor} starts with: {text}\n".encode()
            self.upload(actor, body, f"{actor}'s corpus", "raw")
            self.train(actor, len(self.corpora) - 1)
        self.run_jobs(2)

    @rule(
        actor=st.sampled_from(OWNERS),
        body=bodies,
        name=names,
        how=st.sampled_from(["raw", "json", "form"]),
    )
    def upload(self, actor: str, body: bytes, name: str, how: str) -> None:
        bearer = {"Authorization": f"Bearer {self.tokens[actor]}"}
        if how == "raw":
            response = self.send(
                actor,
                "POST",
                "/api/corpora",
                data=body,
                headers=bearer,
                query_string={"name": name},
            )
        else:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                return
            if how == "json":
                response = self.send(
                    actor, "POST", "/api/corpora", json={"text": text, "name": name}
                )
            else:
                response = self.send(actor, "POST", "/corpora", data={"text": text, "name": name})
        if response.status_code >= 400:
            assert response.status_code in (400, 413, 422), response.status_code
            return
        if how == "form":
            assert response.status_code == 303
            slug = response.headers["Location"].rsplit("/", 1)[-1]
            sha = self.send(actor, "GET", f"/api/corpora/{slug}").get_json()["sha256"]
        else:
            answer = response.get_json()
            slug, sha = answer["slug"], answer["sha256"]
        expected = _expected_sha(body)
        if expected is not None and how != "form":  # a form field's line ends may be normalised
            assert sha == expected
        known = next((c for c in self.corpora if c.slug == slug), None)
        if known is None:
            with self.app.extensions["bpe_db"].read_scope() as session:
                stored_name = session.scalar(select(Corpus.name).where(Corpus.slug == slug))
            self.corpora.append(CorpusModel(slug, actor, sha, stored_name))
        else:
            assert known.owner == actor and not known.deleted and known.sha256 == sha

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50))
    def train(self, actor: str, index: int) -> None:
        corpus = self.pick(self.corpora, index)
        if corpus is None:
            return
        response = self.send(actor, "POST", f"/c/{corpus.slug}/train", data=TRAIN)
        if corpus.deleted:
            assert response.status_code == 404
        elif actor == corpus.owner or corpus.allow_training:
            assert response.status_code in (303, 429), response.status_code
            if response.status_code == 303:
                job_id = int(response.headers["Location"].rsplit("/", 1)[-1])
                self.jobs.append((job_id, corpus.slug, actor))
        else:
            assert response.status_code == 403

    @rule(steps=st.integers(1, 3))
    def run_jobs(self, steps: int) -> None:
        runner = self.app.extensions["bpe_jobs"]
        for _ in range(steps):
            job_id = runner.run_next()
            if job_id is None:
                return
            with self.app.extensions["bpe_db"].read_scope() as session:
                job = session.get(TrainingJob, job_id)
                made = job.tokenizer.slug if job.tokenizer is not None else None
            if made is not None:
                _, corpus_slug, owner = next(j for j in self.jobs if j[0] == job_id)
                self.tokenizers.append(TokenizerModel(made, owner, corpus_slug))

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50))
    def cancel(self, actor: str, index: int) -> None:
        job = self.pick(self.jobs, index)
        if job is None:
            return
        job_id, corpus_slug, owner = job
        corpus = next(c for c in self.corpora if c.slug == corpus_slug)
        response = self.send(actor, "POST", f"/c/{corpus_slug}/jobs/{job_id}/cancel")
        if corpus.deleted:
            assert response.status_code == 404
        elif actor == owner:
            assert response.status_code in (303, 404)  # 404: its tokeniser (and it) deleted
        else:
            assert response.status_code in (403, 404)

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50), name=names)
    def rename_corpus(self, actor: str, index: int, name: str) -> None:
        corpus = self.pick(self.corpora, index)
        if corpus is None:
            return
        response = self.send(actor, "POST", f"/c/{corpus.slug}/rename", data={"name": name})
        if not self.owner_only(actor, corpus, response):
            return
        if response.status_code == 303:
            corpus.name = self._stored(Corpus, corpus.slug).name
            assert corpus.name.strip()
        else:
            assert response.status_code == 422  # nothing left of the name once cleaned

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50), allow=st.booleans())
    def allow_training(self, actor: str, index: int, allow: bool) -> None:
        corpus = self.pick(self.corpora, index)
        if corpus is None:
            return
        response = self.send(
            actor, "POST", f"/c/{corpus.slug}/training", data={"allow": "1" if allow else "0"}
        )
        if self.owner_only(actor, corpus, response):
            assert response.status_code == 303
            corpus.allow_training = allow

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50), name=names)
    def rename_tokenizer(self, actor: str, index: int, name: str) -> None:
        tok = self.pick(self.tokenizers, index)
        if tok is None:
            return
        response = self.send(actor, "PATCH", f"/api/t/{tok.slug}", json={"name": name})
        if self.owner_only(actor, tok, response):
            assert response.status_code == 200
            tok.name = response.get_json()["name"]

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50), confirm=st.booleans())
    def delete_corpus(self, actor: str, index: int, confirm: bool) -> None:
        corpus = self.pick(self.corpora, index)
        if corpus is None:
            return
        body = {"delete_tokenizers": True} if confirm else {}
        has_tokenizers = self._tokenizer_count(corpus) > 0  # before: a delete removes the row
        response = self.send(actor, "DELETE", f"/api/corpora/{corpus.slug}", json=body)
        if not self.owner_only(actor, corpus, response):
            return
        if not confirm and has_tokenizers:
            assert response.status_code == 409
        else:
            assert response.status_code == 200, response.get_data(as_text=True)
            corpus.deleted = True
            for tok in self.tokenizers:
                if tok.corpus == corpus.slug:
                    tok.deleted = True

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50))
    def delete_tokenizer(self, actor: str, index: int) -> None:
        tok = self.pick(self.tokenizers, index)
        if tok is None:
            return
        response = self.send(actor, "DELETE", f"/api/t/{tok.slug}", json={})
        if self.owner_only(actor, tok, response):
            assert response.status_code == 200
            tok.deleted = True

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50))
    def view(self, actor: str, index: int) -> None:
        home = self.send(actor, "GET", "/").get_data(as_text=True)
        for corpus in self.corpora:  # a home page lists its visitor's own, nobody else's
            if corpus.slug in home:
                assert corpus.owner == actor and not corpus.deleted
        for tok in self.tokenizers:
            if tok.slug in home:
                assert tok.owner == actor and not tok.deleted
        corpus = self.pick(self.corpora, index)
        if corpus is not None:
            page = self.send(actor, "GET", f"/c/{corpus.slug}")
            assert page.status_code == (404 if corpus.deleted else 200)
            for tok in self.tokenizers:
                if tok.slug in page.get_data(as_text=True):
                    assert tok.owner == actor

    @rule(actor=st.sampled_from(ACTORS), index=st.integers(0, 50), text=st.text(max_size=60))
    def encode(self, actor: str, index: int, text: str) -> None:
        tok = self.pick(self.tokenizers, index)
        if tok is None:
            return
        response = self.send(actor, "POST", f"/api/t/{tok.slug}/encode", json={"text": text})
        assert response.status_code == (404 if tok.deleted else 200)

    @precondition(lambda self: self.tokenizers)
    @rule(actor=st.sampled_from(OWNERS), index=st.integers(0, 50), text=st.text(max_size=60))
    def share(self, actor: str, index: int, text: str) -> None:
        tok = self.pick(self.tokenizers, index)
        response = self.send(actor, "POST", f"/t/{tok.slug}/share", data={"text": text})
        assert response.status_code == (404 if tok.deleted else 303)

    # ----- invariants ----------------------------------------------------------------------------
    def _stored(self, model, slug: str):
        with self.app.extensions["bpe_db"].read_scope() as session:
            return session.scalar(select(model).where(model.slug == slug))

    def _tokenizer_count(self, corpus: CorpusModel) -> int:
        with self.app.extensions["bpe_db"].read_scope() as session:
            row = session.scalar(select(Corpus).where(Corpus.slug == corpus.slug))
            if row is None:  # deleted earlier: its tokenisers went with it
                return 0
            return len(
                session.scalars(select(Tokenizer.id).where(Tokenizer.corpus_id == row.id)).all()
            )

    @invariant()
    def acknowledged_corpora_are_there_unless_their_owner_deleted_them(self) -> None:
        owner_ids = {name: ensure_owner(self.app, token) for name, token in self.tokens.items()}
        for corpus in self.corpora:
            row = self._stored(Corpus, corpus.slug)
            if corpus.deleted:
                assert row is None
                continue
            assert row is not None and row.sha256 == corpus.sha256
            assert row.owner_id == owner_ids[corpus.owner]
            # Nobody but the owner changed it (the stranger and the other owner only tried).
            assert row.name == corpus.name and row.allow_training == corpus.allow_training

    @invariant()
    def tokenizers_are_there_unless_deleted(self) -> None:
        for tok in self.tokenizers:
            row = self._stored(Tokenizer, tok.slug)
            assert (row is None) == tok.deleted
            if row is not None:
                assert row.name == tok.name

    @invariant()
    def no_orphan_rows(self) -> None:
        assert_no_orphans(self.app)

    @invariant()
    def no_temp_files(self) -> None:
        folder = self.app.config["UPLOAD_TMP_DIR"]
        assert not os.path.isdir(folder) or os.listdir(folder) == []


OwnersMachine.TestCase.settings = settings(
    # About 8 s per example on a loaded machine: slow-marked, so `-m 'not slow'` skips it.
    max_examples=int(os.environ.get("OWNERS_MACHINE_EXAMPLES", "20")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
# slow, and embedded only: it runs the queued jobs itself with the embedded runner's run_next
TestOwnersMachine = pytest.mark.embedded_only(pytest.mark.slow(OwnersMachine.TestCase))
