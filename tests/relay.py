"""A TCP relay that a test can switch off: a server (PostgreSQL) as the app sees it, stopped
and started again, while the real server, which the suite shares, keeps running."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit


class Forwarder:
    """Relays every connection to `host:port` while `open`; `stop()` cuts them all."""

    @classmethod
    def to_url(cls, url: str) -> Forwarder:
        parts = urlsplit(url)
        return cls(parts.hostname or "127.0.0.1", parts.port or 5432)

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def stop(self) -> None:
        self.open = False
        for one in self.sockets:
            one.close()
        self.sockets.clear()

    def close(self) -> None:
        self.stop()
        self.listener.close()


def through(relay: Forwarder, url: str) -> str:
    """`url` with its host and port replaced by the relay's."""
    parts = urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return parts._replace(netloc=f"{auth}127.0.0.1:{relay.port}").geturl()
