"""The runtime's modules import one another without a circle (issue 31: the controller's parts once imported each
other in one), and no class in it grows past ``MAX_CLASS_LINES``. Imports under ``if TYPE_CHECKING:`` are not
executed and are left out: a per-mode handler names the ``Controller`` it acts through for the type checker only."""

from __future__ import annotations

import ast
from pathlib import Path

import deploy.runtime

PACKAGE = "deploy.runtime"
RUNTIME = Path(deploy.runtime.__file__).parent
MAX_CLASS_LINES = 250  # a class longer than this does several jobs: split it into parts that own their state


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> set[str]:
    """Modules of this package that ``tree`` imports when it runs (any depth, TYPE_CHECKING blocks left out)."""
    found: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE + "."):
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.module == PACKAGE:
            found.update(f"{PACKAGE}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(PACKAGE + "."))
        stack.extend(ast.iter_child_nodes(node))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {f"{PACKAGE}.{path.stem}": path for path in sorted(RUNTIME.glob("*.py")) if path.stem != "__init__"}
    return {name: _imports(ast.parse(path.read_text())) & modules.keys() for name, path in modules.items()}


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules, the first repeated at the end), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state and (found := visit(imported)):
                return found
        path.pop()
        state[module] = 2
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_the_circle_finder_finds_a_circle():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    assert _imports(ast.parse("if TYPE_CHECKING:\n    from deploy.runtime.loop import X\n")) == set()
    assert _imports(ast.parse("def f():\n    from deploy.runtime import loop\n")) == {"deploy.runtime.loop"}


def test_the_runtime_modules_import_no_circle():
    graph = _graph()
    assert len(graph) > 30 and "deploy.runtime.state_check" in graph["deploy.runtime.loop"]  # it reads the files
    assert _circle(graph) == []


def test_no_runtime_class_is_longer_than_the_limit():
    long = []
    for path in sorted(RUNTIME.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:  # type: ignore[operator]
                long.append(f"{path.name}:{node.name} {node.end_lineno - node.lineno + 1} lines")  # type: ignore[operator]
    assert long == []
