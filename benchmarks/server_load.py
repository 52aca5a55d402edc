"""The README's production server (gunicorn, `make run`'s command) on loopback, measured:

1. encode API under load: 32 clients x 20 s posting 1 KiB texts to /api/t/<slug>/encode while
   a training job runs, and the same load with no job, side by side in one run (the idle
   server is the peer: the ratio says what a training costs the pages). Errors, p50/p95/p99,
   req/s.
2. memory: 8 concurrent viewers of a ~190 MB corpus (its page, its evaluations table, its
   delete confirmation, its API answer, the home page that lists it, a tokeniser's API
   metadata), 5 rounds each, measured two ways on every worker: the growth of its peak RSS
   (VmHWM, reset just before through /proc/<pid>/clear_refs) over its RSS before the views,
   and the highest VmRSS seen by sampling every millisecond or so during them.

The clients run in 4 processes x 8 threads (one keep-alive connection each), so the client's
own GIL is not what is measured. Run:

    .venv/bin/python benchmarks/server_load.py              # both parts
    .venv/bin/python benchmarks/server_load.py --skip-memory
    .venv/bin/python benchmarks/server_load.py --skip-load     # the memory part alone
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.readme_server import start_readme_server
from tests.waiting import free_port, wait_for_server

CORPORA = Path(os.environ.get("BPE_CORPORA_DIR") or ROOT / "corpora-data")


class Served:
    """The Makefile's gunicorn command in its own session, with its own database."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            "PORT": str(self.port),
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "BPE_UPLOAD_TMP_DIR": str(workdir / "uploads-tmp"),
            "BPE_MAX_UPLOAD_MB": "250",
            "BPE_JOBS_EXECUTION": "thread",
        }
        self.log = open(workdir / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = start_readme_server(env, stdout=self.log, stderr=self.log, own_session=True)
        try:
            wait_for_server(lambda: urllib.request.urlopen(self.base + "/", timeout=5).read(), 120)
        except AssertionError:
            raise SystemExit("the server did not start; see server.log") from None

    def worker_pids(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        return [int(pid) for pid in children.split()]

    def worker_pid(self) -> int:
        return self.worker_pids()[0]

    def cpu_seconds(self) -> float:
        """CPU time used so far by gunicorn and its workers (not by training children)."""
        total = 0
        for pid in [self.process.pid, *self.worker_pids()]:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        self.log.close()


def owner_token(base: str) -> str:
    """A fresh owner, as a script gets one; its token goes along as a bearer token."""
    _, reply, _ = request(base, "POST", "/api/owners", b"{}", "application/json")
    return str(json.loads(reply)["owner_token"])


def request(
    base: str,
    method: str,
    path: str,
    body: bytes | None = None,
    ctype: str = "",
    token: str = "",
):
    headers = {"Content-Type": ctype} if ctype else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=600) as response:
        return response.status, response.read(), response.url


def upload_file(base: str, path: Path, token: str) -> str:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    with open(path, "rb") as body:
        conn.request(
            "POST",
            f"/api/corpora?name={path.name}",
            body=body,
            headers={
                "Content-Type": "text/plain",
                "Content-Length": str(path.stat().st_size),
                "Authorization": f"Bearer {token}",
            },
        )
    response = conn.getresponse()
    reply = response.read()
    assert response.status in (200, 201), reply[:300]
    return json.loads(reply)["slug"]


def start_job(base: str, corpus: str, form: str, token: str) -> str:
    _, _, url = request(
        base,
        "POST",
        f"/c/{corpus}/train",
        form.encode(),
        "application/x-www-form-urlencoded",
        token,
    )
    return url


def job_status(job_url: str, token: str) -> str:
    req = urllib.request.Request(job_url + "/status", headers={"Authorization": f"Bearer {token}"})
    body = urllib.request.urlopen(req, timeout=60).read().decode()
    return body.split('data-status="', 1)[1].split('"', 1)[0]


def wait_status(job_url: str, token: str, wanted: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = job_status(job_url, token)
        if status in wanted:
            return status
        time.sleep(0.5)
    raise SystemExit(f"job {job_url} did not reach {wanted} in {timeout} s")


# ----- the load -----------------------------------------------------------------------------------
def client_process(
    base: str,
    requests: list[tuple[str, str, bytes | None]],
    threads: int,
    seconds: float,
    out,
    timeout: float = 60,
):
    """`threads` clients, each on its keep-alive connection, cycling through `requests`
    (method, path, JSON body or None) for `seconds`; puts (latencies, errors, wall, CPU)."""
    host, port = base.removeprefix("http://").split(":")
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.monotonic()

    def client(n: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        mine, bad = [], []
        i = n
        while time.monotonic() - start < seconds:
            method, path, body = requests[i % len(requests)]
            i += threads
            headers = {"Content-Type": "application/json"} if body is not None else {}
            t0 = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    bad.append(str(response.status))
            except (OSError, http.client.HTTPException) as exc:
                bad.append(type(exc).__name__)
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)
            errors.extend(bad)

    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((latencies, errors, time.monotonic() - start, time.process_time()))


def load(served: Served, slug: str, texts: list[bytes], *, clients: int, seconds: float) -> dict:
    base = served.base
    cpu_before = served.cpu_seconds()
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    procs = 4
    per = clients // procs
    path = f"/api/t/{slug}/encode"
    processes = [
        context.Process(
            target=client_process,
            args=(base, [("POST", path, text) for text in texts[i::procs]], per, seconds, out),
        )
        for i in range(procs)
    ]
    for p in processes:
        p.start()
    results = [out.get(timeout=seconds + 300) for _ in processes]
    for p in processes:
        p.join(60)
    server_cpu = served.cpu_seconds() - cpu_before
    latencies = sorted(x for r in results for x in r[0])
    errors = [e for r in results for e in r[1]]
    wall = max(r[2] for r in results)
    q = statistics.quantiles(latencies, n=100)
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "req_per_s": len(latencies) / wall,
        "p50_ms": q[49] * 1000,
        "p95_ms": q[94] * 1000,
        "p99_ms": q[98] * 1000,
        "max_ms": latencies[-1] * 1000,
        "server_cpu_ms_per_request": server_cpu * 1000 / len(latencies),
        # The clients share the machine: their CPU is part of what the 2 cores must give.
        "client_cpu_ms_per_request": sum(r[3] for r in results) * 1000 / len(latencies),
    }


def encode_texts(source: Path, n: int = 400) -> list[bytes]:
    raw = source.read_bytes()[: 4 * 1024 * 1024].decode("utf-8", "ignore")
    texts = []
    step = max(1, (len(raw) - 2048) // n)
    for i in range(n):
        piece = raw[i * step : i * step + 1400]
        data = piece.encode()[:1024].decode("utf-8", "ignore")  # 1 KiB (whole characters)
        texts.append(json.dumps({"text": data}).encode())
    return texts


# ----- memory -------------------------------------------------------------------------------------
def rss_kb(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def memory(served: Served, workdir: Path, tok_slug: str, token: str) -> dict:
    big = workdir / "corpus-190mb.txt"
    with open(big, "wb") as out:
        for name in (
            "english_large.txt",
            "english_large.txt",
            "english_large.txt",
            "chinese_modern.txt",
        ):
            out.write((CORPORA / name).read_bytes())
            out.write(f"\n{name}\n".encode())
    size = big.stat().st_size
    t0 = time.monotonic()
    slug = upload_file(served.base, big, token)
    upload_s = time.monotonic() - t0
    big.unlink()
    pids = served.worker_pids()  # views land on any worker: every one is measured
    urls = [
        f"/c/{slug}",
        f"/c/{slug}/evaluations",
        f"/c/{slug}/delete",  # the confirmation page
        f"/api/corpora/{slug}",
        "/",
        f"/api/t/{tok_slug}",
    ]
    for _ in range(2 * len(pids)):  # warm every worker: templates compiled, connections pooled
        for url in urls:
            request(served.base, "GET", url, token=token)
    for pid in pids:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = {pid: rss_kb(pid) for pid in pids}
    sampled = {pid: before[pid]["VmRSS"] for pid in pids}
    samples = 0
    errors: list[object] = []
    done = threading.Event()

    def sample() -> None:
        """The second method: VmRSS read every millisecond or so, its peak kept."""
        nonlocal samples
        while not done.is_set():
            for pid in pids:
                sampled[pid] = max(sampled[pid], rss_kb(pid)["VmRSS"])
            samples += 1
            time.sleep(0.001)

    def view(n: int) -> None:
        for _ in range(5):
            for url in urls:
                try:
                    status, _, _ = request(served.base, "GET", url, token=token)
                    if status != 200:
                        errors.append(status)
                except OSError as exc:
                    errors.append(type(exc).__name__)

    sampler = threading.Thread(target=sample)
    sampler.start()
    t0 = time.monotonic()
    threads = [threading.Thread(target=view, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    views_s = time.monotonic() - t0
    done.set()
    sampler.join()
    after = {pid: rss_kb(pid) for pid in pids}
    return {
        "corpus_bytes": size,
        "upload_seconds": upload_s,
        "workers": len(pids),
        "views": 8 * 5 * len(urls),
        "views_seconds": views_s,
        "rss_before_mb": max(b["VmRSS"] for b in before.values()) / 1024,
        # Method 1: the kernel's high-water mark of each worker, reset just before.
        "hwm_growth_mb": max(after[p]["VmHWM"] - before[p]["VmRSS"] for p in pids) / 1024,
        # Method 2: the highest VmRSS seen by sampling (may miss a peak shorter than a sample).
        "sampled_growth_mb": max(sampled[p] - before[p]["VmRSS"] for p in pids) / 1024,
        "samples": samples,
        "view_errors": len(errors),
    }


def load_part(served: Served, token: str, tok: str, texts: list[bytes], args) -> None:
    """The encode load while a job trains, then idle (the peer), side by side."""
    large = upload_file(served.base, CORPORA / "english_large.txt", token)
    busy = start_job(served.base, large, "mode=chunked&vocab_size=50000&trainer=efficient", token)
    wait_status(busy, token, {"running"}, timeout=300)
    print(f"load average before the loaded run: {os.getloadavg()}")
    training = load(served, tok, texts, clients=args.clients, seconds=args.seconds)
    still = job_status(busy, token)
    request(
        served.base,
        "POST",
        busy.removeprefix(served.base) + "/cancel",
        b"",
        "application/x-www-form-urlencoded",
        token,
    )
    wait_status(busy, token, {"cancelled", "failed", "succeeded"}, timeout=120)
    print(f"load average before the idle run: {os.getloadavg()}")
    idle = load(served, tok, texts, clients=args.clients, seconds=args.seconds)
    print(f"load average after the load runs: {os.getloadavg()}")
    for name, result in (("while training", training), ("idle (peer)", idle)):
        print(
            f"{name:>15}: {result['requests']:,} requests, {result['errors']} errors"
            f" {result['error_kinds']}, {result['req_per_s']:.0f} req/s,"
            f" p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms,"
            f" p99 {result['p99_ms']:.1f} ms, max {result['max_ms']:.0f} ms,"
            f" CPU per request: server {result['server_cpu_ms_per_request']:.2f} ms,"
            f" clients {result['client_cpu_ms_per_request']:.2f} ms"
        )
    print(f"job still running at the end of the loaded run: {still == 'running'}")
    print(
        f"ratio training/idle: p95 {training['p95_ms'] / idle['p95_ms']:.2f}x,"
        f" p99 {training['p99_ms'] / idle['p99_ms']:.2f}x,"
        f" req/s {training['req_per_s'] / idle['req_per_s']:.2f}x"
    )
    print(json.dumps({"training": training, "idle": idle}, indent=None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-load", action="store_true", help="the memory part alone")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="bpe-bench-") as folder:
        workdir = Path(folder)
        served = Served(workdir)
        print(f"gunicorn workers: {len(served.worker_pids())}")
        try:
            token = owner_token(served.base)
            small = upload_file(served.base, CORPORA / "english_small.txt", token)
            job = start_job(
                served.base, small, "mode=chunked&vocab_size=2000&trainer=efficient", token
            )
            wait_status(job, token, {"succeeded"}, timeout=1800)
            _, page, _ = request(served.base, "GET", job.removeprefix(served.base), token=token)
            tok = page.decode().split('href="/t/', 1)[1].split('"', 1)[0]
            texts = encode_texts(CORPORA / "english_small.txt")

            if not args.skip_load:
                load_part(served, token, tok, texts, args)
            if not args.skip_memory:
                mem = memory(served, workdir, tok, token)
                print(
                    f"memory: corpus {mem['corpus_bytes'] / 1e6:.0f} MB (uploaded in"
                    f" {mem['upload_seconds']:.0f} s); {mem['workers']} worker(s), RSS before"
                    f" {mem['rss_before_mb']:.0f} MB (largest); {mem['views']} views by 8"
                    f" concurrent viewers in {mem['views_seconds']:.1f} s; growth of the"
                    f" largest worker: peak RSS (VmHWM) +{mem['hwm_growth_mb']:.1f} MB, sampled"
                    f" RSS ({mem['samples']} samples) +{mem['sampled_growth_mb']:.1f} MB;"
                    f" errors {mem['view_errors']}"
                )
        finally:
            served.stop()


if __name__ == "__main__":
    main()
