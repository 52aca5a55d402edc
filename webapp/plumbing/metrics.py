"""Request metrics for /metrics (Prometheus, the `prometheus_client` library).

- Request latency by route: a histogram labelled with the endpoint's name (`corpora.show`),
  never the URL, so ids do not make a series each; requests that match no route are `none`.
- Under gunicorn every worker process counts its own requests into files of a shared folder
  (PROMETHEUS_MULTIPROC_DIR, set by webapp/gunicorn_conf.py), and a scrape of any worker adds
  them all up (`registry`); without that folder the process's own counts are the answer.
- What the database knows (jobs by state, durations, heartbeats) is not counted here but read
  at each scrape by a collector the caller adds (webapp/blueprints/ops.py), so every machine's
  scrape says the same.
"""

from __future__ import annotations

import functools
import os
import time
from typing import TYPE_CHECKING

from flask import Flask, g, request
from flask.wrappers import Response

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Histogram
    from prometheus_client.registry import Collector


@functools.cache
def request_seconds() -> Histogram:
    # Made (and prometheus_client imported) at the first request, not when `webapp` is
    # imported: the library picks per-process files or plain memory at its import, and
    # gunicorn imports `webapp` (for webapp/gunicorn_conf.py) before that file sets the folder.
    from prometheus_client import Histogram

    return Histogram(
        "bpe_request_duration_seconds",
        "Time to answer a request, by route (the endpoint's name).",
        ["endpoint", "method"],
        registry=None,
    )


def registry(*collectors: Collector) -> CollectorRegistry:
    """A registry for one scrape: every process's request counts, and these collectors."""
    from prometheus_client import CollectorRegistry, multiprocess

    scrape = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(scrape)
    else:
        scrape.register(request_seconds())
    for collector in collectors:
        scrape.register(collector)
    return scrape


def init_app(app: Flask) -> None:
    @app.before_request
    def _started() -> None:
        g.bpe_request_started = time.perf_counter()

    @app.after_request
    def _observe(response: Response) -> Response:
        started = g.get("bpe_request_started")
        if started is not None:
            request_seconds().labels(request.endpoint or "none", request.method).observe(
                time.perf_counter() - started
            )
        return response
