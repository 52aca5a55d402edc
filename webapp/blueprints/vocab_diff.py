"""Two vocabularies side by side at /compare/<a>/<b>/vocab: the tokens both have, those only A
has and those only B has, counted per category and listed with the vocabulary page's filters,
sorts and paging. The JSON API's twin is /api/vocab-diff/<a>/<b>."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, redirect, request, url_for
from flask.typing import ResponseReturnValue

from bpe.token_info import CATEGORIES
from webapp.plumbing.htmx import (
    is_fragment_request,
    list_url_args,
    noisy_query,
    page_or_fragment,
    refuse_in_place,
)
from webapp.refusals import UserError
from webapp.rendering.describer import describer_for
from webapp.rendering.playground import list_display
from webapp.rendering.token_display import token_view
from webapp.storage import browse, db
from webapp.storage.vocab_diff import SIDES, diff_counts, diff_page, side_arg

bp = Blueprint("vocab_diff", __name__)
bp.register_error_handler(UserError, refuse_in_place)


def _pair(slug_a: str, slug_b: str) -> tuple[Any, Any]:
    session = db.session()
    return browse.get_tokenizer(session, slug_a), browse.get_tokenizer(session, slug_b)


@bp.get("/compare/<slug_a>/<slug_b>/vocab")
def show(slug_a: str, slug_b: str) -> ResponseReturnValue:
    first, second = _pair(slug_a, slug_b)
    side = side_arg(request.args)
    query = browse.VocabQuery.from_args(request.args)
    display = list_display(request.args)
    url_args = {**list_url_args(query, display), **({"side": side} if side != "both" else {})}
    if noisy_query(request.args) and not is_fragment_request():
        return redirect(url_for("vocab_diff.show", slug_a=slug_a, slug_b=slug_b, **url_args))
    session = db.session()
    counts = diff_counts(session, first, second)
    page = diff_page(session, first, second, side, query, counts).must_exist()
    listed = second if side == "b" else first
    describer = describer_for(session, listed)
    entries = []
    for r in page.rows:
        info = describer.info(
            r.token_id, r.token_bytes, special=r.is_special, ends_word=r.ends_word
        )
        view = token_view(
            info,
            invalid="replace" if display.invalid == "replace" else "hex",
            whitespace=display.whitespace,
            colour=r.token_id,
        )
        entries.append({"row": r, "view": view})
    response = page_or_fragment(
        "compare/vocab.html",
        "compare/_vocab_diff.html",
        a=first,
        b=second,
        listed=listed,
        side=side,
        sides=SIDES,
        counts=counts,
        query=query,
        page=page,
        entries=entries,
        display=display,
        url_args=url_args,
        categories=CATEGORIES,
        sorts={name: label for name, (label, _) in browse.VOCAB_SORTS.items()},
    )
    if is_fragment_request():
        response.headers["HX-Push-Url"] = url_for(
            "vocab_diff.show", slug_a=slug_a, slug_b=slug_b, **url_args
        )
    return response


@bp.get("/api/vocab-diff/<slug_a>/<slug_b>")
def api(slug_a: str, slug_b: str) -> ResponseReturnValue:
    """Counts per category and side, and one page of a side's tokens (`side`, and the
    vocabulary API's `q`, `match`, `category`, `min_len`, `max_len`, `sort`, `page`,
    `per_page`)."""
    first, second = _pair(slug_a, slug_b)
    side = side_arg(request.args)
    query = browse.VocabQuery.from_args(request.args)
    session = db.session()
    counts = diff_counts(session, first, second)
    page = diff_page(session, first, second, side, query, counts).must_exist()
    other = "b_id" if side != "b" else "a_id"
    own = "a_id" if side != "b" else "b_id"
    return jsonify(
        a=first.slug,
        b=second.slug,
        side=side,
        counts={"totals": counts.totals, "by_category": counts.by_category},
        page=page.paging.page,
        per_page=page.paging.per_page,
        pages=page.pages,
        total=page.total,
        tokens=[
            {
                own: r.token_id,
                other: r.other_id,
                "hex": r.token_bytes.hex(),  # the token's exact bytes, as everywhere
                # what it stands for, which the two are compared on (Llama 2's `▁the`: " the")
                "stands_for_hex": r.hex,
                "byte_length": r.byte_length,
                "category": r.category,
                "special": r.is_special,
                "ends_word": r.ends_word,
            }
            for r in page.rows
        ],
    )
