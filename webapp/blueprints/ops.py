"""For whoever runs the site: `/healthz` (the process answers), `/readyz` (it can do its work:
the database, and under Celery the broker, reachable; 503 otherwise) and `/metrics`
(Prometheus). None of them is rate-limited (webapp/plumbing/ratelimits.py `EXEMPT`): a
balancer or a scraper asks often, from one address."""

from __future__ import annotations

from collections.abc import Iterator

from flask import Blueprint, Response, current_app, jsonify
from flask.typing import ResponseReturnValue
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from webapp.jobs import JobBackend
from webapp.plumbing import metrics
from webapp.storage.models import JobStatus

bp = Blueprint("ops", __name__)

# Seconds: from a fast import to a training past the default hour-long cap.
DURATION_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)


@bp.get("/healthz")
def healthz() -> ResponseReturnValue:
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz() -> ResponseReturnValue:
    problems = []
    try:
        current_app.extensions["bpe_db"].ping()
    except Exception as exc:  # noqa: BLE001 - whatever the driver raises, not ready
        problems.append(f"the database cannot be reached: {type(exc).__name__}")
    backend: JobBackend = current_app.extensions["bpe_jobs"]
    broker = backend.not_ready()
    if broker is not None:
        problems.append(broker)
    if problems:
        return jsonify(status="unavailable", problems=problems), 503
    return jsonify(status="ok")


@bp.get("/metrics")
def metrics_page() -> ResponseReturnValue:
    backend: JobBackend = current_app.extensions["bpe_jobs"]
    body = generate_latest(metrics.registry(JobCollector(backend)))
    return Response(body, content_type=CONTENT_TYPE_LATEST)


class JobCollector(Collector):
    """Every kind's jobs, read from the database at the scrape (what every machine shares)."""

    def __init__(self, backend: JobBackend) -> None:
        self.backend = backend

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("bpe_jobs", "Jobs by state and kind.", labels=["kind", "state"])
        depth = GaugeMetricFamily(
            "bpe_job_queue_depth", "Jobs queued and not yet claimed.", labels=["kind"]
        )
        beats = GaugeMetricFamily(
            "bpe_worker_heartbeat_age_seconds",
            "Seconds since the newest heartbeat of each worker running a job.",
            labels=["kind", "worker"],
        )
        durations = HistogramMetricFamily(
            "bpe_job_duration_seconds",
            "Seconds from start to finish of the finished jobs in the database.",
            labels=["kind"],
        )
        for kind, rows in self.backend.rows.items():
            census = rows.census()
            for state in JobStatus:
                jobs.add_metric([kind, state.value], census.by_status.get(state.value, 0))
            depth.add_metric([kind], census.by_status.get(JobStatus.QUEUED.value, 0))
            for worker, age in sorted(census.heartbeat_ages.items()):
                beats.add_metric([kind, worker], age)
            buckets = [
                (f"{bound:g}", sum(1 for d in census.durations if d <= bound))
                for bound in DURATION_BUCKETS
            ]
            buckets.append(("+Inf", len(census.durations)))
            durations.add_metric([kind], buckets, sum(census.durations))
        yield from (jobs, depth, beats, durations)
