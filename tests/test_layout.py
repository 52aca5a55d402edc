"""The house layout, checked (docs/internals.md draws it): the web app's packages import only
the packages below them, no two modules import each other (directly or round a loop, imports
inside functions included), blueprints hold no SQL and import no other blueprint, and template
globals do not query."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEBAPP = ROOT / "webapp"
BLUEPRINTS = WEBAPP / "blueprints"
# Lowest first: a module may import its own package and the packages of the layers before it.
# The last layer is the app itself: the factory (`webapp/__init__.py`) and the entry points.
LAYERS: list[tuple[str, ...]] = [
    ("webapp.refusals", "webapp.config", "webapp.logs"),
    ("webapp.storage",),
    ("webapp.jobs",),
    ("webapp.rendering",),
    ("webapp.content",),
    ("webapp.plumbing",),
    ("webapp.blueprints",),
    (
        "webapp",
        "webapp.wsgi",
        "webapp.celery_app",
        "webapp.gunicorn_conf",
        "webapp.gunicorn_worker",
    ),
]
# What every blueprint may share: page lookups and contexts that several of them render.
SHARED_BY_BLUEPRINTS = "webapp.blueprints.pages"
# `session.scalar(...)`, `db.session().execute(...)`, `session.get(...)`: a query written here.
SESSION_QUERY = re.compile(
    r"session(?:\(\))?\s*\.\s*(execute|scalar|scalars|get|get_one|query)\s*\(", re.IGNORECASE
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imported_modules(path: Path, prefix: str) -> list[tuple[int, str]]:
    """Every module under `prefix` that `path` imports, anywhere in it: `from a import b`
    counts as `a.b` when b is a module, else as `a`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module != prefix and not module.startswith(prefix + "."):
                continue
            for alias in node.names:
                full = f"{module}.{alias.name}"
                found.append((node.lineno, full if is_module(full) else module))
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name)
                for a in node.names
                if a.name == prefix or a.name.startswith(prefix + ".")
            ]
    return found


def layer_of(module: str, layers: list[tuple[str, ...]] = LAYERS) -> int:
    """The layer of the longest package name that contains the module."""
    best, length = -1, -1
    for index, names in enumerate(layers):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > length:
                best, length = index, len(name)
    assert best >= 0, f"{module} is in no layer of tests/test_layout.py"
    return best


def arrows_against_layers(layers: list[tuple[str, ...]]) -> list[str]:
    found = []
    for path in sorted(WEBAPP.rglob("*.py")):
        me = module_name(path)
        for line, target in imported_modules(path, "webapp"):
            if layer_of(target, layers) > layer_of(me, layers):
                found.append(f"{path.relative_to(ROOT)}:{line}: {me} imports {target}")
    return found


def import_cycles(package: str) -> list[list[str]]:
    """The strongly connected groups of more than one module in `package`'s import graph
    (Tarjan's algorithm); a package's `__init__` importing its own modules is not a loop back
    to them unless they import the package itself."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        me = module_name(path)
        graph[me] = {t for _, t in imported_modules(path, package) if t != me and is_module(t)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_every_module_is_in_a_layer():
    for path in WEBAPP.rglob("*.py"):
        layer_of(module_name(path))


def test_packages_import_only_the_layers_below():
    found = arrows_against_layers(LAYERS)
    assert not found, "an import against the layers (docs/internals.md):\n" + "\n".join(found)


def test_the_layer_check_sees_an_arrow_upwards():
    # With storage above the blueprints, every blueprint's import of storage points upwards.
    upside_down = [LAYERS[0], *LAYERS[2:7], LAYERS[1], LAYERS[7]]
    assert any("webapp.blueprints" in line for line in arrows_against_layers(upside_down))


def test_no_import_cycles():
    cycles = import_cycles("webapp")
    assert not cycles, f"modules that import each other: {cycles}"


def test_every_package_says_what_lives_there_and_what_it_may_import():
    for init in sorted(WEBAPP.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "May import" in doc, f"{init.relative_to(ROOT)} lacks 'May import: ...'"


def blueprint_modules() -> list[Path]:
    return sorted(p for p in BLUEPRINTS.glob("*.py") if p.name != "__init__.py")


def test_blueprints_hold_no_sql():
    found = []
    for path in blueprint_modules():
        source = path.read_text(encoding="utf-8")
        for number, line in enumerate(source.splitlines(), 1):
            if SESSION_QUERY.search(line):
                found.append(f"{path.name}:{number}: {line.strip()}")
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                found.append(f"{path.name}:{node.lineno}: imports {node.module}")
    assert not found, "queries belong in a webapp.storage module:\n" + "\n".join(found)


def test_blueprints_do_not_import_each_other():
    found = []
    for path in blueprint_modules():
        for line, target in imported_modules(path, "webapp.blueprints"):
            if target not in ("webapp.blueprints", SHARED_BY_BLUEPRINTS):
                found.append(f"{path.name}:{line} imports {target}")
    assert not found, "shared blueprint code belongs in webapp/blueprints/pages.py: " + ", ".join(
        found
    )


def test_template_globals_do_not_query():
    found = []
    for path in sorted(WEBAPP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            decorators = [ast.unparse(d) for d in node.decorator_list]
            if any("template_global" in d for d in decorators) and "session" in ast.unparse(node):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not found, "templates get their data from the view: " + ", ".join(found)
