"""The Celery worker's entry point: `celery -A webapp.celery_app worker` (README, "Running on
several machines"). It reads the same environment as the web app (DATABASE_URL,
CELERY_BROKER_URL, BPE_JOB_QUEUE, ...) and always uses the celery job backend."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready

from webapp import create_app

flask_app = create_app({"JOB_BACKEND": "celery"})
app = celery_app = flask_app.extensions["celery"]


@worker_ready.connect
def _sweep_lost_jobs(**_: Any) -> None:
    """A worker starting after a crash marks what the dead one left running (if stale)."""
    flask_app.extensions["bpe_jobs"].sweep()
