"""Tokeniser pages at /t/<slug>: the header, encode playground, merges, vocabulary, token
detail and downloads.

Every list is one endpoint that serves the whole page, or only its fragment when htmx asks
(the HX-Request header), as in contact-app: without JavaScript the forms GET or POST and get
a full page back; with htmx the same URLs swap in just the results.
"""

from __future__ import annotations

from typing import Any

from flask import (
    Blueprint,
    Response,
    current_app,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import MultiDict

import bpe
from bpe.token_info import CATEGORIES, merge_tree, token_category
from webapp.blueprints.pages import tokenizer_context
from webapp.plumbing import owners
from webapp.plumbing.htmx import (
    is_fragment_request,
    list_page_or_fragment,
    list_url_args,
    noisy_query,
    page_or_fragment,
    refuse_in_place,
)
from webapp.plumbing.inputs import MAX_DECODE_IDS, box_text, parse_ids
from webapp.plumbing.security import external_url
from webapp.refusals import UserError
from webapp.rendering.chips import encoded_chips
from webapp.rendering.describer import Describer, describer_for
from webapp.rendering.downloads import DOWNLOADS, export_file
from webapp.rendering.playground import (
    Display,
    check_playground_text,
    list_display,
    load_share,
    save_share,
)
from webapp.rendering.replay import merge_views, replay_views, scrub_arg, why_token_index
from webapp.rendering.segmentation import clamp_merges, replay_token, scrub
from webapp.rendering.token_display import counts, token_infos, token_view
from webapp.storage import browse, db
from webapp.storage.convert import load_tokenizer

bp = Blueprint("tokenizers", __name__, url_prefix="/t")

TREE_DEPTH_LIMIT = 10  # deeper parts of a merge tree are links to the part's own page


@bp.app_context_processor
def _limits() -> dict[str, int]:
    return {"max_bytes": current_app.config["PLAYGROUND_MAX_BYTES"]}


bp.register_error_handler(UserError, refuse_in_place)


# ----- playground (the tokeniser's landing page) -------------------------------------------------
@bp.get("/<slug>")
def show(slug: str) -> ResponseReturnValue:
    context = tokenizer_context(slug, header=not is_fragment_request())
    return _playground(context, request.args, Display.from_args(request.args))


@bp.route("/<slug>/encode", methods=["GET", "POST"])
def encode(slug: str) -> ResponseReturnValue:
    context = tokenizer_context(slug, header=not is_fragment_request())
    values = request.form if request.method == "POST" else request.args
    return _playground(context, values, Display.from_args(values))


@bp.post("/<slug>/share")
def share(slug: str) -> ResponseReturnValue:
    context = tokenizer_context(slug)
    display = Display.from_args(request.form)
    text = box_text(request.form)
    check_playground_text(text)
    owner_id = owners.owner_id_for_write()
    with db.session_scope() as session:
        share_slug = save_share(
            session, tokenizer_id=context["row"].id, text=text, display=display, owner_id=owner_id
        )
    link = external_url("tokenizers.shared", slug=slug, share_slug=share_slug)
    if is_fragment_request():
        return render_template("tokenizers/_share_link.html", link=link)
    return redirect(link, code=303)


@bp.get("/<slug>/s/<share_slug>")
def shared(slug: str, share_slug: str) -> ResponseReturnValue:
    context = tokenizer_context(slug)
    found = load_share(db.session(), tokenizer_id=context["row"].id, slug=share_slug)
    if found is None:
        raise UserError("There is no shared playground at this address.", status=404)
    text, display = found
    context["share_link"] = external_url("tokenizers.shared", slug=slug, share_slug=share_slug)
    return _playground(context, request.args, display, text=text)


def _playground(
    context: dict[str, Any],
    values: MultiDict[str, str],
    display: Display,
    *,
    text: str | None = None,
    why: bool = False,
) -> Response:
    """The playground for some text: encoded with all merges, or the first k (the scrubber),
    and with `why` the step-by-step replay of the chunk of one token."""
    text = box_text(values) if text is None else text
    check_playground_text(text)
    row = context["row"]
    tok = load_tokenizer(db.session(), row)
    specials = "all" if display.specials else ()
    k = clamp_merges(tok, scrub_arg(values, "k"))
    cut = scrub(tok, text, k, allowed_special=specials) if k < len(tok.merges) else None
    ids = cut.segmentation.ids if cut else tok.encode(text, allowed_special=specials)
    chips = encoded_chips(tok, ids, invalid=display.invalid, whitespace=display.whitespace)
    replayed = None
    if why:
        at = why_token_index(values, chips)
        replayed = replay_token(tok, text, at, allowed_special=specials, merge_limit=k)
        if replayed is None:
            raise UserError(
                f"There is no token {at + 1:,} in this text: it has {len(ids):,}"
                f" token{'s' if len(ids) != 1 else ''}.",
                status=422,
            )
    return page_or_fragment(
        "tokenizers/show.html",
        "tokenizers/_why.html" if why else "tokenizers/_encoded.html",
        **context,
        tab="playground",
        text=text,
        ids=ids,
        chips=chips,
        counts=counts(text, ids),
        display=display,
        k=k,
        sc=cut,
        merge_views=merge_views(tok, cut.merge if cut else None),
        replay=replay_views(tok, replayed, ids) if replayed else None,
    )


@bp.route("/<slug>/why", methods=["GET", "POST"])
def why(slug: str) -> ResponseReturnValue:
    """ "Why this split?": the replay of one token's chunk (htmx: only the panel)."""
    context = tokenizer_context(slug, header=not is_fragment_request())
    values = request.form if request.method == "POST" else request.args
    return _playground(context, values, Display.from_args(values), why=True)


# ----- merges -----------------------------------------------------------------------------------
@bp.get("/<slug>/merges")
def merges(slug: str) -> ResponseReturnValue:
    context = tokenizer_context(slug, header=not is_fragment_request())
    query = browse.MergeQuery.from_args(request.args)
    display = list_display(request.args)
    if noisy_query(request.args) and not is_fragment_request():
        return redirect(url_for("tokenizers.merges", slug=slug, **list_url_args(query, display)))
    page = browse.merges_page(db.session(), context["row"], query).must_exist()
    return list_page_or_fragment(
        "tokenizers.merges",
        list_url_args(query, display),
        "tokenizers/merges.html",
        "tokenizers/_merges.html",
        **context,
        tab="merges",
        query=query,
        page=page,
        merge_rows=_merge_views(describer_for(db.session(), context["row"]), page.rows, display),
        display=display,
    )


def _merge_views(
    describer: Describer, rows: list[Any], display: Display
) -> list[dict[str, Any]]:  # rows: browse.merges_page's
    out = []
    for r in rows:
        parts = (
            describer.info(r.left_id, r.left_bytes, ends_word=r.left_ends_word),
            describer.info(r.right_id, r.right_bytes, ends_word=r.right_ends_word),
            describer.info(r.new_id, r.new_bytes, ends_word=r.new_ends_word),
        )
        left, right, new = (
            token_view(p, invalid=display.invalid, whitespace=display.whitespace, colour=i)
            for i, p in enumerate(parts)
        )
        out.append({"row": r, "left": left, "right": right, "new": new})
    return out


# ----- decode ids -------------------------------------------------------------------------------
@bp.route("/<slug>/decode", methods=["GET", "POST"])
def decode(slug: str) -> ResponseReturnValue:
    """Ids pasted into a box -> the text and its chips. A refusal keeps what was pasted (the page
    comes back with the box filled and the message beside it, 4xx)."""
    context = tokenizer_context(slug, header=not is_fragment_request())
    values = request.form if request.method == "POST" else request.args
    display = Display.from_args(values)
    ids_text = box_text(values, "ids")
    found: dict[str, Any] = {"ids": [], "chips": [], "decoded": None, "refusal": None}
    status = 200
    try:
        ids = parse_ids(ids_text, max_ids=MAX_DECODE_IDS)
        tok = load_tokenizer(db.session(), context["row"])
        browse.check_ids(context["row"], ids, tok)
        found.update(
            ids=ids,
            chips=encoded_chips(tok, ids, invalid=display.invalid, whitespace=display.whitespace),
            decoded=tok.decode(ids),
        )
    except UserError as exc:
        found["refusal"], status = exc.message, exc.status
    response = page_or_fragment(
        "tokenizers/decode.html",
        "tokenizers/_decoded.html",
        **context,
        tab="playground",
        ids_text=ids_text,
        display=display,
        **found,
    )
    response.status_code = status
    return response


# ----- vocabulary ---------------------------------------------------------------------------------
@bp.get("/<slug>/vocab")
def vocab(slug: str) -> ResponseReturnValue:
    context = tokenizer_context(slug, header=not is_fragment_request())
    # A reader comes for what was learned; the base bytes and specials are one choice away.
    query = browse.VocabQuery.from_args(request.args, default_kind="learned")
    display = list_display(request.args)
    if noisy_query(request.args) and not is_fragment_request():
        return redirect(url_for("tokenizers.vocab", slug=slug, **list_url_args(query, display)))
    page = browse.vocab_page(db.session(), context["row"], query).must_exist()
    describer = describer_for(db.session(), context["row"])
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
        entries.append({"row": r, "view": view, "rank": info.rank})
    return list_page_or_fragment(
        "tokenizers.vocab",
        list_url_args(query, display),
        "tokenizers/vocab.html",
        "tokenizers/_vocab.html",
        **context,
        tab="vocab",
        query=query,
        page=page,
        entries=entries,
        display=display,
        categories=CATEGORIES,
        kinds=browse.VOCAB_KINDS,
        sorts={name: label for name, (label, _) in browse.VOCAB_SORTS.items()},
    )


# ----- one token ----------------------------------------------------------------------------------
@bp.get("/<slug>/token/<token_id>")
def token(slug: str, token_id: str) -> ResponseReturnValue:
    context = tokenizer_context(slug)
    row = context["row"]
    try:
        number = int(token_id)
    except ValueError:
        raise UserError(
            f"{token_id[:40]!r} is not a token id: ids are whole numbers.", status=404
        ) from None
    session = db.session()
    tok = load_tokenizer(session, row)
    browse.check_token_id(row, number, tok)
    display = list_display(request.args)
    [info] = token_infos(tok, [number])
    used_in = browse.merges_using(session, row, number)
    return render_template(
        "tokenizers/token.html",
        **context,
        tab="vocab",
        info=info,
        view=token_view(info, invalid=display.invalid, whitespace=display.whitespace),
        tree=_tree_rows(tok, number, display),
        used_in=used_in,
        used_rows=_merge_views(describer_for(session, row), used_in.rows, display),
        display=display,
        category=token_category(info.data, special=info.special),
        pair_count=_pair_count(tok, info.rank),
    )


def _pair_count(tok: bpe.Tokenizer, rank: int | None) -> int | None:
    if rank is None or tok.training is None:
        return None
    return tok.training.merge_counts[rank]


def _tree_rows(tok: bpe.Tokenizer, token_id: int, display: Display) -> list[dict]:
    """The merge tree flattened in reading order: one row per node with its depth.

    Walked with a stack, not recursion: naive tokenisers can build chains thousands deep. Past
    TREE_DEPTH_LIMIT a node is shown but not opened; its own page continues the tree.

    A part that was already opened higher up (32 spaces are 16 + 16, each 8 + 8, ...) is not
    opened again: its row says so and links to the first one, so a tree has at most one row
    per distinct token plus one per repeat.
    """
    root = merge_tree(tok, token_id)
    rows: list[dict] = []
    opened: set[int] = set()
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        [info] = token_infos(tok, [node.token_id])
        left, right = node.left, node.right
        has_parts = left is not None and right is not None
        repeat = has_parts and node.token_id in opened
        rows.append(
            {
                "node": node,
                "depth": depth,
                "view": token_view(
                    info, invalid=display.invalid, whitespace=display.whitespace, colour=depth
                ),
                "cut": has_parts and not repeat and depth >= TREE_DEPTH_LIMIT,
                "repeat": repeat,
                "kind": info.base_kind,
            }
        )
        if left is not None and right is not None and not repeat and depth < TREE_DEPTH_LIMIT:
            opened.add(node.token_id)
            stack.append((right, depth + 1))
            stack.append((left, depth + 1))
    return rows


# ----- downloads ----------------------------------------------------------------------------------
@bp.get("/<slug>/download/<fmt>")
def download(slug: str, fmt: str) -> ResponseReturnValue:
    row = browse.get_tokenizer(db.session(), slug)
    if fmt not in DOWNLOADS:
        raise UserError(
            f"There is no download format {fmt[:40]!r}; choose one of {', '.join(DOWNLOADS)}.",
            status=404,
        )
    tok = load_tokenizer(db.session(), row)
    body, filename, mimetype = export_file(tok, row, fmt, DOWNLOADS[fmt].split(" (")[0])
    return _attachment(body, filename, mimetype)


def _attachment(body: str | bytes, filename: str, mimetype: str) -> Response:
    response = Response(body, mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
