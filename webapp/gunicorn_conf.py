"""gunicorn settings for the README's run command (`make run`).

One worker process with threads: that process imports `webapp.wsgi` and so owns the embedded
job runner (several workers would each try; the runner lock lets only one run jobs, and the
others would only add memory). Set `PORT` (default 5000) and `HOST` (default 127.0.0.1; use
0.0.0.0 only behind a proxy you trust). With BPE_JOB_BACKEND=celery the web holds no jobs, and
`WEB_CONCURRENCY` may raise the worker count.
"""

from __future__ import annotations

import os

bind = f"{os.environ.get('HOST') or '127.0.0.1'}:{os.environ.get('PORT') or '5000'}"
workers = int(os.environ.get("WEB_CONCURRENCY") or 1)
threads = int(os.environ.get("BPE_WEB_THREADS") or 8)
# Uploads of up to BPE_MAX_UPLOAD_MB stream through one request; give slow links time.
timeout = 300
graceful_timeout = 10
accesslog = "-"
# gunicorn's control socket (one fixed path per user) would clash between several servers on
# one machine, and nothing here uses it.
control_socket_disable = True
# gunicorn's own refusals (a request line it cannot parse) answer JSON like the app's errors;
# the line may be up to 8 KB, so the app's own 414 (webapp/inputs.py) covers most long URLs.
worker_class = "webapp.gunicorn_worker.JsonErrorThreadWorker"
limit_request_line = 8190


def on_starting(server) -> None:
    """A corrupt database stops the server here, in the master, with one line: a worker that
    exited at boot would only be started again and again."""
    from webapp import check_database

    check_database()
