"""gunicorn's gthread worker, made to hold slow clients off its threads and to answer the
errors gunicorn raises itself as JSON.

Slow clients. gthread gives a connection a thread as soon as its first bytes arrive, and the
thread then blocks until the request is whole: a client sending its headers or its body a
byte a second holds a thread for as long as it likes, and a few dozen such connections left no
thread for anyone else. Here the worker's event loop (the thread that accepts) reads each
request itself, without blocking, until its head and a body of up to BODY_BUFFER_BYTES have
arrived, and only then hands it to a thread, which parses exactly those bytes. A request that
is not whole in time is answered 408 and closed: the head must arrive within HEADER_TIMEOUT of
the connection (or of the request, on a kept-alive one), a body within BODY_TIMEOUT plus a
second per MIN_BODY_RATE bytes received, so a large upload on a slow link has time but a
trickle does not. A larger body (an upload) streams to its thread once BODY_BUFFER_BYTES have
come, and from then on the same allowance counts afresh (PacedSocket): a stalled or trickled
upload ends with the app's 400 for a body cut short, so it holds a thread for seconds. The
look at the head here only decides how many bytes to wait for; gunicorn's parser, in the
thread, still reads every byte and refuses what is malformed. TLS is left to gunicorn's own
path (it is never configured here: a proxy in front terminates it).

Errors. A request gunicorn cannot even parse (a request line past `limit_request_line`,
malformed or too many headers) never reaches the app, so gunicorn would answer with its own
HTML page; the JSON API promises `{"error": ..., "status": ...}` for every error status, 414
included. The path of such a request is not known, so every one of them gets the JSON form,
which also reads fine as text in a browser. The answer carries the same security headers as the
app's, and says what was wrong in words of its own: gunicorn's message quotes the request line
or header it could not parse, which is the sender's text.
"""

from __future__ import annotations

import contextlib
import json
import re
import selectors
import time
from functools import partial
from typing import Any

from gunicorn import util
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import TConn, ThreadWorker

from webapp.plumbing.security import CSP

LIMIT_REQUEST_LINE = 8190  # gunicorn's limit_request_line (webapp/gunicorn_conf.py sets it)
HEADER_TIMEOUT = 10.0  # seconds for a request's head to arrive whole
BODY_TIMEOUT = 10.0  # seconds for its body, plus one per MIN_BODY_RATE bytes received
MIN_BODY_RATE = 1024  # bytes a second
BODY_BUFFER_BYTES = 256 * 1024  # bodies up to this size arrive whole before a thread sees them
# A head longer than gunicorn accepts (100 fields of 8190 bytes and the line) goes to the parser,
# which refuses it, rather than being buffered without end.
HEAD_LIMIT = LIMIT_REQUEST_LINE + 101 * 8192

MESSAGES = {
    400: "The request could not be read: its request line or a header is malformed.",
    408: "The request did not arrive in time.",
    414: f"The request line is too long: it may have at most {LIMIT_REQUEST_LINE:,} bytes.",
    431: "The request has too many headers, or one that is too long.",
}

_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*(\d+)[ \t]*\r\n", re.IGNORECASE)
# A chunked body's end is not known from the head, and a client that asked for
# "100 Continue" waits for it before sending its body: both go to a thread with the head.
_STREAMED = re.compile(rb"\r\n(transfer-encoding|expect)[ \t]*:", re.IGNORECASE)


def json_error(status_int: int, reason: str) -> bytes:
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
    return head.encode("latin-1") + body


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    util.write_nonblock(sock, json_error(status_int, reason))


def body_budget(started: float, received: int) -> float:
    """When a body of which `received` bytes have come must be whole (monotonic seconds)."""
    return started + BODY_TIMEOUT + received / MIN_BODY_RATE


def request_arrived(data: bytes) -> bool:
    """Whether `data` holds what a thread needs: a whole head, and the body up to
    BODY_BUFFER_BYTES unless it streams."""
    arrival = Arrival(0.0)
    arrival.add(data, 0.0)
    return arrival.arrived()


class Arrival:
    """A request being read by the event loop: its bytes so far and its deadline. What it
    waits for is only a guess from the head: the parser in the thread decides what the bytes
    mean. Each chunk is looked at once (a head sent in tiny pieces costs no rescans)."""

    def __init__(self, now: float) -> None:
        self.data = bytearray()
        self.deadline = now + HEADER_TIMEOUT
        self.head_end = -1  # where the blank line ending the head starts, once it has come
        self.head_done = now
        self.wanted = 0  # body bytes to wait for (at most BODY_BUFFER_BYTES)

    def add(self, chunk: bytes, now: float) -> None:
        searched = max(len(self.data) - 3, 0)
        self.data += chunk
        if self.head_end < 0:
            self.head_end = self.data.find(b"\r\n\r\n", searched)
            if self.head_end < 0:
                return
            self.head_done = now
            head = self.data[: self.head_end + 2]
            length = _CONTENT_LENGTH.search(head)
            wanted = int(length.group(1)) if length else 0
            self.wanted = 0 if _STREAMED.search(head) else min(wanted, BODY_BUFFER_BYTES)
        self.deadline = body_budget(self.head_done, self.body_bytes())

    def body_bytes(self) -> int:
        return len(self.data) - self.head_end - 4

    def arrived(self) -> bool:
        if self.head_end < 0:
            return len(self.data) > HEAD_LIMIT
        return self.body_bytes() >= self.wanted


class PacedSocket:
    """The socket as the parser in a thread reads it: each recv waits at most until the body
    budget (BODY_TIMEOUT plus a second per MIN_BODY_RATE bytes) runs out, then raises
    TimeoutError, which the app sees as a client gone (a 400). Writes do not go through here."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.started = time.monotonic()
        self.received = 0
        self.timeout: float | None = None  # a tighter limit of gunicorn's (its body drain)

    def gettimeout(self) -> float | None:
        return self.timeout

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout

    def recv(self, size: int) -> bytes:
        left = body_budget(self.started, self.received) - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request body did not arrive in time")
        self.sock.settimeout(left if self.timeout is None else min(left, self.timeout))
        try:
            chunk = self.sock.recv(size)
        finally:
            self.sock.settimeout(None)  # a slow reader of a long answer is not timed out
        self.received += len(chunk)
        return bytes(chunk)


class BufferingThreadWorker(ThreadWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arriving: dict[TConn, Arrival] = {}

    def init_process(self) -> None:
        # This process runs only this worker, so the swap is for its whole life (gunicorn's
        # Worker.handle_error looks the function up on the module each time).
        util.write_error = write_json_error
        super().init_process()

    def enqueue_req(self, conn: TConn) -> None:
        """Every way a connection goes to a thread passes here (a new one, a kept-alive one
        that became readable, a pipelined request): it waits in the event loop instead until
        its request has arrived."""
        if (
            self.cfg.is_ssl
            or conn.is_http2
            or negotiation.prior_knowledge_allowed(self.cfg, conn.client)
        ):  # gunicorn's own path reads a TLS handshake or an HTTP/2 preface first
            super().enqueue_req(conn)
            return
        now = time.monotonic()
        arrival = Arrival(now)
        if conn.parser is not None:  # read ahead by the last request
            arrival.add(conn.parser.unreader.take_buffered(), now)
        if arrival.arrived():
            self._to_thread(conn, arrival)
            return
        conn.sock.setblocking(False)
        self.arriving[conn] = arrival
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn: TConn, _sock: Any) -> None:
        arrival = self.arriving[conn]
        try:
            chunk = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client went away
            self._drop(conn)
            return
        arrival.add(chunk, time.monotonic())
        if arrival.arrived():
            self.poller.unregister(conn.sock)
            del self.arriving[conn]
            self._to_thread(conn, arrival)

    def _to_thread(self, conn: TConn, arrival: Arrival) -> None:
        conn.init()  # the parser (no TLS here, so nothing is read) and a blocking socket
        conn.parser.unreader.unread(bytes(arrival.data))
        conn.data_ready = True
        super().enqueue_req(conn)

    def _drop(self, conn: TConn, answer: bytes = b"") -> None:
        self.poller.unregister(conn.sock)
        del self.arriving[conn]
        if answer:
            with contextlib.suppress(OSError):
                conn.sock.send(answer)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """Called by the event loop about once a second: requests past their deadline get a 408
        and are closed (a stopping worker waits for none of them)."""
        super().murder_pending()
        now = time.monotonic()
        late = [c for c, a in self.arriving.items() if a.deadline <= now or not self.alive]
        for conn in late:
            # A connection that never sent a byte (a browser's spare one) is just closed.
            answer = json_error(408, "Request Timeout") if self.arriving[conn].data else b""
            self._drop(conn, answer)

    def handle(self, conn: TConn) -> Any:
        if conn.parser is not None and not conn.is_http2:
            unreader = conn.parser.unreader
            unreader.sock = PacedSocket(conn.sock)
        return super().handle(conn)
