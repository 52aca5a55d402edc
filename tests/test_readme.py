"""The README's and docs/library.md's library and command-line examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LIBRARY = ROOT / "docs" / "library.md"
CORPUS = "The quick brown fox jumps over the lazy dog. " * 400 + "Hello, world!\n"


def code_block(heading: str, language: str, page: Path = LIBRARY) -> str:
    text = page.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    match = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert match, f"no {language} block under {heading!r} in {page.name}"
    return match.group(1)


@pytest.mark.parametrize(
    ("page", "heading"),
    [(README, "## The `bpe` library in brief"), (LIBRARY, "## The `bpe` library")],
    ids=["README", "docs/library.md"],
)
def test_library_example_runs(tmp_path, monkeypatch, page, heading):
    (tmp_path / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    example = compile(code_block(heading, "python", page), page.name, "exec")
    exec(example, {})  # noqa: S102 - running our own documented example is the point
    assert (tmp_path / "tok.json").exists()


def test_command_line_examples_run(tmp_path):
    for name in ("corpus.txt", "doc1.txt", "doc2.txt"):
        (tmp_path / name).write_text(CORPUS, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for line in code_block("## The `bpe` command line", "sh").splitlines():
        command, _, comment = line.partition("  #")
        command = command.strip()
        if not command:
            continue
        result = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert result.returncode == 0, f"{command}: {result.stderr}"
        # "# prints X" in the docs is a promise about what the user sees.
        promised = re.search(r"prints (.+)$", comment)
        if promised:
            assert result.stdout == promised.group(1) + "\n", command
    assert (tmp_path / "tokenizer.json").exists() and (tmp_path / "tok.tiktoken").exists()
