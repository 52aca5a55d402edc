"""The house layout, checked: SQL has owners, views do not query or import each other, and no
module of the web app grows past ~400 lines (STYLE.md, issue 9)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEBAPP = ROOT / "webapp"
VIEWS = WEBAPP / "views"
MAX_LINES = 400
# `session.scalar(...)`, `db.session().execute(...)`, `session.get(...)`: a query written here.
SESSION_QUERY = re.compile(
    r"session(?:\(\))?\s*\.\s*(execute|scalar|scalars|get|get_one|query)\s*\(", re.IGNORECASE
)


def view_modules() -> list[Path]:
    return sorted(p for p in VIEWS.glob("*.py") if p.name != "__init__.py")


def test_views_hold_no_sql():
    found = []
    for path in view_modules():
        source = path.read_text(encoding="utf-8")
        for number, line in enumerate(source.splitlines(), 1):
            if SESSION_QUERY.search(line):
                found.append(f"{path.name}:{number}: {line.strip()}")
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                found.append(f"{path.name}:{node.lineno}: imports {node.module}")
    assert not found, "queries belong in a store/query module:\n" + "\n".join(found)


def test_views_do_not_import_each_other():
    found = []
    for path in view_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(name.startswith("webapp.views.") for name in names):
                found.append(f"{path.name}:{node.lineno}")
    assert not found, "shared view code belongs in a module of its own: " + ", ".join(found)


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


def test_no_web_module_over_400_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted(WEBAPP.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these along their concerns (at most {MAX_LINES} lines): {long}"
