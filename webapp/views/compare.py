"""Comparing two tokenisers, above all naive vs chunked on the same corpus.

- `/compare/<a>/<b>`: the shareable compare page: both headers side by side, which compresses a
  shared corpus better, both compression curves on one inline SVG plot, the first merges side
  by side (merges only one side learned, and tokens crossing a GPT-4 chunk boundary, marked),
  the overlap of the learned vocabularies, and one text box encoded by both.
- `/compare/<a>/merges` and `/encode` serve a full page, or only their part when htmx asks,
  as the tokeniser pages do (and with their limits, 404s and refusals).
- `POST /c/<corpus>/compare` queues a naive and a chunked job (both or neither) and leads to
  `/c/<corpus>/compare/jobs/<a>/<b>`, which shows both job statuses and, once both succeeded,
  sends the browser on to the compare page.
"""

from __future__ import annotations

from dataclasses import replace

from flask import Blueprint, make_response, redirect, render_template, request, url_for
from sqlalchemy import func, select

from webapp import browse, db
from webapp.comparison import (
    crossing_ids,
    curve,
    curve_plot,
    learned_tokens,
    overlap,
    verdict,
)
from webapp.convert import load_tokenizer
from webapp.errors import UserError
from webapp.jobs import JobQueueFull, get_runner, parse_settings
from webapp.models import Tokenizer, TrainingJob
from webapp.playground import Display
from webapp.token_display import counts, token_infos, token_view, token_views
from webapp.views.corpora import get_corpus_or_404, render_corpus
from webapp.views.jobs import get_job_or_404
from webapp.views.tokenizers import (
    check_playground_text,
    is_fragment_request,
    list_display,
    page_or_fragment,
    refuse_in_place,
)

bp = Blueprint("compare", __name__)
# Refusals (404 slugs, 413 text) look exactly like the tokeniser pages' ones, htmx included.
bp.register_error_handler(UserError, refuse_in_place)

MERGES_PER_PAGE = 20
SIDES = ("a", "b")


# ----- the two tokenisers ------------------------------------------------------------------------
def _side(session, slug: str) -> dict:
    row = browse.get_tokenizer(session, slug)
    corpus = browse.corpus_of(session, row)
    tok = load_tokenizer(session, row)
    return {
        "row": row,
        "corpus": corpus,
        "tok": tok,
        "crossing": crossing_ids((row.id, row.slug), tok),
        "learned": learned_tokens(tok),
    }


def _pair(slug_a: str, slug_b: str) -> dict:
    session = db.session()
    a, b = _side(session, slug_a), _side(session, slug_b)
    same_corpus = a["row"].corpus_id == b["row"].corpus_id
    return {"a": a, "b": b, "same_corpus": same_corpus, "slug_a": slug_a, "slug_b": slug_b}


def _overview(pair: dict) -> dict:
    """The parts of the page that do not change with the merges page or the text box."""
    a, b = pair["a"], pair["b"]
    curves = [
        (_name(side), curve(side["row"].initial_tokens, side["tok"].training.tokens_after))
        for side in (a, b)
    ]
    result = {
        "plot": curve_plot(curves, relative=not pair["same_corpus"]),
        "overlap": overlap(a["tok"], b["tok"]),
        "crossing_total": {s: len(pair[s]["crossing"]) for s in SIDES},
    }
    if pair["same_corpus"]:
        result["verdict"] = verdict(a["row"].final_token_count, b["row"].final_token_count)
    return result


def _name(side: dict) -> str:
    row = side["row"]
    return f"{row.mode} · {row.vocab_size:,}"


# ----- merges side by side -----------------------------------------------------------------------
def _merges(pair: dict, args) -> dict:
    paging = browse.Paging.from_args(args)
    if not args.get("per_page"):
        paging = replace(paging, per_page=MERGES_PER_PAGE)
    display = list_display(args)
    longest = max(len(pair[s]["tok"].merges) for s in SIDES)
    first = (paging.page - 1) * paging.per_page
    rows = []
    for rank in range(first, min(first + paging.per_page, longest)):
        rows.append({"rank": rank, **{s: _merge_cell(pair, s, rank, display) for s in SIDES}})
    page = browse.Page(rows=rows, total=longest, paging=paging)
    return {"merge_page": page, "merge_rows": rows, "list_display": display}


def _merge_cell(pair: dict, side: str, rank: int, display: Display) -> dict | None:
    this, other = pair[side], pair["b" if side == "a" else "a"]
    tok = this["tok"]
    if rank >= len(tok.merges):
        return None
    left, right, new = tok.merges[rank]
    views = [
        token_view(info, invalid=display.invalid, whitespace=display.whitespace, colour=i)
        for i, info in enumerate(token_infos(tok, (left, right, new)))
    ]
    key = (tok.token_bytes(new), tok.ends_word(new))
    return {
        "left": views[0],
        "right": views[1],
        "new": views[2],
        "new_id": new,
        "left_id": left,
        "right_id": right,
        "count": tok.training.merge_counts[rank],
        "only_here": key not in other["learned"],
        "crosses": new in this["crossing"],
    }


# ----- the shared text box -----------------------------------------------------------------------
def _encoded(pair: dict, text: str, display: Display) -> dict:
    check_playground_text(text)
    out = {}
    for s in SIDES:
        tok = pair[s]["tok"]
        ids = tok.encode(text, allowed_special="all" if display.specials else ())
        views = token_views(
            token_infos(tok, ids), invalid=display.invalid, whitespace=display.whitespace
        )
        out[s] = {"ids": ids, "views": views, "counts": counts(text, ids)}
    text_verdict = verdict(len(out["a"]["ids"]), len(out["b"]["ids"])) if text else None
    return {"encoded": out, "text": text, "display": display, "text_verdict": text_verdict}


def _overlap_views(pair: dict, ov) -> dict:
    shown = {}
    for s, ids in (("a", ov.top_only_a), ("b", ov.top_only_b)):
        tok = pair[s]["tok"]
        shown[s] = [
            {"id": info.token_id, "view": token_view(info, whitespace=True, colour=n)}
            for n, info in enumerate(token_infos(tok, ids))
        ]
    return shown


# ----- pages -------------------------------------------------------------------------------------
@bp.get("/compare/<slug_a>/<slug_b>")
def show(slug_a: str, slug_b: str):
    return _render(slug_a, slug_b, "compare/_encoded.html", request.args)


@bp.get("/compare/<slug_a>/<slug_b>/merges")
def merges(slug_a: str, slug_b: str):
    return _render(slug_a, slug_b, "compare/_merges.html", request.args)


@bp.route("/compare/<slug_a>/<slug_b>/encode", methods=["GET", "POST"])
def encode(slug_a: str, slug_b: str):
    values = request.form if request.method == "POST" else request.args
    return _render(slug_a, slug_b, "compare/_encoded.html", values)


def _render(slug_a: str, slug_b: str, fragment: str, values):
    """The whole page, or (htmx) only the fragment, computing only what that one shows."""
    pair = _pair(slug_a, slug_b)
    wants_page = not is_fragment_request()
    context: dict = {**pair}
    if wants_page or fragment == "compare/_merges.html":
        context.update(_merges(pair, values))
    if wants_page or fragment == "compare/_encoded.html":
        context.update(_encoded(pair, values.get("text", ""), Display.from_args(values)))
    if wants_page:
        overview = _overview(pair)
        context.update(overview, only=_overlap_views(pair, overview["overlap"]))
    return page_or_fragment("compare/show.html", fragment, **context)


@bp.get("/compare/<slug_a>/with")
def pick(slug_a: str):
    """The tokeniser page's "compare with…" form lands here and is sent to the permalink."""
    slug_b = request.args.get("b", "")
    browse.get_tokenizer(db.session(), slug_a)
    browse.get_tokenizer(db.session(), slug_b)
    return redirect(url_for("compare.show", slug_a=slug_a, slug_b=slug_b), code=303)


@bp.app_template_global()
def compare_candidates(row: Tokenizer) -> list[Tokenizer]:
    """Other live tokenisers of the same corpus, newest first (the "compare with…" choices)."""
    return list(
        db.session().scalars(
            select(Tokenizer)
            .where(
                Tokenizer.corpus_id == row.corpus_id,
                Tokenizer.id != row.id,
                Tokenizer.deleted_at.is_(None),
            )
            .order_by(Tokenizer.id.desc())
            .limit(50)
        )
    )


# ----- naive vs chunked from the corpus page -----------------------------------------------------
@bp.post("/c/<slug>/compare")
def start(slug: str):
    corpus = get_corpus_or_404(slug)
    form = request.form.to_dict()
    try:
        settings = [parse_settings({**form, "mode": mode}) for mode in ("naive", "chunked")]
        job_ids = _submit_both(corpus.id, settings)
    except UserError as exc:
        return render_corpus(corpus, error=exc.message, status=exc.status, form=form)
    return redirect(
        url_for("compare.jobs", slug=corpus.slug, job_a=job_ids[0], job_b=job_ids[1]), code=303
    )


def _submit_both(corpus_id: int, settings: list[dict]) -> list[int]:
    """Queue both jobs or neither: a half-started comparison would only confuse."""
    runner = get_runner()
    active = db.session().scalar(
        select(func.count())
        .select_from(TrainingJob)
        .where(TrainingJob.status.in_(("queued", "running")))
    )
    db.session().rollback()  # end the read snapshot before the runner writes
    free = runner.max_running + runner.max_queued - active
    if free < len(settings):
        raise JobQueueFull(
            f"The training queue has room for {max(free, 0)} more job{'s' if free != 1 else ''},"
            f" and a comparison needs {len(settings)}. Try again when a job has finished,"
            " or cancel one."
        )
    job_ids: list[int] = []
    try:
        for one in settings:
            job_ids.append(runner.submit(corpus_id, one))
    except JobQueueFull:
        # Another request took the last slot in between: take back what was queued.
        for job_id in job_ids:
            runner.request_cancel(job_id)
        raise
    return job_ids


def _jobs_context(slug: str, job_a: int, job_b: int) -> dict:
    corpus, first = get_job_or_404(slug, job_a)
    _, second = get_job_or_404(slug, job_b)
    jobs = [first, second]
    done = all(job.finished for job in jobs)
    succeeded = all(job.status == "succeeded" and job.tokenizer is not None for job in jobs)
    compare_url = None
    if succeeded:
        compare_url = url_for(
            "compare.show", slug_a=first.tokenizer.slug, slug_b=second.tokenizer.slug
        )
    return {
        "corpus": corpus,
        "jobs": jobs,
        "done": done,
        "compare_url": compare_url,
        "ready_url": url_for("compare.jobs_ready", slug=slug, job_a=job_a, job_b=job_b),
    }


@bp.get("/c/<slug>/compare/jobs/<int:job_a>/<int:job_b>")
def jobs(slug: str, job_a: int, job_b: int):
    return render_template("compare/jobs.html", **_jobs_context(slug, job_a, job_b))


@bp.get("/c/<slug>/compare/jobs/<int:job_a>/<int:job_b>/ready")
def jobs_ready(slug: str, job_a: int, job_b: int):
    """Polled by the jobs page; once both succeeded, htmx is sent on to the compare page."""
    context = _jobs_context(slug, job_a, job_b)
    response = make_response(render_template("compare/_jobs_ready.html", **context))
    if context["compare_url"] and request.headers.get("HX-Request"):
        response.headers["HX-Redirect"] = context["compare_url"]
    return response
