"""The JSON API beside the tokeniser pages, under /api/t/<slug>:

- `GET  /api/t/<slug>`: metadata (how it was trained, compression, download links);
- `POST /api/t/<slug>/encode` `{"text": ..., "allowed_special": "all" | "none" | [...]}`
  (or `GET ?text=`): ids, each token's bytes in hex, and the counts;
- `POST /api/t/<slug>/decode` `{"ids": [...]}`: the text and its bytes in hex;
- `POST /api/t/<slug>/chat` `{"messages": [{"role", "content"}], "add_generation_prompt",
  "format"}`: a conversation's tokens in the model's chat format, per message and framing
  (docs/chat.md);
- `GET  /api/t/<slug>/merges`, `/vocab`: a page, with the same query parameters as the pages.

Errors are JSON `{"error": message, "status": code}` with a 4xx code (the app's error
handler answers JSON for every path under /api/). Documented in docs/api.md.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request
from flask.typing import ResponseReturnValue

from bpe.chat import count_chat
from bpe.chat_cli import count_json
from bpe.chat_types import ChatError, parse_conversation
from webapp.plumbing import owners
from webapp.plumbing.inputs import MAX_DECODE_IDS, json_object
from webapp.plumbing.security import external_url
from webapp.refusals import UserError
from webapp.rendering.describer import describer_for
from webapp.rendering.encode_json import encode_response
from webapp.rendering.playground import TextTooLarge, check_text
from webapp.rendering.token_display import counts
from webapp.storage import browse, db
from webapp.storage.convert import load_tokenizer, load_tokenizer_by_id

bp = Blueprint("api", __name__, url_prefix="/api/t")


def _json_body() -> dict[str, Any]:
    return json_object('{"text": "hello"}')


@bp.get("/<slug>")
def metadata(slug: str) -> ResponseReturnValue:
    session = db.session()
    row = browse.get_tokenizer(session, slug)
    corpus = browse.corpus_of(session, row)
    size = corpus.size_bytes if corpus else None
    return jsonify(
        slug=row.slug,
        url=external_url("tokenizers.show", slug=row.slug),
        name=row.name,
        mode=row.mode,
        pattern=row.pattern,
        trainer=row.trainer,
        vocab_size=row.vocab_size,
        vocab_size_requested=row.vocab_size_requested,
        merges=row.merge_count,
        min_frequency=row.min_frequency,
        special_tokens=browse.special_tokens(row),
        training_seconds=row.training_seconds,
        created_at=row.created_at.isoformat() + "Z",
        # The corpus's slug only for its owner (null for anyone else): a tokeniser link does not
        # give its corpus away.
        corpus=None
        if corpus is None
        else {
            "slug": corpus.slug if owners.owns(corpus) else None,
            "name": corpus.name,
            "size_bytes": corpus.size_bytes,
        },
        compression={
            "initial_tokens": row.initial_tokens,
            "final_token_count": row.final_token_count,
            "bytes_per_token": size / row.final_token_count
            if size and row.final_token_count
            else None,
        },
        downloads={
            fmt: external_url("tokenizers.download", slug=row.slug, fmt=fmt)
            for fmt in ("json", "hf", "tiktoken")
        },
    )


def _allowed_special(raw: Any, specials: dict[str, int]) -> Any:
    if raw in (None, "none"):
        return ()
    if raw == "all":
        return "all"
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        unknown = [s for s in raw if s not in specials]
        if unknown:
            raise UserError(
                f"{unknown[0]!r} is not a special token of this tokeniser; it has "
                f"{sorted(specials) or 'none'}.",
                status=422,
            )
        return raw
    raise UserError(
        'allowed_special must be "all", "none" or a list of special tokens.', status=422
    )


@bp.route("/<slug>/encode", methods=["GET", "POST"])
def encode(slug: str) -> ResponseReturnValue:
    session = db.session()
    tokenizer_id = browse.live_tokenizer_id(session, slug)
    if request.method == "POST":
        body = _json_body()
        text, allowed = body.get("text"), body.get("allowed_special")
    else:
        text, allowed = request.args.get("text"), request.args.get("allowed_special")
    if not isinstance(text, str):
        raise UserError('Give the text to encode as a string: {"text": "hello"}.', status=400)
    try:
        limit = current_app.config["PLAYGROUND_MAX_BYTES"]
        check_text(text, max_bytes=limit)
    except TextTooLarge as exc:
        raise UserError(str(exc), status=413) from None
    tok = load_tokenizer_by_id(session, tokenizer_id, slug)
    ids = tok.encode(text, allowed_special=_allowed_special(allowed, tok.special_tokens))
    return encode_response(tok, ids, counts(text, ids))


@bp.post("/<slug>/decode")
def decode(slug: str) -> ResponseReturnValue:
    session = db.session()
    row = browse.get_tokenizer(session, slug)
    ids = _json_body().get("ids")
    if not isinstance(ids, list) or not all(type(i) is int for i in ids):
        raise UserError('Give the ids as a list of whole numbers: {"ids": [104, 105]}.', status=400)
    if len(ids) > MAX_DECODE_IDS:
        raise UserError(
            f"At most {MAX_DECODE_IDS:,} ids per request, not {len(ids):,}.", status=413
        )
    tok = load_tokenizer(session, row)
    for position, token_id in enumerate(ids):
        # By the tokeniser's own ids: an import's specials may lie above vocab_size - 1 and
        # its holes below it.
        if not tok.has_id(token_id):
            raise UserError(
                f"ids[{position}] = {token_id} is not in this vocabulary: ids run 0 to "
                f"{browse.id_limit(row) - 1}.",
                status=422,
            )
    return jsonify(text=tok.decode(ids), hex=tok.decode_bytes(ids).hex())


@bp.post("/<slug>/chat")
def chat(slug: str) -> ResponseReturnValue:
    session = db.session()
    tokenizer_id = browse.live_tokenizer_id(session, slug)
    body = json_object('{"messages": [{"role": "user", "content": "Hello"}]}')
    chat_format = body.get("format")
    if chat_format is not None and not isinstance(chat_format, str):
        raise UserError('"format" must be a format\'s name, e.g. "plain".', status=400)
    try:
        messages, add_generation_prompt = parse_conversation(body)
        check_text("".join(m.content for m in messages), max_bytes=_limit())
    except ChatError as exc:
        raise UserError(str(exc), status=422) from None
    except TextTooLarge as exc:
        raise UserError(f"The conversation is too long: {exc}.", status=413) from None
    tok = load_tokenizer_by_id(session, tokenizer_id, slug)
    try:
        count = count_chat(
            tok, messages, add_generation_prompt=add_generation_prompt, chat_format=chat_format
        )
    except ChatError as exc:
        raise UserError(str(exc), status=422) from None
    return jsonify(count_json(count, [m.role for m in messages]))


def _limit() -> int:
    return int(current_app.config["PLAYGROUND_MAX_BYTES"])


@bp.get("/<slug>/merges")
def merges(slug: str) -> ResponseReturnValue:
    session = db.session()
    row = browse.get_tokenizer(session, slug)
    page = browse.merges_page(session, row, browse.MergeQuery.from_args(request.args))
    return jsonify(
        **_paging(page),
        merges=[
            {
                "rank": r.rank,
                "left_id": r.left_id,
                "right_id": r.right_id,
                "new_id": r.new_id,
                "left_hex": r.left_bytes.hex(),
                "right_hex": r.right_bytes.hex(),
                "hex": r.new_bytes.hex(),
                "text": _text(r.new_bytes, r.new_ends_word),
                "pair_count": r.pair_count,
                "tokens_after": r.tokens_after,
            }
            for r in page.rows
        ],
    )


@bp.get("/<slug>/vocab")
def vocab(slug: str) -> ResponseReturnValue:
    session = db.session()
    row = browse.get_tokenizer(session, slug)
    page = browse.vocab_page(session, row, browse.VocabQuery.from_args(request.args))
    describer = describer_for(session, row)
    return jsonify(
        **_paging(page),
        tokens=[
            {
                "id": r.token_id,
                "hex": r.token_bytes.hex(),
                "text": _text(r.token_bytes, r.ends_word),
                "byte_length": r.byte_length,
                "char_length": r.char_length,
                "category": r.category,
                "rank": describer.info(r.token_id, r.token_bytes, special=r.is_special).rank,
                "pair_count": r.pair_count,
                "special": r.is_special,
                "ends_word": r.ends_word,
            }
            for r in page.rows
        ],
    )


def _text(data: bytes, ends_word: bool) -> str:
    """A readable form; `hex` is the exact one (bytes that are not UTF-8 become U+FFFD here)."""
    text = data.decode("utf-8", errors="replace")
    return text + "</w>" if ends_word else text


def _paging(page: browse.Page) -> dict[str, int]:
    return {
        "page": page.paging.page,
        "per_page": page.paging.per_page,
        "pages": page.pages,
        "total": page.total,
    }
