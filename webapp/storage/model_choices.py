"""The SQL of the home page's model picker: every tokeniser a visitor may encode with there.

That is the site's own (the references, the models the site imported, the sample pair) and the
visitor's own, never anyone else's: a list on a page must not hand out a link its visitor was
not given. A row exists only once its training or import has finished (both store it in one
transaction), so whatever this finds is ready to encode.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import ColumnElement, case, or_, select
from sqlalchemy.orm import Session, joinedload

from webapp.storage.models import Corpus, Tokenizer

CHOICES_LIMIT = 60  # the picker's options; the visitor's own newest first after the site's


def ready_models(
    session: Session,
    *,
    owner_id: int | None,
    site_ids: Collection[int] = (),
    limit: int = CHOICES_LIMIT,
) -> list[Tokenizer]:
    """The site's references first (by label: GPT-2, GPT-4, GPT-4o), then the models it imported
    (by name), then `site_ids` (the sample pair, which the content layer finds) and then the
    visitor's own, newest first; at most `limit` rows."""
    site_import = Tokenizer.owner_id.is_(None) & Tokenizer.source_format.is_not(None)
    shown: list[ColumnElement[bool]] = [site_import]
    if site_ids:
        shown.append(Tokenizer.id.in_(list(site_ids)))
    if owner_id is not None:
        shown.append(Tokenizer.owner_id == owner_id)
    group = case(
        (Tokenizer.reference.is_not(None) & site_import, 0),
        (site_import, 1),
        (Tokenizer.owner_id.is_(None), 2),
        else_=3,
    )
    # Newest first among the visitor's own; the site's groups keep a stable order.
    newest = case((group == 3, -Tokenizer.id), else_=Tokenizer.id)
    return list(
        session.scalars(
            select(Tokenizer)
            .outerjoin(Corpus)  # imported tokenisers have no corpus
            .where(Tokenizer.deleted_at.is_(None), Corpus.deleted_at.is_(None), or_(*shown))
            .options(joinedload(Tokenizer.corpus))
            .order_by(group, Tokenizer.reference, Tokenizer.source_name, newest)
            .limit(limit)
        )
    )
