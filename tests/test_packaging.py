"""What pyproject.toml promises: the library needs `regex` alone, every import is declared."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# Our own top-level packages; everything else imported must be stdlib or declared.
OWN = {"bpe", "webapp", "tests", "benchmarks"}  # benchmarks: a folder of scripts, imported by path


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(requirements: list[str]) -> set[str]:
    return {_normalise(re.match(r"[A-Za-z0-9._-]+", req).group(0)) for req in requirements}


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _undeclared(folders: list[str], declared: set[str]) -> dict[str, str]:
    """Imports in these folders that neither the stdlib, the project nor `declared` provide."""
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            siblings = {p.stem for p in path.parent.glob("*.py")}
            for name in _top_level_imports(path):
                if name in sys.stdlib_module_names or name in OWN or name in siblings:
                    continue
                provided_by = {_normalise(d) for d in distributions.get(name, [])}
                if not provided_by & declared:
                    missing[name] = str(path.relative_to(ROOT))
    return missing


def test_the_library_declares_regex_alone():
    assert _requirement_names(PYPROJECT["project"]["dependencies"]) == {"regex"}


def test_the_library_imports_nothing_but_regex_and_the_stdlib():
    # Import every module of the library in a fresh interpreter, then see what came with it.
    modules = sorted(p.stem for p in (ROOT / "bpe").glob("*.py") if p.stem != "__main__")
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module('bpe.' + name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    foreign = set(json.loads(out)) - set(sys.stdlib_module_names) - {"bpe", "regex"}
    # Interpreter internals that are not in stdlib_module_names (e.g. `_distutils_hack`).
    foreign = {name for name in foreign if not name.startswith("_")}
    assert foreign == set()
    # Lazily, inside a function, export_tiktoken builds a `tiktoken.Encoding`: an optional peer;
    # bpe.chat_template imports Jinja2 when a chat template is rendered: the `chat` extra.
    extras = PYPROJECT["project"]["optional-dependencies"]
    optional = _requirement_names(extras["peers"]) | _requirement_names(extras["chat"])
    assert (
        _undeclared(["bpe"], _requirement_names(PYPROJECT["project"]["dependencies"]) | optional)
        == {}
    )


def test_every_import_of_the_app_and_its_tools_is_declared():
    extras = PYPROJECT["project"]["optional-dependencies"]
    base = _requirement_names(PYPROJECT["project"]["dependencies"])
    # The PostgreSQL driver is the postgres extra's; the app imports it only under a guard.
    web = base | _requirement_names(extras["web"]) | _requirement_names(extras["postgres"])
    assert _undeclared(["webapp", "migrations"], web) == {}
    everything = set().union(base, *(_requirement_names(reqs) for reqs in extras.values()))
    assert _undeclared(["tests", "benchmarks"], everything) == {}


def test_the_lock_pins_every_declared_package_with_hashes():
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    pinned = {_normalise(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9._-]+)==", lock, re.M)}
    declared = set().union(
        _requirement_names(PYPROJECT["project"]["dependencies"]),
        *(
            _requirement_names(reqs)
            for reqs in PYPROJECT["project"]["optional-dependencies"].values()
        ),
    )
    assert declared - pinned == set()
    entries = re.split(r"\n(?=[A-Za-z0-9])", lock.split("\n", 2)[2])
    assert all("--hash=sha256:" in entry for entry in entries if entry.strip())
