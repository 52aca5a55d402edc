"""Logs for whoever runs the site: one JSON line per event (python-json-logger), each with its
time (`timestamp`, UTC), `level`, logger `name`, `message`, and the `request_id` and `job_id`
it belongs to, so one request or one job can be followed across processes and machines.

- The request id is the client's `X-Request-Id` (a balancer's, if it sends a sane one) or a
  new one; the answer carries it back in the same header.
- The job id is set around whatever runs a job (`job_context`): the Celery task, the embedded
  runner's thread, a job's child process.
- BPE_LOG_FORMAT=text keeps Python's plain lines (a terminal during development).
"""

from __future__ import annotations

import logging
import re
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

from flask import Flask, Response, g, has_request_context, request
from pythonjsonlogger.json import JsonFormatter

REQUEST_ID_HEADER = "X-Request-Id"
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_job: ContextVar[tuple[str, int] | None] = ContextVar("bpe_job", default=None)


@contextmanager
def job_context(kind: str, job_id: int) -> Iterator[None]:
    """Every log line inside says which job it is about."""
    token = _job.set((kind, job_id))
    try:
        yield
    finally:
        _job.reset(token)


class _Context(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = g.get("request_id") if has_request_context() else None
        job = _job.get()
        if not hasattr(record, "job_id"):
            record.job_id = job[1] if job else None
        if not hasattr(record, "job_kind"):
            record.job_kind = job[0] if job else None
        return True


def configure(
    log_format: str = "json", level: int = logging.INFO, *, stream: TextIO | None = None
) -> logging.Handler:
    """The root logger's one handler, on stderr (once per process, whoever asks again)."""
    root = logging.getLogger()
    for existing in root.handlers:
        if getattr(existing, "bpe_logs", False):
            return existing
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.bpe_logs = True  # type: ignore[attr-defined]
    handler.addFilter(_Context())
    if log_format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(levelname)s %(name)s %(message)s %(request_id)s %(job_id)s %(job_kind)s",
                rename_fields={"levelname": "level"},
                timestamp=True,
            )
        )
    else:
        plain = "%(asctime)s %(levelname)s %(name)s [%(request_id)s %(job_id)s] %(message)s"
        handler.setFormatter(logging.Formatter(plain))
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
    return handler


def init_app(app: Flask) -> None:
    """Request ids on every request and answer; the log handler for a serving process."""

    @app.before_request
    def _request_id() -> None:
        given = request.headers.get(REQUEST_ID_HEADER, "")
        g.request_id = given if _SANE_ID.fullmatch(given) else uuid.uuid4().hex

    @app.after_request
    def _echo(response: Response) -> Response:
        if "request_id" in g:
            response.headers[REQUEST_ID_HEADER] = g.request_id
        return response
