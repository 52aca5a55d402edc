"""Which languages pay more: tokenisers counted on the parallel text (the UDHR), as a job.

- `GET /languages`: the form (the references and your own tokenisers, up to eight) and the
  tables you may see;
- `POST /languages` (`tokenizer=<slug>`, repeated): queue a table; anyone may, for any
  tokeniser whose link they have (the text is the site's); whoever asks owns the job;
- `GET /languages/<id>`: the job while it runs (a fragment that polls itself), then the table
  (filters `script`, `q`; `sort`, `by`, `order`), grouped by script, the premium chart and the
  worst and best languages per tokeniser; `.csv` and `.json` download it;
- `POST /languages/<id>/cancel`: its owner only (403 for anyone else);
- `POST /api/languages` `{"tokenizers": [slug, ...]}` (202, the job) and
  `GET /api/languages/<id>` (status, then the rows).

A job is shown to its owner, and to anyone who may see every one of its tokenisers (the
rule of evaluations); to anyone else it is a 404 (webapp/storage/languages.py).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, abort, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from webapp.jobs import get_languages
from webapp.jobs.languages import MAX_TOKENIZERS
from webapp.plumbing import owners
from webapp.plumbing.inputs import json_object
from webapp.plumbing.security import external_url
from webapp.refusals import UserError
from webapp.rendering import languages as display
from webapp.storage import browse, db
from webapp.storage import evaluations as evaluation_rows
from webapp.storage import languages as language_rows
from webapp.storage.models import LanguageJob
from webapp.storage.parallel_texts import complete_count

bp = Blueprint("languages", __name__)


def _tokenizer_ids(slugs: list[Any]) -> list[int]:
    if not slugs:
        raise UserError("Choose at least one tokeniser to count the languages with.", status=400)
    if len(slugs) > MAX_TOKENIZERS:
        raise UserError(f"Choose at most {MAX_TOKENIZERS} tokenisers.", status=400)
    if not all(isinstance(s, str) for s in slugs):
        raise UserError('Send the tokenisers as a list of slugs, e.g. ["ab12..."].', status=400)
    return [browse.get_tokenizer(db.session(), slug).id for slug in slugs]  # 404: unknown


@bp.get("/languages")
def index() -> ResponseReturnValue:
    session = db.session()
    owner_id = owners.current_owner_id()
    return render_template(
        "languages/index.html",
        texts=complete_count(session),
        candidates=evaluation_rows.candidates(session, owner_id=owner_id),
        jobs=language_rows.jobs_for(session, owner_id),
        max_tokenizers=MAX_TOKENIZERS,
    )


@bp.post("/languages")
def request_table() -> ResponseReturnValue:
    ids = _tokenizer_ids(request.form.getlist("tokenizer"))
    job_id = get_languages().submit(ids, owner_id=owners.owner_id_for_write())
    return redirect(url_for("languages.show", job_id=job_id), code=303)


def _job_or_404(job_id: int) -> LanguageJob:
    job = language_rows.get_language_job(db.session(), job_id, owner_id=owners.current_owner_id())
    if job is None:
        abort(404)
    return job


def _finished_table(job_id: int) -> tuple[LanguageJob, display.JobTable]:
    job = _job_or_404(job_id)
    if job.status != "succeeded":
        raise UserError(
            f"Language table {job.id} is {job.status}: it has no figures to download.",
            status=409,
        )
    return job, display.job_table(db.session(), job)


@bp.get("/languages/<int:job_id>")
def show(job_id: int) -> ResponseReturnValue:
    job = _job_or_404(job_id)
    session = db.session()
    tokenizers = language_rows.job_tokenizers(session, job)
    if request.headers.get("HX-Request"):
        fragment = render_template("languages/_status.html", job=job, tokenizers=tokenizers)
        # Done: htmx reloads the page, which then shows the table instead of the status.
        return fragment, 200, {"HX-Refresh": "true"} if job.status == "succeeded" else {}
    if job.status != "succeeded":
        return render_template("languages/show.html", job=job, tokenizers=tokenizers)
    shown = display.job_table(session, job)
    view = display.parse_view(request.args, shown.table)
    rows = display.filtered(shown.table, view)
    return render_template(
        "languages/show.html",
        job=job,
        tokenizers=shown.tokenizers,
        shown=shown,
        view=view,
        rows=rows,
        groups=display.grouped(rows),
        scripts=display.scripts_of(shown.table),
        chart=display.chart(shown.table, rows),
        extremes=display.worst_and_best(shown.table),
        shapes=display.SHAPES,
    )


@bp.get("/languages/<int:job_id>.csv")
def download_csv(job_id: int) -> ResponseReturnValue:
    job, shown = _finished_table(job_id)
    return Response(
        display.table_csv(shown.table),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="languages-{job.id}.csv"'},
    )


@bp.get("/languages/<int:job_id>.json")
def download_json(job_id: int) -> ResponseReturnValue:
    job, shown = _finished_table(job_id)
    response = jsonify(job_json(job, shown))
    response.headers["Content-Disposition"] = f'attachment; filename="languages-{job.id}.json"'
    return response


@bp.post("/languages/<int:job_id>/cancel")
def cancel(job_id: int) -> ResponseReturnValue:
    job = language_rows.find_language_job(db.session(), job_id)
    if job is None or not language_rows.visible(db.session(), job, owners.current_owner_id()):
        abort(404)
    owners.require_owner(job, "language table")
    get_languages().request_cancel(job.id)
    return redirect(url_for("languages.show", job_id=job.id), code=303)


@bp.post("/api/languages")
def api_request() -> ResponseReturnValue:
    body = json_object('{"tokenizers": ["<slug>", "<slug>"]}')
    slugs = body.get("tokenizers")
    if not isinstance(slugs, list):
        raise UserError('Send {"tokenizers": [slug, ...]}: a list of tokeniser slugs.', status=400)
    job_id = get_languages().submit(_tokenizer_ids(slugs), owner_id=owners.owner_id_for_write())
    with db.get_db().read_scope() as session:
        # This request's session may predate the job's own write.
        job = language_rows.find_language_job(session, job_id)
        assert job is not None
        answer = job_json(job, None, tokenizers=language_rows.job_tokenizers(session, job))
    token = owners.new_owner_token()
    answer["owner_token"] = token
    answer["owner_link"] = owners.owner_link(token) if token else None
    return jsonify(answer), 202, {"Location": answer["api_url"]}


@bp.get("/api/languages/<int:job_id>")
def api_show(job_id: int) -> ResponseReturnValue:
    job = _job_or_404(job_id)
    shown = display.job_table(db.session(), job) if job.status == "succeeded" else None
    return jsonify(job_json(job, shown, tokenizers=language_rows.job_tokenizers(db.session(), job)))


def job_json(
    job: LanguageJob, shown: display.JobTable | None, *, tokenizers: list[Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_id": job.id,
        "status": job.status,
        "error": job.error,
        "counts_done": job.counts_done,
        "counts_total": job.counts_total,
        "elapsed_seconds": job.elapsed_seconds,
        "url": external_url("languages.show", job_id=job.id),
        "api_url": external_url("languages.api_show", job_id=job.id),
    }
    if shown is not None:
        body.update(display.table_json(shown.table, shown.tokenizers))
        body["csv_url"] = external_url("languages.download_csv", job_id=job.id)
    else:
        body.update(
            tokenizers=[
                {"name": name, "slug": t.slug, "reference": t.reference}
                for name, t in zip(
                    display.unique_names(tokenizers or []), tokenizers or [], strict=True
                )
            ],
            languages=None,
        )
    return body
