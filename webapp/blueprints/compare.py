"""Comparing two to four tokenisers, and the naive-vs-chunked flow from a corpus page.

- `/compare/<a>/<b>[/<c>[/<d>]]`: the shareable compare page of a set: the headers side by side,
  which compresses a shared corpus best, the compression curves on one inline SVG plot, the
  first merges side by side (merges only one learned, and tokens crossing a GPT-4 chunk
  boundary, marked), the overlap of the learned vocabularies, and one text box encoded by all:
  counts with the cheapest marked, each row's segmentation with the boundaries only some
  tokenisers have marked, and one merge scrubber that moves every row (by merge count or by
  fraction of each one's merges).
- `.../merges` and `.../encode` serve a full page, or only their part when htmx asks, as the
  tokeniser pages do (and with their limits, 404s and refusals); `.../add` adds a tokeniser
  (picked or pasted) and sends the browser to the new set's address.
- `POST /c/<corpus>/compare` queues a naive and a chunked job (both or neither) and leads to
  `/c/<corpus>/compare/jobs/<a>/<b>`, which shows both job statuses and, once both succeeded,
  sends the browser on to the compare page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

from flask import (
    Blueprint,
    Response,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import MultiDict

from webapp.blueprints.pages import (
    get_corpus_or_404,
    get_job_or_404,
    render_corpus,
    require_training_allowed,
)
from webapp.jobs import get_jobs, parse_settings
from webapp.plumbing import owners
from webapp.plumbing.htmx import is_fragment_request, page_or_fragment, refuse_in_place
from webapp.plumbing.inputs import box_text
from webapp.refusals import UserError
from webapp.rendering.chips import NO_MARK, Mark, encoded_chips
from webapp.rendering.comparison import (
    SetOverlap,
    TokenKey,
    crossing_ids,
    curve,
    curve_plot,
    learned_tokens,
    overlap_many,
    unknown_count,
    verdict,
)
from webapp.rendering.playground import Display, check_playground_text, list_display
from webapp.rendering.replay import merge_views
from webapp.rendering.segmentation import (
    ChipMark,
    boundary_diff,
    clamp_merges,
    row_cuts,
    scrub,
    view_marks,
)
from webapp.rendering.token_display import counts, token_infos, token_view
from webapp.storage import browse, compare_sets, db

bp = Blueprint("compare", __name__)
# Refusals (404 slugs, 413 text) look exactly like the tokeniser pages' ones, htmx included.
bp.register_error_handler(UserError, refuse_in_place)

MERGES_PER_PAGE = 20
SLUG_ARGS = ("slug_a", "slug_b", "slug_c", "slug_d")
SET_RULES = tuple(
    "/compare/" + "/".join(f"<{arg}>" for arg in SLUG_ARGS[:n]) for n in range(2, 5)
)  # /compare/<slug_a>/<slug_b>, .../<slug_c>, .../<slug_d>
SCRUB_MODES = ("count", "fraction")
PER_MILLE = 1000  # the fraction slider's steps

View = TypeVar("View", bound=Callable[..., ResponseReturnValue])


def set_routes(
    suffix: str = "", methods: tuple[str, ...] = ("GET",), sizes: tuple[int, ...] = (2, 3, 4)
) -> Callable[[View], View]:
    """Register a view under the address of every set size (the 2-way one is the old URL)."""

    def register(view: View) -> View:
        for size in sizes:
            bp.add_url_rule(SET_RULES[size - 2] + suffix, view_func=view, methods=list(methods))
        return view

    return register


@bp.app_template_global()
def compare_url(endpoint: str, slugs: Iterable[str], **query: Any) -> str:
    """url_for for a set's pages: compare_url("compare.encode", ["a", "b", "c"])."""
    values: dict[str, Any] = dict(zip(SLUG_ARGS, slugs, strict=False))  # url_for's **values
    return url_for(endpoint, **values, **query)


# ----- the set --------------------------------------------------------------------------------
def _sides(slugs: list[str]) -> dict[str, Any]:
    session = db.session()
    members = compare_sets.load_set(session, slugs)
    sides: list[dict[str, Any]] = [
        {
            "letter": m.letter,
            "row": m.row,
            "corpus": m.corpus,
            "tok": m.tok,
            "crossing": crossing_ids((m.row.id, m.row.slug), m.tok),
            "without": [slug for j, slug in enumerate(slugs) if j != i],
        }
        for i, m in enumerate(members)
    ]
    corpora = {m.row.corpus_id for m in members}
    same_corpus = len(corpora) == 1 and None not in corpora  # imported ones have no corpus
    context = {"sides": sides, "slugs": slugs, "same_corpus": same_corpus, "members": members}
    if len(sides) == 2:  # the two-way page's partials still name them a and b
        context.update(a=sides[0], b=sides[1], slug_a=slugs[0], slug_b=slugs[1])
    return context


def _overview(context: dict[str, Any]) -> dict[str, Any]:
    """The parts of the page that do not change with the merges page or the text box."""
    sides = context["sides"]
    curves = [  # imported tokenisers were not trained here: they have no curve
        (_name(side), curve(side["row"].initial_tokens, side["tok"].training.tokens_after))
        for side in sides
        if side["tok"].training is not None and side["row"].initial_tokens is not None
    ]
    shared = overlap_many([side["tok"] for side in sides])
    result: dict[str, Any] = {
        # None when only imported tokenisers are compared: the page says why there is no plot.
        "plot": curve_plot(curves, relative=not context["same_corpus"]) if curves else None,
        "overlap": shared,
        "only": _overlap_views(sides, shared),
        "crossing_total": {side["letter"]: len(side["crossing"]) for side in sides},
    }
    if context["same_corpus"]:
        finals = [side["row"].final_token_count for side in sides]
        if len(sides) == 2:
            result["verdict"] = verdict(*finals)
        best = min(finals)
        result["best"] = [side["letter"] for side in sides if side["row"].final_token_count == best]
    return result


def _name(side: dict[str, Any]) -> str:
    row = side["row"]
    if row.imported:
        return f"{side['letter'].upper()} · {row.reference or row.source_name} · {row.vocab_size:,}"
    return f"{side['letter'].upper()} · {row.mode} · {row.vocab_size:,}"


def _overlap_views(
    sides: list[dict[str, Any]], shared: SetOverlap
) -> dict[str, list[dict[str, Any]]]:
    shown = {}
    for side, ids in zip(sides, shared.top_only, strict=True):
        shown[side["letter"]] = [
            {"id": info.token_id, "view": token_view(info, whitespace=True, colour=n)}
            for n, info in enumerate(token_infos(side["tok"], ids))
        ]
    return shown


# ----- merges side by side -----------------------------------------------------------------------
def _merges(context: dict[str, Any], args: MultiDict[str, str]) -> dict[str, Any]:
    sides = context["sides"]
    # The sides are aligned by rank, so this list has no other order and no filters; its
    # parameters are still checked like every list's, and a filter is refused, not ignored.
    browse.sort_arg(args, {"rank": None}, "rank")
    if any(v not in ("", None) for v in browse.token_filters(args).values()):
        raise UserError(
            "The side-by-side merges are in rank order and cannot be filtered; filter one"
            " tokeniser's merges on its own merges page.",
            status=400,
        )
    paging = browse.Paging.from_args(args)
    if not args.get("per_page"):
        paging = replace(paging, per_page=MERGES_PER_PAGE)
    display = list_display(args)
    longest = max(len(side["tok"].merges) for side in sides)
    first = (paging.page - 1) * paging.per_page
    rows = []
    for rank in range(first, min(first + paging.per_page, longest)):
        cells = {side["letter"]: _merge_cell(sides, side, rank, display) for side in sides}
        rows.append({"rank": rank, **cells})
    page = browse.Page(rows=rows, total=longest, paging=paging).must_exist()
    return {"merge_page": page, "merge_rows": rows, "list_display": display}


def _learned(side: dict[str, Any]) -> dict[TokenKey, tuple[int, int]]:
    """The side's learned tokens, computed once and only for the merges table."""
    if "learned" not in side:
        side["learned"] = learned_tokens(side["tok"])
    return side["learned"]


def _merge_cell(
    sides: list[dict[str, Any]], this: dict[str, Any], rank: int, display: Display
) -> dict[str, Any] | None:
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
        "count": tok.training.merge_counts[rank] if tok.training is not None else None,
        "only_here": not any(key in _learned(s) for s in sides if s is not this),
        "crosses": new in this["crossing"],
    }


# ----- the shared text box, its diff and its scrubber --------------------------------------------
def _scrub_setting(sides: list[dict[str, Any]], values: MultiDict[str, str]) -> dict[str, Any]:
    """One slider for every row: `by=count` moves k merges in each (capped at each one's own),
    `by=fraction` the same share of each one's merges (k in thousandths)."""
    by = values.get("by", "count")
    by = by if by in SCRUB_MODES else "count"
    longest = max(len(side["tok"].merges) for side in sides)
    high = longest if by == "count" else PER_MILLE
    raw = (values.get("k") or "").strip()
    if not raw:
        k = high
    else:
        try:
            k = max(0, min(int(raw), high))
        except ValueError:
            raise UserError(
                f"k must be a whole number of merges (or thousandths), not {raw[:40]!r}.",
                status=400,
            ) from None
    per_side = [
        clamp_merges(side["tok"], k if by == "count" else round(len(side["tok"].merges) * k / high))
        for side in sides
    ]
    return {"by": by, "k": k, "high": high, "per_side": per_side, "full": k == high}


def _diff_mark(mark: ChipMark) -> Mark:
    """(extra classes, tooltip note, label note) of one chip of the diff stream."""
    if not (mark.before or mark.after or mark.inside):
        return NO_MARK
    classes, note = "", ""
    if mark.before:
        classes += " cut-differs"
        note += " · a cut only some make before it"
    if mark.after:
        classes += " cut-after-differs"
        note += " · a cut only some make after it"
    if mark.inside:
        classes += " spans-cut"
        note += f" · runs across {mark.inside} cut{'s' if mark.inside != 1 else ''} others make"
    return classes, note, note


def _diff_pair(values: MultiDict[str, str], rows: int) -> tuple[int, int] | None:
    """`diff`: "all" (every row against the others, the default) or two letters, "ab" to
    "cd", to mark only where those two rows differ; a 400 for anything else."""
    raw = (values.get("diff") or "all").strip().lower()
    if raw == "all":
        return None
    letters = "abcd"[:rows]
    if len(raw) == 2 and raw[0] in letters and raw[1] in letters and raw[0] < raw[1]:
        return letters.index(raw[0]), letters.index(raw[1])
    pairs = ", ".join(a + b for i, a in enumerate(letters) for b in letters[i + 1 :])
    raise UserError(
        f"diff must be all or two of this set's letters ({pairs}), not {raw[:20]!r}.", status=400
    )


def _encoded(context: dict[str, Any], values: MultiDict[str, str]) -> dict[str, Any]:
    text = box_text(values)
    display = Display.from_args(values)
    check_playground_text(text)
    sides = context["sides"]
    setting = _scrub_setting(sides, values)
    specials = "all" if display.specials else ()
    rows = []
    for side, k in zip(sides, setting["per_side"], strict=True):
        tok = side["tok"]
        cut = scrub(tok, text, k, allowed_special=specials)
        ids = cut.segmentation.ids
        chips = encoded_chips(tok, ids, invalid=display.invalid, whitespace=display.whitespace)
        rows.append(
            {
                "side": side,
                "ids": ids,
                "chips": chips,
                "counts": counts(text, ids),
                "unknown": unknown_count(tok, ids),
                "scrub": cut,
                "merge_views": merge_views(tok, cut.merge),
            }
        )
    # The diff is of what the view draws: in the ids view every token is a chip; in the text
    # view a chip may join the tokens of one character (its cuts show with "hex bytes").
    text_bytes = len(text.encode("utf-8", "surrogatepass"))
    for row in rows:
        shown = (
            [1] * len(row["ids"]) if display.view == "ids" else [len(c.ids) for c in row["chips"]]
        )
        row["cuts"] = row_cuts(row["scrub"].segmentation, shown, text_bytes)
    diff = boundary_diff([row["cuts"] for row in rows], pair=_diff_pair(values, len(rows)))
    for row, row_diff in zip(rows, diff.rows, strict=True):
        row["diff"] = row_diff
        row["marks"] = [_diff_mark(mark) for mark in view_marks(row["cuts"], row_diff)]
    # Only tokenisers that kept every character are ranked: fewer tokens bought by turning
    # characters into <unk> is not better compression.
    ranked = [row for row in rows if not row["unknown"]]
    fewest = min((len(row["ids"]) for row in ranked), default=0)
    cheapest = [row["side"]["letter"] for row in ranked if len(row["ids"]) == fewest]
    if not text:
        cheapest = []
    result = {
        "rows": rows,
        "diff": diff,
        "cheapest": cheapest,
        "fewest": fewest,
        "text": text,
        "display": display,
        "scrub_setting": setting,
        "text_verdict": None,
    }
    if text and len(rows) == 2 and len(ranked) == 2:
        result["text_verdict"] = verdict(len(rows[0]["ids"]), len(rows[1]["ids"]))
    return result


# ----- pages -------------------------------------------------------------------------------------
def _slugs(slugs: dict[str, str]) -> list[str]:
    return [slugs[arg] for arg in SLUG_ARGS if arg in slugs]


@set_routes()
def show(**slugs: str) -> ResponseReturnValue:
    return _render(_slugs(slugs), "compare/_encoded.html", request.args)


@set_routes("/merges")
def merges(**slugs: str) -> ResponseReturnValue:
    return _render(_slugs(slugs), "compare/_merges.html", request.args)


@set_routes("/encode", methods=("GET", "POST"))
def encode(**slugs: str) -> ResponseReturnValue:
    values = request.form if request.method == "POST" else request.args
    return _render(_slugs(slugs), "compare/_encoded.html", values)


@set_routes("/add", sizes=(2, 3))
def add(**slugs: str) -> ResponseReturnValue:
    """The page's "add a tokeniser" form: a pick from the list, or a pasted link or id."""
    current = _slugs(slugs)
    compare_sets.load_set(db.session(), current)
    picked = request.args.get("link", "").strip() or request.args.get("t", "")
    addition = compare_sets.resolve_addition(db.session(), picked)
    text = box_text(request.args)
    check_playground_text(text)
    kept = {"text": text} if text else {}
    return redirect(compare_url("compare.show", [*current, addition], **kept), code=303)


def _render(slugs: list[str], fragment: str, values: MultiDict[str, str]) -> Response:
    """The whole page, or (htmx) only the fragment, computing only what that one shows."""
    context = _sides(slugs)
    wants_page = not is_fragment_request()
    if wants_page or fragment == "compare/_merges.html":
        context.update(_merges(context, values))
    if wants_page or fragment == "compare/_encoded.html":
        context.update(_encoded(context, values))
    if wants_page:
        context.update(_overview(context))
        session = db.session()
        offered = (
            compare_sets.candidates(session, context["members"], owner_id=owners.current_owner_id())
            if len(slugs) < 4
            else []
        )
        context.update(
            candidates=offered, candidate_corpora=compare_sets.corpus_names(session, offered)
        )
    return page_or_fragment("compare/show.html", fragment, **context)


@bp.get("/compare/<slug_a>/with")
def pick(slug_a: str) -> ResponseReturnValue:
    """The tokeniser page's "compare with…" form lands here and is sent to the permalink."""
    slug_b = request.args.get("b", "")
    browse.get_tokenizer(db.session(), slug_a)
    browse.get_tokenizer(db.session(), slug_b)
    return redirect(url_for("compare.show", slug_a=slug_a, slug_b=slug_b), code=303)


# ----- naive vs chunked from the corpus page -----------------------------------------------------
@bp.post("/c/<slug>/compare")
def start(slug: str) -> ResponseReturnValue:
    corpus = get_corpus_or_404(slug)
    require_training_allowed(corpus)
    form = request.form.to_dict()
    try:
        settings = [parse_settings({**form, "mode": mode}) for mode in ("naive", "chunked")]
        job_ids = get_jobs().submit_many(  # both or neither
            corpus.id, settings, owner_id=owners.owner_id_for_write()
        )
    except UserError as exc:
        return render_corpus(corpus, error=exc.message, status=exc.status, form=form)
    return redirect(
        url_for("compare.jobs", slug=corpus.slug, job_a=job_ids[0], job_b=job_ids[1]), code=303
    )


def _jobs_context(slug: str, job_a: int, job_b: int) -> dict[str, Any]:
    corpus, first = get_job_or_404(slug, job_a)
    _, second = get_job_or_404(slug, job_b)
    jobs = [first, second]
    done = all(job.finished for job in jobs)
    made = [job.tokenizer for job in jobs if job.status == "succeeded"]
    compare_url = None
    if len(made) == 2 and made[0] is not None and made[1] is not None:
        compare_url = url_for("compare.show", slug_a=made[0].slug, slug_b=made[1].slug)
    return {
        "corpus": corpus,
        "jobs": jobs,
        "done": done,
        "compare_url": compare_url,
        "ready_url": url_for("compare.jobs_ready", slug=slug, job_a=job_a, job_b=job_b),
    }


@bp.get("/c/<slug>/compare/jobs/<int:job_a>/<int:job_b>")
def jobs(slug: str, job_a: int, job_b: int) -> ResponseReturnValue:
    return render_template("compare/jobs.html", **_jobs_context(slug, job_a, job_b))


@bp.get("/c/<slug>/compare/jobs/<int:job_a>/<int:job_b>/ready")
def jobs_ready(slug: str, job_a: int, job_b: int) -> ResponseReturnValue:
    """Polled by the jobs page; once both succeeded, htmx is sent on to the compare page."""
    context = _jobs_context(slug, job_a, job_b)
    response = make_response(render_template("compare/_jobs_ready.html", **context))
    if context["compare_url"] and request.headers.get("HX-Request"):
        response.headers["HX-Redirect"] = context["compare_url"]
    return response
