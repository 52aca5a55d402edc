"""Storage faults and crash leftovers: temp files of a killed server, a full disk, an unwritable
or corrupt database. Every one answers a clear status (507, 503, a one-line start-up error),
stores nothing half-way, and the app works again once the fault is gone."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap

from webapp import create_app
from webapp.uploads import normalize_stream


def _files(folder) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_start_up_removes_temp_files_of_a_killed_upload_but_not_of_a_live_one(app_config, tmp_path):
    tmp_dir = str(tmp_path / "uploads-tmp")
    app_config["UPLOAD_TMP_DIR"] = tmp_dir
    # A real upload in another process, killed with SIGKILL half-way through its body.
    script = textwrap.dedent(
        f"""
        import sys, time
        from webapp.uploads import normalize_stream

        class Slow:
            def read(self, size=-1):
                sys.stdout.write("reading\\n"); sys.stdout.flush()
                time.sleep(0.2)
                return b"some text " * 100

        normalize_stream(Slow(), limit=10**9, tmp_dir={tmp_dir!r})
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "reading\n"
        child.stdout.readline()  # a second chunk: the file exists and has bytes
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        child.kill()
    assert len(_files(tmp_dir)) == 1  # what a kill -9 leaves behind
    # An upload still running in this process holds its file; start-up must not take it.
    live = normalize_stream(io.BytesIO(b"still uploading"), limit=100, tmp_dir=tmp_dir)
    try:
        app = create_app(app_config, run_jobs=True)  # the serving process (webapp.wsgi)
        try:
            assert _files(tmp_dir) == [os.path.basename(live.path)]
        finally:
            app.extensions["bpe_jobs"].stop()
            app.extensions["bpe_db"].dispose()
    finally:
        live.discard()
    assert _files(tmp_dir) == []
