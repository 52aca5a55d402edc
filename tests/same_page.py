"""Two responses compared as pages: what differs between two requests for the same content is
blanked first. Every page carries a CSRF token (the layout's htmx headers, each form's field),
signed with a timestamp in seconds, so two posts a second apart differ in it alone."""

from __future__ import annotations

import re

_CSRF_TOKEN = re.compile(r"[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}")
_TIMING = re.compile(r"<dd>[0-9.,]+ (?:ms|s)</dd>")


def comparable(html: str | bytes) -> str:
    """`html` with its CSRF tokens and its measured timings replaced by fixed words."""
    if isinstance(html, bytes):
        html = html.decode()
    return _TIMING.sub("<dd>TIME</dd>", _CSRF_TOKEN.sub("CSRF-TOKEN", html))
