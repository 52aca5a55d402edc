"""What the pages read of an import job (the queue itself is webapp/jobs/imports.py)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload

from webapp.storage.models import ImportJob


def get_import_job(session: Session, job_id: int) -> ImportJob | None:
    """The job with its tokeniser (the file's bytes are deferred: a page never loads them)."""
    return session.scalar(
        select(ImportJob)
        .where(ImportJob.id == job_id)
        .options(joinedload(ImportJob.tokenizer))
        .execution_options(populate_existing=True)
    )
