"""The sample corpus a first-time visitor can try, generated here in the project's own words,
and the site-wide pair of tokenisers trained on it (naive and chunked, so the home page can
open a naive-vs-chunked comparison at once).

A small seeded grammar writes a few hundred lines of plain English (a workshop's notes on
tokenisers, weather and bread), with numbers, a little Python and some non-Latin lines, so
naive and chunked training differ visibly: naive merges across word boundaries (`e t`, `, the`),
chunked never does. The text is the same on every machine and every start (a fixed seed).

Ownership: the sample is the site's, not a visitor's. Its corpus and its two
tokenisers have no owner, so nobody can rename or delete them and everyone opens the same
links; they are trained once (by `flask sample`, which `make run` runs, or by the first
visitor's click) and from then on a visitor sees them with no wait, whatever the queue holds.
Anyone may train more on the sample corpus (an ownerless corpus allows it); what they train
is theirs.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from functools import cache

import click
from flask import Flask, current_app, url_for
from flask.cli import with_appcontext
from sqlalchemy import select
from sqlalchemy.orm import Session

from webapp.jobs import get_jobs
from webapp.jobs.settings import JobSettings
from webapp.storage import db
from webapp.storage.models import ACTIVE_STATUSES, Corpus, Tokenizer, TrainingJob
from webapp.storage.uploads import store_text

SAMPLE_NAME = "Sample: workshop notes (generated)"
SAMPLE_FILENAME = "sample-workshop-notes.txt"
SAMPLE_VOCAB_SIZE = 512
SAMPLE_LINES = 900
_SEED = 20261201

_SUBJECTS = (
    "the tokeniser",
    "our baker",
    "the weather report",
    "a careful reader",
    "the new model",
    "every student",
    "the night train",
    "my neighbour",
    "the workshop",
    "this little script",
    "the river",
    "a patient teacher",
    "the old library",
    "the market",
    "each merge",
)
_VERBS = (
    "counts",
    "splits",
    "remembers",
    "bakes",
    "watches",
    "learns",
    "shares",
    "compares",
    "measures",
    "follows",
    "opens",
    "repeats",
    "joins",
    "finds",
    "explains",
)
_OBJECTS = (
    "the most frequent pair",
    "fresh bread before seven",
    "the longest words",
    "rain in the north",
    "every byte of the text",
    "a short poem",
    "the same sentence twice",
    "numbers like 1,024",
    "the spaces between words",
    "a list of prices",
    "the morning news",
    "the first chapter",
    "tokens that start with a space",
    "the slow afternoon",
    "what it saw yesterday",
)
_ENDINGS = (
    ".",
    ".",
    ".",
    "!",
    "?",
    ", and then it rests.",
    ", again and again.",
    " before lunch.",
    " with great care.",
    ", as always.",
    " in the evening.",
    " (twice).",
)
_CODE = (
    "def merge(ids, pair, new_id):",
    "    out, i = [], 0",
    "    while i < len(ids):",
    "        if ids[i:i + 2] == list(pair):",
    "            out.append(new_id)",
    "            i += 2",
    "        else:",
    "            out.append(ids[i])",
    "            i += 1",
    "    return out",
)
_OTHER_SCRIPTS = (
    "東京の朝はとても静かです。",
    "北京今天下雨，我们在图书馆读书。",
    "Привет, мир! Сегодня мы считаем пары.",
    "Καλημέρα· το ψωμί είναι ζεστό.",
    "¡Buenos días! El panadero abre a las siete.",
    "Grüße aus Köln: das Wetter ist schön.",
)


@cache
def sample_text() -> str:
    """The sample corpus: about 50 kB of generated lines, identical on every call."""
    rng = random.Random(_SEED)
    lines: list[str] = []
    for n in range(SAMPLE_LINES):
        kind = rng.random()
        if kind < 0.08:
            start = rng.randrange(len(_CODE) - 3)
            lines.extend(_CODE[start : start + 3])
        elif kind < 0.14:
            lines.append(rng.choice(_OTHER_SCRIPTS))
        elif kind < 0.2:
            price = rng.randrange(1, 500) + rng.randrange(100) / 100
            lines.append(f"Item {n}: {rng.choice(_OBJECTS)} costs {price:.2f} euros.")
        else:
            sentence = (
                f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
                f"{rng.choice(_ENDINGS)}"
            )
            lines.append(sentence[0].upper() + sentence[1:])
        if rng.random() < 0.1:
            lines.append("")
    return "\n".join(lines) + "\n"


@cache
def sample_sha256() -> str:
    """The stored text's SHA-256 (the text has no BOM and no CR, so it is stored as it is)."""
    return hashlib.sha256(sample_text().encode("utf-8")).hexdigest()


# What the comparison opens with, so its text box shows both cuts at once: a sentence like the
# sample's own, a number, code and Chinese (where naive and chunked differ most visibly).
DEMO_TEXT = (
    "The careful reader compares the tokens of this sentence, 1,024 times before lunch.\n"
    "def merge(ids, pair, new_id):\n"
    "北京今天下雨，我们在图书馆读书。\n"
)

# ----- the site-wide sample: its corpus, its two tokenisers, the jobs that train them ---------
MODES = ("naive", "chunked")
SAMPLE_SETTINGS = {
    "naive": JobSettings(mode="naive", pattern=None, vocab_size=SAMPLE_VOCAB_SIZE),
    "chunked": JobSettings(mode="chunked", pattern="gpt4", vocab_size=SAMPLE_VOCAB_SIZE),
}


@dataclass
class SampleState:
    """What exists of the sample now: its corpus, and per mode its tokeniser or latest job."""

    corpus: Corpus | None = None
    tokenizers: dict[str, Tokenizer] = field(default_factory=dict)
    jobs: dict[str, TrainingJob] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return all(mode in self.tokenizers for mode in MODES)

    @property
    def training(self) -> bool:
        return any(
            job.status in ACTIVE_STATUSES
            for mode, job in self.jobs.items()
            if mode not in self.tokenizers
        )

    @property
    def failed(self) -> list[TrainingJob]:
        """Finished jobs of modes that still have no tokeniser (a click trains them again)."""
        return [
            job
            for mode, job in self.jobs.items()
            if mode not in self.tokenizers and job.status not in ACTIVE_STATUSES
        ]


def find_sample(session: Session) -> SampleState:
    """The sample as it stands (reads only; a GET may call it)."""
    corpus = session.scalar(
        select(Corpus)
        .where(
            Corpus.sha256 == sample_sha256(),
            Corpus.owner_id.is_(None),
            Corpus.deleted_at.is_(None),
        )
        .order_by(Corpus.id)
        .limit(1)
    )
    state = SampleState(corpus)
    if corpus is None:
        return state
    for row in session.scalars(
        select(Tokenizer)
        .where(
            Tokenizer.corpus_id == corpus.id,
            Tokenizer.owner_id.is_(None),
            Tokenizer.deleted_at.is_(None),
            Tokenizer.vocab_size_requested == SAMPLE_VOCAB_SIZE,
            Tokenizer.mode.in_(MODES),
        )
        .order_by(Tokenizer.id)
    ):
        state.tokenizers.setdefault(row.mode, row)
    for job in session.scalars(
        select(TrainingJob)
        .where(TrainingJob.corpus_id == corpus.id, TrainingJob.owner_id.is_(None))
        .order_by(TrainingJob.id)
    ):
        settings = JobSettings.from_json(job.settings)
        if SAMPLE_SETTINGS.get(settings.mode) == settings:
            state.jobs[settings.mode] = job  # the latest one per mode
    return state


def comparison_url(state: SampleState) -> str | None:
    """The pair's comparison, opened on DEMO_TEXT; None until both tokenisers exist."""
    if not state.ready:
        return None
    naive, chunked = state.tokenizers["naive"], state.tokenizers["chunked"]
    return url_for("compare.show", slug_a=naive.slug, slug_b=chunked.slug, text=DEMO_TEXT)


def playground_url(row: Tokenizer) -> str:
    """One of the pair's playgrounds, opened on DEMO_TEXT already cut (an empty box shows
    nothing to a first visitor)."""
    return url_for("tokenizers.show", slug=row.slug, text=DEMO_TEXT, _anchor="playground-title")


def sample_siblings(session: Session, row: Tokenizer) -> list[Tokenizer]:
    """The sample pair (but `row`) when `row` was trained on the sample corpus, by the site or
    by a visitor: what anyone training on the sample wants to hold theirs against."""
    if row.corpus_id is None:
        return []
    state = find_sample(session)
    if state.corpus is None or row.corpus_id != state.corpus.id:
        return []
    return [
        state.tokenizers[m]
        for m in MODES
        if m in state.tokenizers and state.tokenizers[m].id != row.id
    ]


def start_sample(app: Flask) -> list[int]:
    """Store the sample corpus if it is missing and queue the training of whichever of its two
    tokenisers is neither there nor on its way. -> the ids of the jobs queued now (none when
    everything is ready or running). JobQueueFull (429) when the queue has no room."""
    database = db.get_db()
    store_text(
        database,
        sample_text(),
        name=SAMPLE_NAME,
        filename=SAMPLE_FILENAME,
        tmp_dir=app.config["UPLOAD_TMP_DIR"],
        owner_id=None,
    )
    with database.read_scope() as session:
        state = find_sample(session)
        assert state.corpus is not None
        corpus_id = state.corpus.id
        missing = [
            mode
            for mode in MODES
            if mode not in state.tokenizers
            and not (mode in state.jobs and state.jobs[mode].status in ACTIVE_STATUSES)
        ]
    if not missing:
        return []
    # Both or neither, like the corpus page's naive-vs-chunked pair; no owner: the site's.
    return get_jobs().submit_many(corpus_id, [SAMPLE_SETTINGS[mode] for mode in missing])


@click.command("sample")
@with_appcontext
def sample_command() -> None:
    """Store the sample corpus and queue its two tokenisers unless they exist (the serving
    process trains them); `make run` runs this, so a first visitor never waits for them."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # typed as the Flask it proxies
    queued = start_sample(app)
    if queued:
        click.echo(f"sample: queued jobs {', '.join(map(str, queued))}; the server trains them")
    else:
        click.echo("sample: ready (or already training)")


def init_app(app: Flask) -> None:
    app.cli.add_command(sample_command)
