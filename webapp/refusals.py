"""The one refusal every layer raises: `UserError`, a message for the person who sent the
request and the status it is answered with (the error pages in `webapp.plumbing.errors` turn it
into a page or JSON). It imports nothing of the web app, so storage, jobs and rendering may
raise it without knowing about requests.
"""

from __future__ import annotations


class UserError(Exception):
    """A refusal with a status code and a message meant for the person who sent the request."""

    status = 422

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


def human_bytes(n: int) -> str:
    """Sizes in decimal (SI) units everywhere, as disks and networks count them: 1 kB is
    1,000 bytes and 1 MB 1,000,000, so "50 kB" and "50,000 bytes" name the same limit. Under
    10 kB the exact count.

    >>> human_bytes(1000), human_bytes(48_800), human_bytes(150_000_000)
    ('1,000 bytes', '48.8 kB', '150 MB')
    """
    if n < 10_000:
        return f"{n:,} bytes"
    for unit, size in (("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if n >= size:
            value = round(n / size, 1)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:,} bytes"
