"""Owners without accounts: whoever uploads a corpus, starts a job or makes a share owns it.

- The proof is a random token of 256 bits (`new_token`). Only its SHA-256 is stored; a request's
  token is hashed, looked up by that hash and compared again in constant time.
- A browser holds the token in an HttpOnly, SameSite=Lax cookie (`bpe_owner`; over HTTPS the
  `__Host-` one, see `webapp.plumbing.security`), and a request with two different owner
  cookies is refused. The first page after the owner is made shows, once, an owner link
  (`/owner/claim#<token>`) that claims the same ownership on another device; claiming from a
  browser that owns something first says what would move (`claim_preview`). API clients get
  the token in the JSON answer of their first upload (or from POST /api/owners) and send
  `Authorization: Bearer <token>`.
- A bearer token wins over the cookie. An unknown bearer token is refused (403) wherever an
  owner is needed, rather than silently starting a new owner.

Views ask `current_owner_id()` (None for a stranger), `owns(row)` and `owner_id_for_write()`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Protocol

from flask import Flask, g, request, session
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session
from werkzeug.wrappers import Response

from webapp.plumbing.ratelimits import charge_new_owner
from webapp.plumbing.security import (
    Forbidden,
    bearer_token,
    external_url,
    is_https,
    owner_cookie_name,
)
from webapp.storage import db
from webapp.storage.models import (
    Corpus,
    EvaluationRow,
    LanguageJob,
    Owner,
    PlaygroundShare,
    Tokenizer,
    TrainingJob,
    utcnow,
)

TOKEN_BYTES = 32  # 256 bits
COOKIE_MAX_AGE = 400 * 24 * 3600  # the longest lifetime browsers keep a cookie
_SHOW_ONCE_KEY = "owner_link_token"


class Owned(Protocol):
    """A row someone may own: a corpus, tokeniser, job, share or evaluation."""

    @property
    def owner_id(self) -> int | None: ...


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def find_owner(session: Session, token: str) -> int | None:
    """The id of the owner holding this token, or None.

    Looked up by the token's SHA-256 (what a timing difference could reveal is about a hash, not
    the token), then compared again in constant time.
    """
    if not token or len(token) > 200:
        return None
    digest = token_hash(token)
    row = session.execute(
        select(Owner.id, Owner.token_sha256).where(Owner.token_sha256 == digest)
    ).first()
    if row is None or not hmac.compare_digest(row.token_sha256, digest):
        return None
    return row.id


def create_owner() -> tuple[int, str]:
    token = new_token()
    with db.session_scope() as write:
        owner = Owner(token_sha256=token_hash(token), created_at=utcnow())
        write.add(owner)
        write.flush()
        return owner.id, token


TWO_COOKIES_MESSAGE = (
    "This browser sent two owner cookies for this site, so it is not clear whose request this"
    " is: another page on this host may have set one. Clear this site's cookies, then open your"
    " owner link again."
)


# ----- the owner of the current request ----------------------------------------------------------
def _presented_token() -> tuple[str | None, bool]:
    """(token, from_bearer) as the request presents it."""
    bearer = bearer_token()
    if bearer is not None:
        return bearer, True
    tokens = request.cookies.getlist(owner_cookie_name())
    if len(set(tokens)) > 1:
        # Two owner cookies at once: one was planted on a longer path by some other page of
        # this host, so whichever the browser sent first may not be this visitor's own.
        raise Forbidden(TWO_COOKIES_MESSAGE)
    return (tokens[0] if tokens else None), False


def current_owner_id() -> int | None:
    """The owner this request proves it is, or None (a stranger, or a token we do not know)."""
    if "owner_id" not in g:
        token, _ = _presented_token()
        g.owner_id = find_owner(db.session(), token) if token else None
    return g.owner_id


def owns(row: Owned | None) -> bool:
    """Whether the current request proves it owns `row` (a corpus, tokeniser, job or share)."""
    owner_id = current_owner_id()
    return owner_id is not None and row is not None and row.owner_id == owner_id


def require_owner(row: Owned | None, what: str) -> None:
    if not owns(row):
        raise Forbidden(
            f"Only the owner of this {what} can do that. If it is yours, open your owner link"
            " in this browser first (or send your token as Authorization: Bearer)."
        )


def owner_id_for_write() -> int:
    """The current owner, made now if this visitor has none yet (their first upload, job or
    share). A new owner's token goes out with the response (`after_request` below)."""
    owner_id = current_owner_id()
    if owner_id is not None:
        return owner_id
    token, from_bearer = _presented_token()
    if from_bearer:
        raise Forbidden(
            "This bearer token is not an owner token of this site. Leave the Authorization"
            " header out to be given a new token, or check for a typo."
        )
    charge_new_owner()  # owners cost nothing else, so each client may make only so many
    owner_id, token = create_owner()
    g.owner_id = owner_id
    g.new_owner_token = token
    return owner_id


def new_owner_token() -> str | None:
    """The token of an owner made during this request (for the API's answer), else None."""
    return g.get("new_owner_token")


def owner_link(token: str) -> str:
    """The link that claims ownership on another device; the token rides in the fragment, which
    browsers never send to a server (so it stays out of logs)."""
    return external_url("owner.claim_page") + "#" + token


def browser_owner_link() -> str | None:
    """The owner link of the owner this browser's cookie proves, to show again on `/owner` to
    someone who missed the banner; None for a stranger or a bearer-token client (a script has
    its token already). Only a page of this site can read it: pages are no-store and framing
    is refused (webapp/plumbing/security.py)."""
    token, from_bearer = _presented_token()
    if from_bearer or not token or current_owner_id() is None:
        return None
    return owner_link(token)


def pop_owner_link() -> str | None:
    """The owner link to show once, on the first page after the owner was made."""
    token = session.pop(_SHOW_ONCE_KEY, None)
    return owner_link(token) if token else None


def set_owner_cookie(response: Response, token: str) -> None:
    response.set_cookie(
        owner_cookie_name(),
        token,
        max_age=COOKIE_MAX_AGE,
        httponly=True,
        samesite="Lax",
        secure=is_https(),
        path="/",
    )


def _hand_out_new_token(response: Response) -> Response:
    token = g.get("new_owner_token")
    if token is not None:
        set_owner_cookie(response, token)
        if not request.path.startswith("/api/"):
            session[_SHOW_ONCE_KEY] = token  # shown on the next page, then forgotten
    return response


# ----- claiming an owner link --------------------------------------------------------------------
@dataclass(frozen=True)
class Holdings:
    """How much an owner owns, by kind: what a claim would move."""

    corpora: int = 0
    tokenizers: int = 0
    jobs: int = 0
    shares: int = 0
    evaluations: int = 0

    @property
    def empty(self) -> bool:
        return not any((self.corpora, self.tokenizers, self.jobs, self.shares, self.evaluations))


def holdings(session: Session, owner_id: int | None) -> Holdings:
    """What `owner_id` owns now (live corpora and tokenisers, every job, share and evaluation)."""
    if owner_id is None:
        return Holdings()

    def count(table: type[Any], *where: Any) -> int:
        query = select(func.count()).select_from(table).where(table.owner_id == owner_id, *where)
        return session.scalar(query) or 0

    return Holdings(
        corpora=count(Corpus, Corpus.deleted_at.is_(None)),
        tokenizers=count(Tokenizer, Tokenizer.deleted_at.is_(None)),
        jobs=count(TrainingJob),
        shares=count(PlaygroundShare),
        evaluations=count(EvaluationRow),
    )


def claim_preview(token: str) -> tuple[Holdings, Holdings] | None:
    """What claiming `token` would do, before it is done: (what this browser owns and would hand
    over to the link's owner, what the link owns), or None when nothing would move (this
    browser owns nothing, or already is that owner). Forbidden for a token we do not know."""
    claimed = _claimed_owner(token)
    previous = current_owner_id()
    if previous is None or previous == claimed:
        return None
    moving = holdings(db.session(), previous)
    if moving.empty:
        return None
    return moving, holdings(db.session(), claimed)


def _claimed_owner(token: str) -> int:
    claimed = find_owner(db.session(), token.strip())
    if claimed is None:
        raise Forbidden(
            "This owner link is not valid here: check that it was copied whole (it is the long"
            " part after #)."
        )
    return claimed


def claim(token: str) -> int:
    """Make this request's visitor the owner holding `token`; what it owned so far moves over.

    Returns the claimed owner's id; raises Forbidden for a token we do not know.
    """
    claimed = _claimed_owner(token)
    previous = current_owner_id()
    if previous is not None and previous != claimed:
        with db.session_scope() as write:
            moved = (Corpus, Tokenizer, TrainingJob, PlaygroundShare, EvaluationRow, LanguageJob)
            for table in moved:
                write.execute(
                    update(table).where(table.owner_id == previous).values(owner_id=claimed)
                )
            write.execute(delete(Owner).where(Owner.id == previous))
    g.owner_id = claimed
    return claimed


def init_app(app: Flask) -> None:
    app.after_request(_hand_out_new_token)

    @app.context_processor
    def _owner_context() -> dict[str, object]:
        return {"owns": owns, "pop_owner_link": pop_owner_link}
