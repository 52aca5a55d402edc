"""gunicorn settings for the README's run command (`make run`).

Worker processes with threads: one per core, at most 4 (`WEB_CONCURRENCY` sets the number), 8
threads each (`BPE_WEB_THREADS`). Threads alone left one core idle: the GIL lets one thread of
a process run Python at a time, and a request is mostly Python. Every worker imports
`webapp.wsgi` and so asks to run the embedded jobs and evaluations; their file locks let
exactly one worker run each (a job submitted through another worker is picked up by the
runner's next look at the queue, within a second), and whichever worker takes over after a
restart recovers what was left. Set `PORT` (default 5000) and `HOST` (default 127.0.0.1; use
0.0.0.0 only behind a proxy you trust). With BPE_JOB_BACKEND=celery the web holds no jobs.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

from webapp.gunicorn_worker import LIMIT_REQUEST_LINE

if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter
    from gunicorn.workers.base import Worker

# /metrics adds up the request counts of every worker process from files in this folder
# (webapp/plumbing/metrics.py); it must be set before a worker imports the app, and start
# empty, so each server makes its own unless one is given.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="bpe-metrics-"))

bind = f"{os.environ.get('HOST') or '127.0.0.1'}:{os.environ.get('PORT') or '5000'}"
workers = int(os.environ.get("WEB_CONCURRENCY") or min(os.cpu_count() or 1, 4))
threads = int(os.environ.get("BPE_WEB_THREADS") or 8)
# Uploads of up to BPE_MAX_UPLOAD_MB stream through one request; give slow links time.
timeout = 300
graceful_timeout = 10
accesslog = "-"
# gunicorn's control socket (one fixed path per user) would clash between several servers on
# one machine, and nothing here uses it.
control_socket_disable = True
# A request reaches a thread only once it has arrived (slow clients wait in the event loop and
# are answered 408 when their time is up), and gunicorn's own refusals (a request line it cannot
# parse) answer JSON like the app's errors; the line may be up to 8 KB, so the app's own 414
# (webapp/plumbing/inputs.py) covers most long URLs. See webapp/gunicorn_worker.py.
worker_class = "webapp.gunicorn_worker.BufferingThreadWorker"
limit_request_line = LIMIT_REQUEST_LINE
# X-Forwarded-Proto and -For are believed only from the proxies named in FORWARDED_ALLOW_IPS
# (gunicorn's own variable): gunicorn's default trusts any local process, which could then
# pass plain http off as https. Behind a proxy, set it to the proxy's address.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "")


def on_starting(server: Arbiter) -> None:
    """In the master, before any worker starts: a corrupt database stops the server here with
    one line (a worker that exited at boot would only be started again and again), and the
    schema is upgraded once rather than by every worker at the same moment."""
    from webapp import check_database

    check_database()


def child_exit(server: Arbiter, worker: Worker) -> None:
    """A worker process that ended: its live gauges leave /metrics (its counts stay)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
