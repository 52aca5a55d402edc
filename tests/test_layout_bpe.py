"""The library's house layout, checked: the import graph of bpe/ has no cycle.

Every import statement counts, the ones inside functions too (a lazy import is still a
dependency, and a cycle through one only moves the failure to run time). The ones under
`if TYPE_CHECKING:` do not: they never run, and exist so that a module below the tokeniser
can name `Tokenizer` in an annotation without depending on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "bpe"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(LIBRARY.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, however deeply nested, except under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def dependencies(name: str, path: Path, known: set[str]) -> set[str]:
    """The bpe modules `name` imports. `from bpe import rank_rule` depends on `bpe.rank_rule`,
    not on the package's `__init__`. Importing `bpe.rules.base` runs `bpe.rules` first, so that
    package counts too, unless it is one of `name`'s own (a module of a package may import its
    siblings: the package has begun to run already)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
            continue
        base = node.module or ""
        if node.level:  # relative: from . import x, from .y import z
            anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{anchor}.{base}" if base else anchor
        if base not in known:
            continue
        submodules = {f"{base}.{alias.name}" for alias in node.names} & known
        # Names that are not submodules come from the module itself.
        if len(submodules) < len(node.names):
            found.add(base)
        found.update(submodules)
    own = {name.rsplit(".", depth)[0] for depth in range(name.count(".") + 1)}
    for module in list(found):
        parts = module.split(".")
        found.update(".".join(parts[:n]) for n in range(1, len(parts)))
    return (found & known) - own


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: dependencies(name, path, known) for name, path in found.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle is not None:
                return cycle
    return None


def test_the_graph_is_read_from_every_kind_of_import():
    graph = import_graph()
    assert "bpe.formats" in graph["bpe"]  # a top-level from-import
    assert "bpe.rank_rule" in graph["bpe.rules.tiktoken_ranks"]  # `from bpe import rank_rule`
    assert "bpe.efficient" in graph["bpe.training"]  # imported inside a function
    assert "bpe.model" not in graph["bpe.batch"]  # named under TYPE_CHECKING only
    assert "bpe.modes" in graph["bpe.rules.base"]  # the package runs before bpe.modes.base
    assert "bpe.modes" not in graph["bpe.modes.naive"]  # its own package


def test_a_cycle_is_found_where_there_is_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_library_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle in bpe/: " + " -> ".join(cycle or [])


# The tokeniser and what it calls on ask the mode and rule objects (`bpe.modes`, `bpe.rules`).
ASKS_THE_OBJECTS = ["model", "training", "stepwise", "tiktoken_path", "batch", "formats"]


def _names_a_mode_or_rule(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return name in ("mode", "rule")


def _is_text(node: ast.expr) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(map(_is_text, node.elts))
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def test_the_tokeniser_does_not_branch_on_mode_or_rule_names():
    found = []
    for name in ASKS_THE_OBJECTS:
        path = LIBRARY / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(map(_names_a_mode_or_rule, sides)) and any(map(_is_text, sides)):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "ask tok.mode_object / tok.rule_object instead:\n" + "\n".join(found)
