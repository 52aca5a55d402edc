"""Training jobs: the job page, its self-polling status fragment, cancel and run-again."""

from __future__ import annotations

from flask import Blueprint, redirect, render_template, request, url_for

from webapp import db
from webapp.errors import UserError
from webapp.jobs import get_jobs
from webapp.jobs.store import fresh_job
from webapp.pages import get_job_or_404, get_owned_job

bp = Blueprint("jobs", __name__)


@bp.get("/c/<slug>/jobs/<int:job_id>")
def show(slug: str, job_id: int):
    corpus, job = get_job_or_404(slug, job_id)
    if request.headers.get("HX-Request"):
        return render_template("jobs/_status.html", corpus=corpus, job=job)
    return render_template("jobs/show.html", corpus=corpus, job=job)


@bp.get("/c/<slug>/jobs/<int:job_id>/status")
def status(slug: str, job_id: int):
    corpus, job = get_job_or_404(slug, job_id)
    return render_template("jobs/_status.html", corpus=corpus, job=job)


@bp.post("/c/<slug>/jobs/<int:job_id>/cancel")
def cancel(slug: str, job_id: int):
    corpus, job = get_owned_job(slug, job_id)
    get_jobs().request_cancel(job.id)
    if request.headers.get("HX-Request"):
        job = fresh_job(db.session(), job.id)
        return render_template("jobs/_status.html", corpus=corpus, job=job)
    return redirect(url_for("jobs.show", slug=slug, job_id=job.id), code=303)


@bp.post("/c/<slug>/jobs/<int:job_id>/rerun")
def rerun(slug: str, job_id: int):
    corpus, job = get_owned_job(slug, job_id)
    try:
        new_id = get_jobs().rerun(job.id, owner_id=job.owner_id)
    except UserError as exc:  # the job page again, saying why nothing was queued
        html = render_template("jobs/show.html", corpus=corpus, job=job, error=exc.message)
        return html, exc.status
    return redirect(url_for("jobs.show", slug=corpus.slug, job_id=new_id), code=303)
