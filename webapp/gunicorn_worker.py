"""gunicorn's gthread worker, answering the errors gunicorn raises itself as JSON.

A request gunicorn cannot even parse (a request line past `limit_request_line`, malformed or
too many headers) never reaches the app, so gunicorn would answer with its own HTML page; the
JSON API promises `{"error": ..., "status": ...}` for every error status, 414 included. The
path of such a request is not known, so every one of them gets the JSON form, which also reads
fine as text in a browser. The answer carries the same security headers as the app's, and says
what was wrong in words of its own: gunicorn's message quotes the request line or header it
could not parse, which is the sender's text.
"""

from __future__ import annotations

import json
from typing import Any

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from webapp.plumbing.security import CSP

LIMIT_REQUEST_LINE = 8190  # gunicorn's limit_request_line (webapp/gunicorn_conf.py sets it)

MESSAGES = {
    400: "The request could not be read: its request line or a header is malformed.",
    414: f"The request line is too long: it may have at most {LIMIT_REQUEST_LINE:,} bytes.",
    431: "The request has too many headers, or one that is too long.",
}


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    message = MESSAGES.get(status_int, reason)
    body = json.dumps({"error": message, "status": status_int}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Referrer-Policy: no-referrer\r\n"
        "X-Frame-Options: DENY\r\n"
        f"Content-Security-Policy: {CSP}\r\n"
        "Cache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


class JsonErrorThreadWorker(ThreadWorker):
    def init_process(self) -> None:
        # This process runs only this worker, so the swap is for its whole life (gunicorn's
        # Worker.handle_error looks the function up on the module each time).
        util.write_error = write_json_error
        super().init_process()
