"""Share slugs: 128 random bits, URL-safe, so a link can be shared but not guessed."""

from __future__ import annotations

import re
import secrets

SLUG_BYTES = 16  # 128 bits
_SLUG_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")


def new_slug() -> str:
    """22 characters of base64url (no padding) carrying 128 random bits."""
    return secrets.token_urlsafe(SLUG_BYTES)


def looks_like_slug(value: str) -> bool:
    """Cheap check before touching the database; anything else is answered with a 404."""
    return bool(_SLUG_RE.match(value))
