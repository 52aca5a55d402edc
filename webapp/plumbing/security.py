"""What a public site needs on every request: trusted hosts, CSRF, a same-origin check and the
security headers.

- Hosts: any Host header not in TRUSTED_HOSTS is refused (400), and absolute URLs are built
  from BPE_PUBLIC_URL when it is set (`external_url`), so a forged Host never ends up in a
  link. `TrustedHosts` checks it rather than werkzeug: host names are case-insensitive
  (RFC 3986 3.2.2) and an IPv6 literal comes in brackets (`[::1]:5000`), and werkzeug's check
  refuses both `LOCALHOST` and any bracketed address. Links built from the request's host
  are lowercased by werkzeug, and the same-origin check compares lowercased origins.
- State changes (POST, PUT, PATCH, DELETE) pass `check_state_change` before any view runs:
  first the same-origin check (`Sec-Fetch-Site`, else `Origin`), then
  - a request proving its owner with `Authorization: Bearer` carries no ambient credential, so
    it needs no CSRF token (curl and scripts);
  - under /api/ anything else must be `application/json`, a type browsers never send
    cross-site without asking first; and if it carries the owner cookie, a CSRF token too;
  - every other request (forms, htmx) needs Flask-WTF's CSRF token, in the form field or the
    X-CSRFToken header that base.html sets once on <body> with `hx-headers`.
  Tokens never expire (WTF_CSRF_TIME_LIMIT None): a page left open for a day still posts.
- Headers: a strict Content-Security-Policy (no inline code anywhere; see static/*.js), nosniff,
  no referrer, no framing, and `Cache-Control: no-store` on every dynamic answer (pages carry the
  visitor's CSRF token and what they own).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, jsonify, request, url_for
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import SecurityError

from webapp.refusals import UserError

CSP = (
    "default-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SAFE_FETCH_SITES = frozenset({"same-origin", "none"})  # "none": typed in, or a bookmark
LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "::1"]
HSTS_SECONDS = 365 * 24 * 3600

API_TYPE_MESSAGE = (
    "The API takes state changes as Content-Type: application/json, or with an"
    " Authorization: Bearer <owner token> header (raw uploads from curl)."
)

csrf = CSRFProtect()


# The cookie that carries an owner's credential (webapp.plumbing.owners hands it out): the one
# ambient credential a foreign page could make a browser send, so what CSRF guards.
OWNER_COOKIE = "bpe_owner"
# Under https it is __Host-bpe_owner: a browser takes such a cookie only from a secure page of
# this very host, for path / and no domain, so a page on another port or subdomain of the host
# cannot plant one of its own beside it (cookie tossing).
SECURE_OWNER_COOKIE = "__Host-" + OWNER_COOKIE


class Forbidden(UserError):
    status = 403


# host[:port] as a Host header carries it: a name or IPv4 address, or an IPv6 one in brackets
_HOST = re.compile(r"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?")


class TrustedHosts:
    """The host names (and addresses) this site answers to, compared without regard to case or
    port. An entry that starts with a dot trusts every subdomain too (`.example.org`), as
    Flask's TRUSTED_HOSTS does; an IPv6 entry may be written with or without brackets."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.names: set[str] = set()
        self.suffixes: set[str] = set()  # ".example.org" for the entry ".example.org"
        self.addresses: set[ipaddress.IPv6Address] = set()
        for entry in entries:
            entry = entry.strip().lower()
            address = _ipv6(entry.strip("[]")) or _ipv6(entry.partition("]")[0].lstrip("["))
            if address is not None:
                self.addresses.add(address)
            elif entry.startswith("."):
                self.suffixes.add(_idna(entry.partition(":")[0]))
            elif entry:
                self.names.add(_idna(entry.partition(":")[0]))

    def allows(self, host: str) -> bool:
        """Whether a Host header's `host[:port]` is one of these (the port is not compared)."""
        match = _HOST.fullmatch(host.lower())
        if match is None or (match["port"] and not 1 <= int(match["port"]) <= 65535):
            return False
        if match["ipv6"] is not None:
            return _ipv6(match["ipv6"]) in self.addresses
        name = match["name"]
        return name in self.names or any(name.endswith(s) for s in self.suffixes)


def _ipv6(text: str) -> ipaddress.IPv6Address | None:
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def _idna(name: str) -> str:
    """A configured name as a Host header would carry it (`bücher.example` -> `xn--...`)."""
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:
        return name  # cannot be encoded: then no header can match it either


def init_app(app: Flask) -> None:
    config = app.config
    # Checked ourselves in check_state_change (CSRFProtect's own hook would run on every POST,
    # bearer-token API calls included).
    config["WTF_CSRF_CHECK_DEFAULT"] = False
    config["WTF_CSRF_TIME_LIMIT"] = None
    # Flask-WTF's HTTPS check wants a Referer, which Referrer-Policy: no-referrer never sends;
    # the Origin / Sec-Fetch-Site check below does that job.
    config["WTF_CSRF_SSL_STRICT"] = False
    public = config.get("PUBLIC_URL")
    if public:
        parts = urlsplit(public)
        config["PREFERRED_URL_SCHEME"] = parts.scheme
        if config.get("TRUSTED_HOSTS") is None:
            config["TRUSTED_HOSTS"] = [parts.hostname]
    if config.get("TRUSTED_HOSTS") is None:
        config["TRUSTED_HOSTS"] = list(LOOPBACK_HOSTS)
    # Checked by `check_host` instead of Flask (werkzeug's check: see the module docstring).
    app.extensions["bpe_trusted_hosts"] = TrustedHosts(config["TRUSTED_HOSTS"])
    config["TRUSTED_HOSTS"] = None
    # First of all the checks: no other hook (owners, CSRF) runs for a host refused anyway.
    app.before_request_funcs.setdefault(None, []).insert(0, check_host)
    # The session cookie holds the CSRF token (and a new owner link until it is shown).
    if config.get("SESSION_COOKIE_SAMESITE") is None:
        config["SESSION_COOKIE_SAMESITE"] = "Lax"
    config["SESSION_COOKIE_HTTPONLY"] = True
    if public and urlsplit(public).scheme == "https":
        config["SESSION_COOKIE_SECURE"] = True
    csrf.init_app(app)
    app.before_request(check_state_change)
    app.after_request(add_headers)
    app.register_error_handler(CSRFError, _csrf_refused)
    app.register_error_handler(SecurityError, _untrusted_host)


def public_origin() -> str:
    """scheme://host[:port] of this site: BPE_PUBLIC_URL, else the (trusted) request host."""
    public = current_app.config.get("PUBLIC_URL")
    if public:
        parts = urlsplit(public)
        return f"{parts.scheme}://{parts.netloc}".lower()
    return f"{request.scheme}://{request.host}".lower()


def external_url(endpoint: str, **values: Any) -> str:
    """An absolute URL for links handed out (API answers, share links, owner links)."""
    public = current_app.config.get("PUBLIC_URL")
    path = url_for(endpoint, **values)
    if public:
        return public.rstrip("/") + path
    return request.host_url.rstrip("/") + path


def bearer_token() -> str | None:
    """The token of an `Authorization: Bearer …` header, or None when there is none."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip()


def check_host() -> None:
    """A Host header this site does not answer to is refused (400, `_untrusted_host`)."""
    trusted: TrustedHosts = current_app.extensions["bpe_trusted_hosts"]
    if not trusted.allows(request.host):
        raise SecurityError("untrusted host")


def check_state_change() -> None:
    if request.method not in STATE_CHANGING or request.routing_exception is not None:
        return  # no such route or method: its 404 or 405 comes first
    _check_same_origin()
    if bearer_token() is not None:
        return  # no cookie is relied on: nothing a foreign page could make the browser send
    if request.path.startswith("/api/"):
        if owner_cookie_name() not in request.cookies:
            return  # no ambient credential to abuse (raw uploads still need a bearer token)
        if not request.is_json:
            raise Forbidden(API_TYPE_MESSAGE)
    try:
        csrf.protect()
    except OSError:
        from webapp.storage.uploads import ConnectionDropped

        raise ConnectionDropped() from None


def _check_same_origin() -> None:
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site.strip().lower() not in SAFE_FETCH_SITES:
            raise Forbidden(
                "This request came from another site, so it was refused: changes can only be"
                " made from this site's own pages."
            )
        return
    origin = request.headers.get("Origin")
    if origin is None:
        return  # not a browser (or a very old one): the CSRF token still has to match
    if origin.strip().lower() != public_origin():
        raise Forbidden(
            "This request's Origin is not this site, so it was refused: changes can only be"
            " made from this site's own pages."
        )


def _untrusted_host(_exc: SecurityError) -> ResponseReturnValue:
    """A Host header not in TRUSTED_HOSTS. No URL can be built for it (that is the point), so
    the answer is a bare one, and it does not repeat the host it was sent."""
    message = "This site does not answer to that host name."
    if request.path.startswith("/api/"):
        return jsonify(error=message, status=400), 400
    page = f"<!doctype html><title>400 Bad request</title><h1>Bad request</h1><p>{message}</p>"
    return Response(page, status=400, mimetype="text/html")


def _csrf_refused(exc: CSRFError) -> ResponseReturnValue:
    from webapp.plumbing.errors import error_response

    return error_response(
        403,
        f"{exc.description} Reload the page and try again (forms need the token this site"
        " puts in its pages; API clients send Authorization: Bearer <owner token>).",
    )


def add_headers(response: Response) -> Response:
    headers = response.headers
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "no-referrer")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Content-Security-Policy", CSP)
    if is_https():
        # A browser that has seen the site over https never tries plain http for a year.
        headers.setdefault("Strict-Transport-Security", f"max-age={HSTS_SECONDS}")
    if request.endpoint != "static" and "Cache-Control" not in headers:
        headers["Cache-Control"] = "no-store"
    response.vary.add("Cookie")
    return response


def owner_cookie_name() -> str:
    return SECURE_OWNER_COOKIE if is_https() else OWNER_COOKIE


def is_https() -> bool:
    public = current_app.config.get("PUBLIC_URL")
    if public:
        return urlsplit(public).scheme == "https"
    return request.is_secure


def load_or_make_secret_key(instance_path: str) -> str:
    """A secret key kept in instance/secret_key, so sessions and CSRF tokens survive restarts
    (a random key per start would break every page left open across a restart)."""
    path = os.path.join(instance_path, "secret_key")
    try:
        with open(path, encoding="ascii") as handle:
            key = handle.read().strip()
        if key:
            return key
    except FileNotFoundError:
        pass
    os.makedirs(instance_path, exist_ok=True)
    key = os.urandom(32).hex()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return load_or_make_secret_key(instance_path)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key)
    return key
