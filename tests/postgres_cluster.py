"""A PostgreSQL server of a test's own (Debian's binaries, a fresh data folder, its own port),
so the test can stop and restart it while the suite's shared server keeps running."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.waiting import free_port


def debian_bin() -> Path | None:
    """The newest Debian PostgreSQL's bin folder (/usr/lib/postgresql/N/bin), or None."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(root.glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    return versions[-1].parent if versions else None


class PostgresCluster:
    """initdb, pg_ctl start/stop, one database; as the `postgres` user when run as root
    (PostgreSQL refuses to run as root)."""

    def __init__(self, bin_dir: Path, database: str = "bpe_restart") -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.database = database
        # Not under pytest's tmp_path, which only root may enter.
        self.dir = Path(tempfile.mkdtemp(prefix="bpe-pg-"))
        self.data = self.dir / "data"
        self.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_owner:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", database)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [*self.as_owner, str(self.bin / program), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.dir,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        log = str(self.dir / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast` disconnects every client (a restart); `immediate` is a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # not running
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
