"""Slow clients cannot take the README's server offline (`make run`'s gunicorn command).

Fifty connections send a request a byte every half second, half of them the headers of a GET
that never end, half a POST's body, and two uploads do the same after a fast start; the server
has 2 workers of 8 threads, so with a thread given to each slow connection nobody else would be
answered. Others must still be answered promptly, and each slow connection must be answered
and closed once its time is up (webapp/gunicorn_worker.py). Before that, without a server: which
bytes make a request whole enough for a thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from tests.readme_server import start_readme_server
from tests.waiting import free_port, wait_for_server
from webapp.gunicorn_worker import (
    BODY_BUFFER_BYTES,
    BODY_TIMEOUT,
    HEAD_LIMIT,
    HEADER_TIMEOUT,
    MIN_BODY_RATE,
    Arrival,
    request_arrived,
)

SLOW = 50
UPLOADS = 2
TRICKLE_INTERVAL = 0.5


class SlowClients:
    """Connections that send their first bytes, then one byte per TRICKLE_INTERVAL each, from
    one thread; records when and with what the server ended each."""

    def __init__(self, port: int, firsts: list[bytes]) -> None:
        self.socks: list[socket.socket] = []
        self.opened: dict[socket.socket, float] = {}
        self.ended: dict[socket.socket, tuple[float, bytes]] = {}
        for first in firsts:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(first)
            sock.setblocking(False)
            self.socks.append(sock)
            self.opened[sock] = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        selector = selectors.DefaultSelector()
        for sock in self.socks:
            selector.register(sock, selectors.EVENT_READ)
        answers = dict.fromkeys(self.socks, b"")
        while not self.stop.is_set() and len(self.ended) < len(self.socks):
            deadline = time.monotonic() + TRICKLE_INTERVAL
            while (left := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    sock = key.fileobj
                    try:
                        chunk = sock.recv(65536)
                    except OSError:
                        chunk = b""
                    answers[sock] += chunk
                    if not chunk:
                        self.ended[sock] = (time.monotonic(), answers[sock])
                        selector.unregister(sock)
            for sock in self.socks:
                if sock not in self.ended:
                    with contextlib.suppress(OSError):
                        sock.send(b"x")  # a header line's or the body's next byte
        selector.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for sock in self.socks:
            sock.close()


def first_bytes(port: int, owner_token: str) -> list[bytes]:
    """SLOW requests that never finish their head or their small body, and UPLOADS whose first
    BODY_BUFFER_BYTES (all the event loop holds) arrive at once."""
    host = f"Host: 127.0.0.1:{port}\r\n"
    head = f"GET / HTTP/1.1\r\n{host}"
    post = (
        f"POST /api/owners HTTP/1.1\r\n{host}Content-Type: application/json\r\n"
        "Content-Length: 5000\r\n\r\n"
    )
    upload = (
        f"POST /api/corpora?name=slow HTTP/1.1\r\n{host}Content-Type: text/plain\r\n"
        f"Authorization: Bearer {owner_token}\r\nContent-Length: 1000000\r\n\r\n"
    ).encode() + b"x" * BODY_BUFFER_BYTES
    return [(post if i % 2 else head).encode() for i in range(SLOW)] + [upload] * UPLOADS


HEAD = b"POST /api/owners HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"


@pytest.mark.parametrize(
    ("data", "arrived"),
    [
        (b"GET / HTTP/1.1\r\nHost: localhost\r\n", False),  # the head goes on
        (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", True),
        (b"GET /" + b"a" * HEAD_LIMIT, True),  # the parser refuses it (414), not a wait
        (HEAD + b"\r\n{}", False),  # 2 of the body's 5 bytes
        (HEAD + b"\r\n{} {}", True),
        (HEAD + b"\r\n{} {}GET / HTTP/1.1\r\n", True),  # a pipelined request begins
        (HEAD.replace(b"Content-Length", b"content-LENGTH") + b"\r\n{}", False),
        (HEAD.replace(b"5", b"9" * 9) + b"\r\n" + b"x" * BODY_BUFFER_BYTES, True),  # streams
        (HEAD + b"Expect: 100-continue\r\n\r\n", True),  # waits for our 100 Continue
        (HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\n", True),  # streams
    ],
)
def test_a_request_goes_to_a_thread_once_it_has_arrived(data, arrived):
    assert request_arrived(data) is arrived


def test_a_request_sent_a_byte_at_a_time_arrives_with_its_last_byte():
    request = HEAD + b"\r\n{} {}"
    arrival = Arrival(0.0)
    for i in range(len(request)):
        assert not arrival.arrived(), request[:i]
        arrival.add(request[i : i + 1], float(i))
    assert arrival.arrived()
    # The body's allowance runs from the head's last byte (one per MIN_BODY_RATE bytes after).
    assert arrival.deadline == len(HEAD) + 1 + BODY_TIMEOUT + 5 / MIN_BODY_RATE


@pytest.mark.slow
@pytest.mark.embedded_only
def test_slow_clients_neither_block_others_nor_stay_connected(tmp_path):
    port = free_port()
    env = {
        "PORT": str(port),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'served.sqlite3'}",
        "BPE_UPLOAD_TMP_DIR": str(tmp_path / "uploads"),
        "WEB_CONCURRENCY": "2",
        "BPE_WEB_THREADS": "8",
    }
    server = start_readme_server(
        env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, own_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(lambda: urllib.request.urlopen(base + "/", timeout=10).read())
        request = urllib.request.Request(
            base + "/api/owners", data=b"{}", headers={"Content-Type": "application/json"}
        )
        token = json.loads(urllib.request.urlopen(request, timeout=10).read())["owner_token"]
        slow = SlowClients(port, first_bytes(port, token))
        try:
            time.sleep(2)  # every slow connection accepted and under way
            for _ in range(10):
                started = time.monotonic()
                with urllib.request.urlopen(base + "/", timeout=5) as response:
                    assert response.status == 200
                assert time.monotonic() - started < 2.0
            # The bodies trickled so far count for a second or less of allowance.
            limit = max(HEADER_TIMEOUT, BODY_TIMEOUT) + 5
            slow.thread.join(limit)
            ended = dict(slow.ended)
        finally:
            slow.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
    assert len(ended) == SLOW + UPLOADS, f"{SLOW + UPLOADS - len(ended)} still open"
    for i, sock in enumerate(slow.socks):
        when, answer = ended[sock]
        lasted = when - slow.opened[sock]
        assert HEADER_TIMEOUT - 1 <= lasted <= limit, lasted
        head, _, body = answer.decode().partition("\r\n\r\n")
        # An upload's body was cut short in the app (its 400); the others never reached it.
        status = 408 if i < SLOW else 400
        assert head.startswith(f"HTTP/1.1 {status} "), answer[:200]
        assert json.loads(body)["status"] == status
