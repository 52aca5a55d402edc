"""The README's server (`make run`'s gunicorn command) while slow clients hold connections open.

N slow connections stay open the whole time, half sending a request's headers a byte a second
and never finishing them (slowloris), half sending complete headers of a POST to the encode API
and then its body a byte a second. One dropped by the server is opened again, so N are always
trying. Three seconds after they start, 32 normal clients (4 processes x 8 threads, one
keep-alive connection each) cycle for 20 s over the home page, a tokeniser's page and the
encode API; every request they make counts, one that failed or took past 10 s as an error
(with the time it took). Printed per N: p50/p95/p99/max of the normal clients, errors, and how
many slow connections the server dropped and after how long. The bar: p95 <= 200 ms with 200
slow connections.

The server is the Makefile's own command on a free port with a database, upload folder and
secret key of its own in a temporary folder. `--gunicorn-args` passes GUNICORN_CMD_ARGS (which
gunicorn reads over its config file) to measure another worker class or setting with the same
command; `--server` replaces the command (`{port}` is filled in) to measure another server.

    .venv/bin/python benchmarks/slow_clients.py                  # 0, 16 and 200 slow connections
    .venv/bin/python benchmarks/slow_clients.py --slow 200 --gunicorn-args='--worker-class gthread'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server_load import client_process

from tests.readme_server import BIN, makefile_server_line
from tests.waiting import free_port, wait_for_server

REQUEST_TIMEOUT = 10.0  # a normal request not answered by then is an error


class Served:
    """The server under test in a session of its own, logging to a file in its folder."""

    def __init__(self, workdir: Path, *, server: str | None, gunicorn_args: str | None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "PORT": str(self.port),
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "BPE_UPLOAD_TMP_DIR": str(workdir / "uploads-tmp"),
            "SECRET_KEY": "slow-clients-bench",
            "BPE_JOBS_EXECUTION": "thread",
            # 32 clients from one address would meet the per-client limit in seconds; what is
            # measured here is the server's threads, so the limiter is off (its own cost:
            # benchmarks/ratelimit_cost.py).
            "BPE_RATELIMIT": "0",
        }
        if gunicorn_args:
            env["GUNICORN_CMD_ARGS"] = gunicorn_args
        command = server.format(port=self.port) if server else makefile_server_line()
        command = command.replace("$(BIN)", str(BIN))
        subprocess.run(
            [str(BIN / "flask"), "--app", "webapp", "db-upgrade"], env=env, cwd=ROOT, check=True
        )
        self.log = open(workdir / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            ["bash", "-c", "exec " + command],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
        )
        try:
            wait_for_server(lambda: urllib.request.urlopen(self.base + "/", timeout=5).read(), 120)
        except AssertionError:
            raise SystemExit(f"the server did not start; see {workdir / 'server.log'}") from None

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        self.log.close()


def call(base: str, path: str, body: dict | None = None, token: str = "") -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as response:
        return json.loads(response.read())


def trained_tokenizer(base: str) -> str:
    """Upload a small corpus and train a tokeniser on it through the API; its slug."""
    words = ["low", "lower", "lowest", "newer", "newest", "wider", "widest", "slow", "slowest"]
    text = " ".join(words[(i * 7) % len(words)] for i in range(6000))
    corpus = call(base, "/api/corpora", {"name": "slow-bench", "text": text})
    token = corpus["owner_token"]
    job = call(
        base,
        f"/api/corpora/{corpus['slug']}/jobs",
        {"mode": "chunked", "vocab_size": 400},
        token,
    )
    path = job["api_url"].removeprefix(base)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        state = call(base, path, token=token)
        if state["tokenizer"]:
            return str(state["tokenizer"]["slug"])
        if state["status"] in ("failed", "cancelled", "interrupted"):
            raise SystemExit(f"the training job ended {state['status']}")
        time.sleep(0.5)
    raise SystemExit("the training job did not finish in 300 s")


# ----- the slow connections -------------------------------------------------------------------
async def _slow_connection(port: int, slug: str, body: bool, stop: asyncio.Event, out: list):
    """One slow client, opened again whenever the server drops it; the lifetime of each drop."""
    host = f"127.0.0.1:{port}"
    if body:
        first = (
            f"POST /api/t/{slug}/encode HTTP/1.1\r\nHost: {host}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        )
        trickle = b'{"text": "' + b"a" * 99_980
    else:
        first = f"GET / HTTP/1.1\r\nHost: {host}\r\n"
        trickle = b"X-Slow: 1\r\n" * 10_000
    while not stop.is_set():
        opened = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        answer: asyncio.Future = asyncio.get_running_loop().create_future()
        try:
            writer.write(first.encode())
            # Any answer or EOF ends it: the server has let go of this connection.
            answer = asyncio.ensure_future(reader.read(65536))
            for byte in trickle:
                await writer.drain()
                done, _ = await asyncio.wait([answer], timeout=1.0)
                if done or stop.is_set():
                    break
                writer.write(bytes([byte]))
        except OSError:
            pass
        finally:
            answer.cancel()
            writer.close()
        if not stop.is_set():
            out.append(time.monotonic() - opened)
            await asyncio.sleep(0.2)


async def _slow_clients(port: int, slug: str, n: int, seconds: float) -> list[float]:
    stop = asyncio.Event()
    drops: list[float] = []
    tasks = [
        asyncio.create_task(_slow_connection(port, slug, i % 2 == 1, stop, drops)) for i in range(n)
    ]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return drops


def slow_process(port: int, slug: str, n: int, seconds: float, out) -> None:
    out.put(asyncio.run(_slow_clients(port, slug, n, seconds)))


# ----- the normal clients ---------------------------------------------------------------------
def normal_requests(slug: str) -> list[tuple[str, str, bytes | None]]:
    encode = json.dumps({"text": "The slowest lower newer widest low " * 20}).encode()
    return [
        ("GET", "/", None),
        ("GET", f"/t/{slug}", None),
        ("POST", f"/api/t/{slug}/encode", encode),
    ]


def measure(port: int, slug: str, *, slow: int, clients: int, seconds: float) -> dict:
    context = multiprocessing.get_context("spawn")
    out, slow_out = context.Queue(), context.Queue()
    head_start = 3.0 if slow else 0.0
    slow_proc = context.Process(
        target=slow_process, args=(port, slug, slow, head_start + seconds + 1, slow_out)
    )
    if slow:
        slow_proc.start()
        time.sleep(head_start)
    procs = 4
    requests = normal_requests(slug)
    normal = [
        context.Process(
            target=client_process,
            args=(f"http://127.0.0.1:{port}", requests, clients // procs, seconds, out),
            kwargs={"timeout": REQUEST_TIMEOUT},
        )
        for _ in range(procs)
    ]
    for p in normal:
        p.start()
    results = [out.get(timeout=seconds + 120) for _ in normal]
    drops: list[float] = slow_out.get(timeout=60) if slow else []
    for p in [*normal, *([slow_proc] if slow else [])]:
        p.join(60)
    latencies = sorted(x for r in results for x in r[0])
    errors = [e for r in results for e in r[1]]
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {
        "slow": slow,
        "requests": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "p50_ms": q[49] * 1000,
        "p95_ms": q[94] * 1000,
        "p99_ms": q[98] * 1000,
        "max_ms": (latencies[-1] if latencies else float("nan")) * 1000,
        "slow_dropped": len(drops),
        "slow_median_life_s": statistics.median(drops) if drops else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--slow", default="0,16,200", help="slow connection counts, comma-separated"
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--gunicorn-args", help="GUNICORN_CMD_ARGS for the Makefile's command")
    parser.add_argument("--server", help="another server command; {port} is filled in")
    args = parser.parse_args()
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    with tempfile.TemporaryDirectory(prefix="bpe-slow-") as tmp:
        served = Served(Path(tmp), server=args.server, gunicorn_args=args.gunicorn_args)
        try:
            slug = trained_tokenizer(served.base)
            # Templates compiled and the tokeniser loaded in every worker before the first row.
            measure(served.port, slug, slow=0, clients=args.clients, seconds=3)
            for n in (int(x) for x in args.slow.split(",")):
                row = measure(served.port, slug, slow=n, clients=args.clients, seconds=args.seconds)
                print(json.dumps(row), flush=True)
                time.sleep(2)  # the last slow connections are closed before the next row
        finally:
            served.stop()


if __name__ == "__main__":
    main()
