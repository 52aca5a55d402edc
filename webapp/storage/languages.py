"""What the pages read of language jobs: one job (if the visitor may see it), the jobs a
visitor may see, and a finished job's counts. The queue itself is webapp/jobs/languages.py.

A job is its owner's; anyone else sees it only when they may see every one of its tokenisers
(references, and their own), so no page hands out another owner's tokeniser: the rule of
evaluations (webapp/storage/evaluations.py).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from webapp.storage.models import LanguageCount, LanguageJob, ParallelText, Tokenizer


def job_tokenizers(session: Session, job: LanguageJob) -> list[Tokenizer]:
    """The job's live tokenisers, in the order they were asked for (a deleted one is left out)."""
    ids = job.tokenizer_id_list
    rows = {
        row.id: row
        for row in session.scalars(
            select(Tokenizer).where(Tokenizer.id.in_(ids), Tokenizer.deleted_at.is_(None))
        )
    }
    return [rows[i] for i in ids if i in rows]


def _sees_all(tokenizers: list[Tokenizer], owner_id: int | None) -> bool:
    return all(
        t.reference is not None or (owner_id is not None and t.owner_id == owner_id)
        for t in tokenizers
    )


def visible(session: Session, job: LanguageJob, owner_id: int | None) -> bool:
    if owner_id is not None and job.owner_id == owner_id:
        return True
    return _sees_all(job_tokenizers(session, job), owner_id)


def find_language_job(session: Session, job_id: int) -> LanguageJob | None:
    """The job whoever may see it (a change then asks for its owner, 403 to anyone else)."""
    return session.scalar(
        select(LanguageJob)
        .where(LanguageJob.id == job_id)
        .execution_options(populate_existing=True)
    )


def get_language_job(session: Session, job_id: int, *, owner_id: int | None) -> LanguageJob | None:
    """The job if this visitor may see it; else None (ids are sequential, so to anyone else it
    is missing, like another owner's training job)."""
    job = find_language_job(session, job_id)
    return job if job is not None and visible(session, job, owner_id) else None


def jobs_for(session: Session, owner_id: int | None, *, limit: int = 20) -> list[LanguageJob]:
    """The newest jobs this visitor may see: their own, and finished ones of references only."""
    newest = session.scalars(
        select(LanguageJob).order_by(LanguageJob.id.desc()).limit(limit * 5)
    ).all()
    shown = []
    for job in newest:
        own = owner_id is not None and job.owner_id == owner_id
        if own or (job.status == "succeeded" and visible(session, job, owner_id)):
            shown.append(job)
    return shown[:limit]


def counts_of(session: Session, job_id: int) -> dict[tuple[int, int], int]:
    """(text id, tokenizer id) -> tokens, for every count the job stored."""
    return {
        (text_id, tokenizer_id): tokens
        for text_id, tokenizer_id, tokens in session.execute(
            select(LanguageCount.text_id, LanguageCount.tokenizer_id, LanguageCount.tokens).where(
                LanguageCount.job_id == job_id
            )
        )
    }


def counted_texts(session: Session, job_id: int) -> list[ParallelText]:
    """The texts the job counted, by code."""
    ids = select(LanguageCount.text_id).where(LanguageCount.job_id == job_id).distinct()
    return list(
        session.scalars(
            select(ParallelText).where(ParallelText.id.in_(ids)).order_by(ParallelText.code)
        )
    )
