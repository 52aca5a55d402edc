"""The home page: the upload form and what was made most recently."""

from __future__ import annotations

from flask import Blueprint, render_template
from sqlalchemy import select
from sqlalchemy.orm import joinedload

from webapp import db
from webapp.models import Corpus, Tokenizer

bp = Blueprint("home", __name__)
RECENT = 10


@bp.get("/")
def index():
    return render_home()


def render_home(*, error: str | None = None, status: int = 200, form: dict | None = None):
    """The home page, also re-rendered with an error when an upload is refused."""
    session = db.session()
    corpora = session.scalars(
        select(Corpus)
        .where(Corpus.deleted_at.is_(None))
        .order_by(Corpus.created_at.desc(), Corpus.id.desc())
        .limit(RECENT)
    ).all()
    tokenizers = session.scalars(
        select(Tokenizer)
        .join(Corpus)
        .where(Tokenizer.deleted_at.is_(None), Corpus.deleted_at.is_(None))
        .options(joinedload(Tokenizer.corpus))
        .order_by(Tokenizer.created_at.desc(), Tokenizer.id.desc())
        .limit(RECENT)
    ).all()
    html = render_template(
        "home.html", corpora=corpora, tokenizers=tokenizers, error=error, form=form or {}
    )
    return html, status
