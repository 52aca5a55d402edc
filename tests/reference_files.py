"""The reference tokenisers (GPT-2, cl100k_base, o200k_base) for the tests that need them.

They are not in the repository. `reference_dir()` returns a directory holding them: the one
named by BPE_REFERENCE_TOKENIZERS_DIR, else `reference-tokenizers/` in the checkout (gitignored),
built there on first use with ../shared/reference-tokenizers/make_reference_tokenizers.sh when
npm is installed (BPE_REFERENCE_SCRIPT overrides the script's path). Without them the calling
test skips with a message naming the script.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NAMES = ("gpt2", "cl100k_base", "o200k_base")
SCRIPT_NAME = "../shared/reference-tokenizers/make_reference_tokenizers.sh"
CORPORA_DIR = Path(os.environ.get("BPE_CORPORA_DIR", REPO / "corpora-data"))
CORPORA = ("english_small.txt", "english_large.txt", "chinese_modern.txt", "code.txt")


def _script() -> Path:
    return Path(os.environ.get("BPE_REFERENCE_SCRIPT", REPO / SCRIPT_NAME))


def _complete(directory: Path) -> bool:
    return all((directory / f"{name}.tiktoken.json").is_file() for name in NAMES)


@cache
def _build() -> tuple[Path | None, str]:
    directory = Path(os.environ.get("BPE_REFERENCE_TOKENIZERS_DIR", REPO / "reference-tokenizers"))
    if _complete(directory):
        return directory, ""
    script = _script()
    if shutil.which("npm") is None or not script.is_file():
        return None, (
            f"the reference tokenisers are missing from {directory}: build them with "
            f"{SCRIPT_NAME} {directory} (needs npm)"
        )
    result = subprocess.run(
        ["bash", str(script), str(directory)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0 or not _complete(directory):
        return None, f"{SCRIPT_NAME} failed: {result.stderr.strip()[-300:]}"
    return directory, ""


def reference_dir() -> Path:
    """The directory with NAME.tiktoken and NAME.tiktoken.json, or skip the test."""
    directory, why = _build()
    if directory is None:
        pytest.skip(why)
    return directory


def read_ranks(path: Path) -> dict[bytes, int]:
    """The rank file read independently of the code under test."""
    ranks = {}
    for line in path.read_bytes().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def corpus_samples(count: int, size: int, *, seed: int = 0) -> list[tuple[str, str]]:
    """(corpus name, text) samples at seeded offsets of every corpus present; skips if none."""
    import random

    rng = random.Random(seed)
    samples = []
    for name in CORPORA:
        path = CORPORA_DIR / name
        if not path.is_file():
            continue
        total = path.stat().st_size
        with path.open("rb") as f:
            for _ in range(count):
                f.seek(rng.randrange(max(total - size, 1)))
                samples.append((name, f.read(size).decode("utf-8", errors="ignore")))
    if not samples:
        pytest.skip(
            f"no corpora in {CORPORA_DIR}: build them with ../shared/corpora/make_corpora.sh"
        )
    return samples
