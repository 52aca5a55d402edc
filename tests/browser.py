"""What the real-browser tests share: Debian's Chromium driven by Playwright (installed by
scripts/install-browser.sh; Playwright's own browser download is not used), the app served from a
thread on a temporary SQLite database, and the `browser` fixture (a plugin of tests/conftest.py, so
every test module has it: one Chromium per module, launched one way).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * 127.0.0.1:9 , EXCLUDE localhost , EXCLUDE 127.0.0.1",
]

# every browser module's marks: CI runs them (BPE_TESTS_NO_SKIP turns the skip into a failure)
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed"),
]


def serve_app(tmp: Path, jobs_execution: str = "thread") -> Iterator[tuple[str, object]]:
    """Serve an app on a temporary database from a thread: yields (base url, app).

    `jobs_execution` "thread" runs submitted jobs in the server's runner; "manual" leaves them
    queued (for tests that store tokenisers themselves)."""
    from werkzeug.serving import make_server

    from webapp import create_app, stop_runners

    app = create_app(
        {
            "TESTING": True,
            "DATABASE_URL": f"sqlite:///{tmp / 'site.sqlite3'}",
            "UPLOAD_TMP_DIR": str(tmp / "uploads"),
            "JOBS_EXECUTION": jobs_execution,
            "JOBS_PROGRESS_INTERVAL": 0.1,
        },
        run_jobs=jobs_execution == "thread",
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", app
    server.shutdown()
    stop_runners(app)
    app.extensions["bpe_db"].dispose()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    playwright_api = pytest.importorskip("playwright.sync_api")
    tmp = tmp_path_factory.mktemp("chromium")
    # Chromium writes its profile and caches under these: keep them in the test's tmp
    saved = {k: os.environ.get(k) for k in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "TMPDIR")}
    for key in saved:
        os.environ[key] = str(tmp)
    try:
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            yield browser
            browser.close()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
