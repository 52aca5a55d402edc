"""Upload throughput and the server's peak memory for a large corpus; see BENCHMARKS.md.

    .venv/bin/python benchmarks/upload_throughput.py [--mb 100]

Streams a generated UTF-8 file of --mb megabytes to a server in its own process, once as a raw
body (`POST /api/corpora`) and once as a browser-style multipart upload (`POST /corpora`),
each into a fresh database. Reports MB/s and the server's peak RSS above its RSS just before
the upload (Linux /proc: VmHWM after clearing it), next to the file size: the peer figure is
"the body held twice in memory", 2x the file.
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webserver import Server, owner_headers, random_words


def make_file(path: Path, megabytes: int) -> int:
    target = megabytes * 1024 * 1024
    block = random_words(200_000, seed=3).encode()
    with open(path, "wb") as out:
        written = 0
        while written < target:
            piece = block[: target - written]
            out.write(piece)
            written += len(piece)
    return written


def send(base: str, path: Path, *, multipart: bool, owner: dict[str, str]) -> tuple[int, float]:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    size = path.stat().st_size
    if multipart:
        boundary = uuid.uuid4().hex
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{path.name}"\r\nContent-Type: text/plain\r\n\r\n'
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        url, length = "/corpora", len(head) + size + len(tail)
        content_type = f"multipart/form-data; boundary={boundary}"
    else:
        head = tail = b""
        url, length, content_type = "/api/corpora?name=big", size, "text/plain"
    started = time.perf_counter()
    conn.putrequest("POST", url)
    conn.putheader("Content-Type", content_type)
    conn.putheader("Content-Length", str(length))
    for name, value in owner.items():  # a bearer token: no CSRF token needed, form or API
        conn.putheader(name, value)
    conn.endheaders()
    conn.send(head)
    with open(path, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            conn.send(chunk)
    conn.send(tail)
    response = conn.getresponse()
    response.read()
    elapsed = time.perf_counter() - started
    conn.close()
    return response.status, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "corpus.txt"
        size = make_file(path, args.mb)
        print(f"file: {size / 2**20:.0f} MB of UTF-8 text")
        print(f"{'upload':24} {'status':>6} {'seconds':>8} {'MB/s':>7} {'peak RSS over idle':>20}")
        for multipart in (False, True):
            with tempfile.TemporaryDirectory() as serverdir:
                server = Server(serverdir)
                try:
                    server.reset_peak()
                    before = server.memory_kb()["VmRSS"]
                    owner = owner_headers(server.base)
                    status, seconds = send(server.base, path, multipart=multipart, owner=owner)
                    peak = server.memory_kb()["VmHWM"] - before
                finally:
                    server.stop()
            label = "multipart (/corpora)" if multipart else "raw body (/api/corpora)"
            print(
                f"{label:24} {status:6d} {seconds:8.2f} {size / 2**20 / seconds:7.1f}"
                f" {peak / 1024:14.0f} MB ({peak * 1024 / size:.2f}x file)"
            )
    print("peer: a body held twice in memory would cost 2.00x the file")
    os.sync()


if __name__ == "__main__":
    main()
