"""Bounded waits for tests that watch another thread, process or server."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 90.0,
    interval: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """The first truthy value of predicate(), polled every `interval` seconds; AssertionError
    after `timeout`. Exceptions of the `ignore` types count as "not yet" (a server that is
    still starting refuses connections with OSError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except ignore:
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met in {timeout:g} s")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_server(predicate: Callable[[], T], timeout: float = 60.0) -> T:
    """wait_for over HTTP: while a server starts (or restarts after a kill), a refused or reset
    connection means "not yet"."""
    return wait_for(predicate, timeout, interval=0.1, ignore=(OSError,))
