"""A BPE Workbench server in its own process for the web benchmarks (not a benchmark itself).

The server runs in a separate process so the measuring client never shares its GIL.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
import urllib.request


def _serve(database_url: str, tmp_dir: str, port_queue, burn: dict | None) -> None:
    import logging

    from werkzeug.serving import make_server

    from webapp import create_app

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request

    app = create_app(
        {
            "DATABASE_URL": database_url,
            "UPLOAD_TMP_DIR": tmp_dir,
            "JOBS_EXECUTION": "thread",
            "SECRET_KEY": "bench",
        },
        run_jobs=True,  # this process runs the jobs, as the README's server does
    )
    if burn is not None:  # the peer: training in a thread of the web process itself
        import threading

        import bpe

        threading.Thread(target=lambda: bpe.train(**burn), daemon=True).start()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    port_queue.put(server.server_port)
    server.serve_forever()


class Server:
    def __init__(self, workdir: str, *, burn: dict | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        url = f"sqlite:///{os.path.join(workdir, 'bench.sqlite3')}"
        self.process = context.Process(
            target=_serve, args=(url, os.path.join(workdir, "tmp"), queue, burn)
        )  # not a daemon: the app's job runner starts child processes of its own
        self.process.start()
        self.base = f"http://127.0.0.1:{queue.get(timeout=60)}"

    def memory_kb(self) -> dict[str, int]:
        """VmRSS and VmHWM (peak RSS) of the server process, in kB."""
        values = {}
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values[key] = int(rest.split()[0])
        return values

    def reset_peak(self) -> None:
        """Start VmHWM over from the current RSS (Linux: write 5 to clear_refs)."""
        with open(f"/proc/{self.process.pid}/clear_refs", "w") as handle:
            handle.write("5")

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(10)


def random_words(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzéü"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 10))) for _ in range(20000)]
    lines, line = [], []
    for _ in range(n):
        line.append(rng.choice(vocab))
        if len(line) >= 12:
            lines.append(" ".join(line))
            line = []
    return "\n".join(lines) + "\n"


def get(url: str) -> float:
    """Seconds for one GET, body read."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
    return time.perf_counter() - started


def owner_headers(base: str) -> dict[str, str]:
    """A fresh owner's bearer token as headers: how a script proves who it is (no CSRF token
    then), so its uploads, trainings and job pages are its own."""
    request = urllib.request.Request(
        f"{base}/api/owners", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        token = json.load(response)["owner_token"]
    return {"Authorization": f"Bearer {token}"}
