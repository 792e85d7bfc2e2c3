"""app/core's modules import each other without a loop: the model below the algorithms, the compiled core's
validity check (app/core/extension.py) below the model, its solve adapter (app/core/native.py) above the
algorithms. Every import statement counts, those inside functions and those for type checking too."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[3] / "app" / "core"


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, package: str) -> set[str]:
    """The app.core modules a module's import statements name (`from app.core import native` names
    app.core.native; `from app.core.model import Problem`, app.core.model)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = package.split(".")
            base = ".".join([*parts[: len(parts) - node.level + 1], node.module]) if node.level else node.module
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in CORE.rglob("*.py")}
    edges = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges[name] = {other for other in imported(ast.parse(path.read_text()), package) if other in paths} - {name}
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import loop, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for other in sorted(edges[module]):
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state and (found := visit(other)):
                return found
        state[module] = 2
        path.pop()
        return None

    for module in sorted(edges):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_import_graph_of_app_core_has_no_cycle() -> None:
    edges = graph()
    assert "app.core.model" in edges and "app.core.model" in edges["app.core.algorithm"]  # the graph is read
    assert cycle(edges) is None, " → ".join(cycle(edges) or [])


def test_the_cycle_finder_finds_one() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
