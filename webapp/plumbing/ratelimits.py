"""Rate limits per client address (Flask-Limiter), so that one client cannot make owners by the
thousand, fill the job queue or keep every request thread busy.

- Every request but static files counts against `RATELIMIT_APPLICATION` (BPE_RATELIMIT_REQUESTS,
  generous: a page, its htmx fragments, a job page polling every second and the encode API all
  fit many times over); it is what a script hammering pages or the encode API meets.
- Writes that cost the site something count, on top, against the limit of their group
  (`GROUPS`): uploads, jobs, imports, evaluations, and every other change (renames, deletes,
  shares, cancels, claims). Only their state-changing methods count (a delete's confirmation
  page is a read).
- A new owner is counted where one is made (`charge_new_owner`, called by
  `webapp.plumbing.owners.owner_id_for_write`): a visitor's first upload, job or share, or
  POST /api/owners. Requests that prove an owner they already have never count there.
- The client is the peer's address, unless the peer is a proxy named in FORWARDED_ALLOW_IPS
  (the variable gunicorn reads for the same trust): then the address that proxy saw, the
  rightmost X-Forwarded-For entry not itself a trusted proxy (`client_address`). A client
  cannot forge it: whatever it sends in the header stands to the left of what the proxy adds.
- A refusal is 429 with `Retry-After` (seconds) and the site's error page, or the JSON error
  shape under /api/ (with `retry_after`), saying which limit it met and when to try again.
- Counters live in `RATELIMIT_STORAGE_URI` (BPE_RATELIMIT_STORAGE_URL): `memory://` by default,
  one set per process; Redis (`redis://...`) shares them between processes and machines. If
  that storage cannot be reached, the limits go on in each process's memory (logged).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, request
from flask.typing import ResponseReturnValue
from flask_limiter import Limiter, RateLimitExceeded
from limits import RateLimitItem, parse_many

from webapp.plumbing.errors import error_response

log = logging.getLogger(__name__)

WRITE_METHODS = ["POST", "PUT", "PATCH", "DELETE"]
TITLE = "Too many requests"

# group -> (its config key, what its requests are called in a refusal, the endpoints it covers)
GROUPS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "uploads": ("RATELIMIT_UPLOADS", "uploads", ("corpora.upload", "corpora.api_upload")),
    "jobs": (
        "RATELIMIT_JOBS",
        "training jobs started",
        (
            "corpora.train",
            "jobs.api_train",
            "jobs.rerun",
            "jobs.api_rerun",
            "compare.start",
            "sample.start",
        ),
    ),
    "imports": ("RATELIMIT_IMPORTS", "imports", ("imports.import_form", "imports.import_api")),
    "evaluations": (
        "RATELIMIT_EVALUATIONS",
        "evaluations",
        (
            "evaluations.evaluate",
            "text_evaluation.page",
            "text_evaluation.api",
            "languages.request_table",
            "languages.api_request",
        ),
    ),
    "writes": (
        "RATELIMIT_WRITES",
        "changes",
        (
            "manage.rename_corpus",
            "manage.corpus_training",
            "manage.delete_corpus",
            "manage.rename_tokenizer",
            "manage.delete_tokenizer",
            "manage.api_update_corpus",
            "manage.api_delete_corpus",
            "manage.api_update_tokenizer",
            "manage.api_delete_tokenizer",
            "tokenizers.share",
            "jobs.cancel",
            "jobs.api_cancel",
            "evaluations.cancel",
            "imports.cancel",
            "languages.cancel",
            "owner.claim",
            "owner.api_new_owner",
        ),
    ),
}
# Routes that take a POST only to carry a text too long for a URL: reads, under the requests
# limit alone. tests/test_rate_limits.py fails on a state-changing route in neither list.
READS_BY_POST = (
    "api.encode",
    "api.decode",
    "tokenizers.encode",
    "tokenizers.decode",
    "tokenizers.why",
    "compare.encode",
    "home.encode",
    "home.compare",  # the counts table's ticked models, sent on to the compare page
    "chat.show",  # the chat editor's buttons post the conversation to be counted again
    "api.chat",
)
# Asked often, from one address, by whoever runs the site (a balancer, a scraper): never limited.
EXEMPT = ("ops.healthz", "ops.readyz", "ops.metrics_page")
OWNERS_SCOPE = "owners"
OWNERS_NOUN = "new owners (a first upload, job or share without an owner token)"
REQUESTS_NOUN = "requests"


class _Trust:
    """FORWARDED_ALLOW_IPS parsed: addresses and networks, or `*` for any peer."""

    def __init__(self, spec: list[str]) -> None:
        self.any = "*" in spec
        self.networks = [ipaddress.ip_network(one, strict=False) for one in spec if one != "*"]

    def __call__(self, address: str) -> bool:
        if self.any:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)


def client_address() -> str:
    """Who the request is from, for the limits (see the module docstring)."""
    peer = request.remote_addr or ""
    trusted: _Trust = current_app.extensions["bpe_trusted_proxies"]
    if not peer or not trusted(peer):
        return peer or "unknown"
    hops = [h.strip() for h in request.headers.get("X-Forwarded-For", "").split(",")]
    hops = [h for h in hops if h]
    for hop in reversed(hops):
        if not trusted(hop):
            return hop[:64]
    return (hops[0] if hops else peer)[:64]


def _limiter() -> Limiter:
    limiter: Limiter = current_app.extensions["bpe_limiter"]  # init_app below
    return limiter


def _limit_of(key: str) -> Callable[[], str]:
    return lambda: str(current_app.config[key])


def _retry_after(reset_at: float) -> int:
    return max(1, math.ceil(reset_at - time.time()))


def spoken(limit: RateLimitItem) -> str:
    """`10 per minute`, `100 per 2 hours`: a limit as the settings write it.

    >>> from limits import parse
    >>> spoken(parse("10/minute")), spoken(parse("100 per 2 hours"))
    ('10 per minute', '100 per 2 hours')
    """
    unit = limit.GRANULARITY.name
    if limit.multiples == 1:
        return f"{limit.amount} per {unit}"
    return f"{limit.amount} per {limit.multiples} {unit}s"


def _refusal(noun: str, limit: RateLimitItem, retry_after: int) -> ResponseReturnValue:
    message = (
        f"Too many {noun} from your address: at most {spoken(limit)}. Try again in {retry_after} s."
    )
    body, status = error_response(429, message, title=TITLE, retry_after=retry_after)
    return body, status, {"Retry-After": str(retry_after)}


class OwnersLimited(Exception):
    def __init__(self, limit: RateLimitItem, retry_after: int) -> None:
        super().__init__(str(limit))
        self.limit = limit
        self.retry_after = retry_after


def charge_new_owner() -> None:
    """Count one new owner against this client's BPE_RATELIMIT_OWNERS (OwnersLimited, a 429,
    past it). Called just before the owner is made."""
    limiter = _limiter()
    if not limiter.enabled:
        return
    key = client_address()
    items = parse_many(current_app.config["RATELIMIT_OWNERS"])
    strategy = limiter.limiter
    try:
        for item in items:
            if not strategy.test(item, OWNERS_SCOPE, key):
                reset_at, _ = strategy.get_window_stats(item, OWNERS_SCOPE, key)
                raise OwnersLimited(item, _retry_after(reset_at))
        for item in items:
            strategy.hit(item, OWNERS_SCOPE, key)
    except OwnersLimited:
        raise
    except Exception:
        # The shared storage failed here first (the request's own limit, checked before any
        # view, usually finds it down and moves every count to memory): an owner is still made
        # rather than every first upload failing.
        log.warning("could not count a new owner against the rate limit", exc_info=True)


def init_app(app: Flask) -> Limiter:
    """The limiter of this app (each app its own: the tests make many, on other storages)."""
    config = app.config
    app.extensions["bpe_trusted_proxies"] = _Trust(config["FORWARDED_ALLOW_IPS"])
    limiter = Limiter(
        client_address,
        application_limits=[_limit_of("RATELIMIT_APPLICATION")],
        in_memory_fallback_enabled=True,
        key_prefix=config["RATELIMIT_KEY_PREFIX"],
    )
    limiter.init_app(app)
    app.extensions["bpe_limiter"] = limiter

    @app.errorhandler(RateLimitExceeded)
    def _limited(exc: RateLimitExceeded) -> ResponseReturnValue:
        current = limiter.current_limit  # the limit just breached
        reset_at = current.window.reset_time if current is not None else time.time() + 1
        return _refusal(_noun(exc.limit.scope), exc.limit.limit, _retry_after(reset_at))

    @app.errorhandler(OwnersLimited)
    def _owners_limited(exc: OwnersLimited) -> ResponseReturnValue:
        return _refusal(OWNERS_NOUN, exc.limit, exc.retry_after)

    return limiter


def _noun(scope: Any) -> str:
    for group, (_, noun, _) in GROUPS.items():
        if scope == group:
            return noun
    return REQUESTS_NOUN


def limit_routes(app: Flask) -> None:
    """Wrap each group's views in its shared limit; after the blueprints are registered."""
    limiter: Limiter = app.extensions["bpe_limiter"]
    for group, (key, _, endpoints) in GROUPS.items():
        shared = limiter.shared_limit(
            _limit_of(key), scope=group, methods=WRITE_METHODS, override_defaults=False
        )
        for endpoint in endpoints:
            if endpoint in app.view_functions:  # an area may be left out of an app
                view: Callable[..., Any] = app.view_functions[endpoint]
                app.view_functions[endpoint] = shared(view)
    for endpoint in EXEMPT:
        if endpoint in app.view_functions:
            limiter.exempt(app.view_functions[endpoint])
