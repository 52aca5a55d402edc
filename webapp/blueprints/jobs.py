"""Training jobs: the job page, its self-polling status fragment, cancel and run-again, and the
JSON API that queues a job and reports on it."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from webapp.blueprints.pages import (
    get_corpus_or_404,
    get_job_or_404,
    get_owned_job,
    require_training_allowed,
)
from webapp.jobs import get_jobs, parse_settings
from webapp.jobs.store import fresh_job
from webapp.plumbing import owners
from webapp.plumbing.inputs import json_body
from webapp.plumbing.security import external_url
from webapp.refusals import UserError
from webapp.rendering.learning import learning_data
from webapp.storage import db
from webapp.storage.models import Corpus, TrainingJob

bp = Blueprint("jobs", __name__)


@bp.app_context_processor
def _runner_state() -> dict[str, bool]:
    """Every page that shows a job's status says when no job can start (the embedded runner's
    lock cannot be written: webapp/jobs/embedded.py), rather than "waiting" forever."""
    return {"jobs_unavailable": get_jobs().unavailable is not None}


@bp.get("/c/<slug>/jobs/<int:job_id>")
def show(slug: str, job_id: int) -> ResponseReturnValue:
    corpus, job = get_job_or_404(slug, job_id)
    if request.headers.get("HX-Request"):
        return render_template("jobs/_status.html", corpus=corpus, job=job)
    return render_template("jobs/show.html", corpus=corpus, job=job)


@bp.get("/c/<slug>/jobs/<int:job_id>/status")
def status(slug: str, job_id: int) -> ResponseReturnValue:
    corpus, job = get_job_or_404(slug, job_id)
    return render_template("jobs/_status.html", corpus=corpus, job=job)


@bp.post("/c/<slug>/jobs/<int:job_id>/cancel")
def cancel(slug: str, job_id: int) -> ResponseReturnValue:
    corpus, job = get_owned_job(slug, job_id)
    get_jobs().request_cancel(job.id)
    if request.headers.get("HX-Request"):
        job = fresh_job(db.session(), job.id)
        return render_template("jobs/_status.html", corpus=corpus, job=job)
    return redirect(url_for("jobs.show", slug=slug, job_id=job.id), code=303)


@bp.post("/c/<slug>/jobs/<int:job_id>/rerun")
def rerun(slug: str, job_id: int) -> ResponseReturnValue:
    corpus, job = get_owned_job(slug, job_id)
    try:
        new_id = get_jobs().rerun(job.id, owner_id=job.owner_id)
    except UserError as exc:  # the job page again, saying why nothing was queued
        html = render_template("jobs/show.html", corpus=corpus, job=job, error=exc.message)
        return html, exc.status
    return redirect(url_for("jobs.show", slug=corpus.slug, job_id=new_id), code=303)


# ----- JSON ---------------------------------------------------------------------------------
@bp.post("/api/corpora/<slug>/jobs")
def api_train(slug: str) -> ResponseReturnValue:
    """Queue a training job from a JSON object with the train form's fields; 202 and the job.
    Settings that cannot work are a 422 here too, with nothing queued."""
    corpus = get_corpus_or_404(slug)
    require_training_allowed(corpus)
    data = json_body('{"mode": "words", "vocab_size": 1000}')
    if not isinstance(data, dict):
        raise UserError(
            'Send a JSON object of settings, e.g. {"mode": "chunked", "vocab_size": 1000}.'
        )
    settings = parse_settings(data)
    job_id = get_jobs().submit(corpus.id, settings, owner_id=owners.owner_id_for_write())
    job = fresh_job(db.session(), job_id)
    body = job_json(corpus, job)
    return jsonify(body), 202, {"Location": body["api_url"]}


@bp.get("/api/corpora/<slug>/jobs/<int:job_id>")
def api_job(slug: str, job_id: int) -> ResponseReturnValue:
    corpus, job = get_job_or_404(slug, job_id)
    return jsonify(job_json(corpus, job))


@bp.post("/api/corpora/<slug>/jobs/<int:job_id>/cancel")
def api_cancel(slug: str, job_id: int) -> ResponseReturnValue:
    """Stop the owner's queued or running job: 200 and the job (a running one stops at its next
    progress write, `cancel_requested` true meanwhile); 409 if it had already finished."""
    corpus, job = get_owned_job(slug, job_id)
    if not get_jobs().request_cancel(job.id):
        raise UserError(f"This job has already finished ({job.status}).", status=409)
    return jsonify(job_json(corpus, fresh_job(db.session(), job.id)))


@bp.post("/api/corpora/<slug>/jobs/<int:job_id>/rerun")
def api_rerun(slug: str, job_id: int) -> ResponseReturnValue:
    """Queue the owner's failed, cancelled or interrupted job again with the same settings:
    202 and the new job, as when it was first queued."""
    corpus, job = get_owned_job(slug, job_id)
    new_id = get_jobs().rerun(job.id, owner_id=job.owner_id)
    body = job_json(corpus, fresh_job(db.session(), new_id))
    return jsonify(body), 202, {"Location": body["api_url"]}


def job_json(corpus: Corpus, job: TrainingJob) -> dict[str, Any]:
    tokenizer = job.tokenizer
    return {
        "id": job.id,
        "url": external_url("jobs.show", slug=corpus.slug, job_id=job.id),
        "api_url": external_url("jobs.api_job", slug=corpus.slug, job_id=job.id),
        "status": job.status,
        "phase": job.phase,
        "settings": job.settings_dict,
        "merges_done": job.merges_done,
        "merges_target": job.merges_target,
        "wall_seconds": job.wall_seconds,
        "merging_seconds_left": job.estimate_seconds,
        # The range the time left lies in, while it is estimated (webapp/jobs/progress.py).
        "merging_seconds_left_range": None
        if job.estimate_low is None or job.estimate_high is None
        else [job.estimate_low, job.estimate_high],
        # While the text is split: characters split so far, of all.
        "split": None
        if not job.split_total
        else {"done": job.split_done or 0, "total": job.split_total},
        # The latest merges and the curves the page draws (webapp/jobs/learning.py).
        "learning": learning_data(job.learning),
        "error": job.error,
        "cancel_requested": bool(job.cancel_requested),
        "rerun_of": job.rerun_of_id,
        # Where it runs or ran (a worker's host name and process id), once it has started.
        "worker": None
        if job.worker_host is None
        else {"host": job.worker_host, "pid": job.worker_pid},
        "tokenizer": None
        if tokenizer is None
        else {"slug": tokenizer.slug, "url": external_url("tokenizers.show", slug=tokenizer.slug)},
    }
