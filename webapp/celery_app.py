"""The Celery worker's entry point: `celery -A webapp.celery_app worker`
(docs/operations.md). It reads the same environment as the web app (DATABASE_URL,
CELERY_BROKER_URL, BPE_JOB_QUEUE, ...) and always uses the celery job backend."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import setup_logging, worker_ready

from webapp import create_app, logs

# A worker signs no session or form, so it needs no SECRET_KEY (the web processes do).
flask_app = create_app({"JOB_BACKEND": "celery"}, serves_pages=False)
app = celery_app = flask_app.extensions["celery"]


@setup_logging.connect
def _json_logs(loglevel: int | str | None = None, **_: Any) -> None:
    """The worker logs as the web does (webapp/logs.py), its own lines included."""
    level = logging.getLevelName(loglevel) if isinstance(loglevel, str) else loglevel
    logs.configure(flask_app.config["LOG_FORMAT"], level if isinstance(level, int) else 20)


@worker_ready.connect
def _sweep_lost_jobs(**_: Any) -> None:
    """A worker starting after a crash marks what the dead one left running (if stale)."""
    flask_app.extensions["bpe_jobs"].sweep()
