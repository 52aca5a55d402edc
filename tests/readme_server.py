"""The README's server as the tests start it: the Makefile's own gunicorn line (so a test runs
what `make run` runs), with this venv's binaries and the caller's environment on top."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def makefile_server_line() -> str:
    """The Makefile's gunicorn command, as written there (`$(BIN)/gunicorn ...`)."""
    makefile = (ROOT / "Makefile").read_text()
    return next(line.strip() for line in makefile.splitlines() if "/gunicorn " in line)


def start_readme_server(env: dict[str, str], *, stdout, stderr, own_session: bool = False):
    """Popen of that command in the checkout, with `env` over os.environ. `own_session` puts it
    in a process group of its own, so one killpg reaches the master, workers and children."""
    return subprocess.Popen(
        ["bash", "-c", "exec " + makefile_server_line().replace("$(BIN)", str(BIN))],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=stdout,
        stderr=stderr,
        start_new_session=own_session,
    )
