"""The shape of the house (ARCHITECTURE.md), checked: no module imports one that imports it back
(function-level imports included), no module grows past 500 lines, the stored schema's keys live in
one module, and test modules share code only through tests/support."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "nova_search"
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` refers to: itself, or the nearest package above it that exists."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the nova_search modules it imports, anywhere in its body."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                    for a in node.names
                ]
            for target in targets:
                owner = _owner(target, modules) if target.startswith("nova_search") else None
                if owner and owner != module:
                    graph[module].add(owner)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back():
    graph = import_graph()
    assert len(graph) > 50 and graph["nova_search.worker.loop"]  # the graph was really read
    assert cycles(graph) == []


def test_the_worker_loop_does_not_depend_on_presentation():
    graph = import_graph()
    for module in ("nova_search.worker.loop", "nova_search.trial.run", "nova_search.search.lifecycle"):
        assert not {m for m in graph[module] if m.startswith(("nova_search.report", "nova_search.cli"))}, (
            module
        )


def test_no_module_is_over_500_lines():
    sizes = {m: len(p.read_text().splitlines()) for m, p in _modules().items()}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}


def test_the_stored_keys_are_written_only_in_the_schema_module():
    offenders = [
        f"{path.relative_to(REPO)}:{i}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "schema.py"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if '"nova:' in line or "'nova:" in line
    ]
    assert offenders == []


def test_test_modules_share_code_only_through_tests_support():
    pattern = re.compile(r"^\s*(from|import)\s+tests\.(unit|integration)\b", re.M)
    offenders = [
        str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py") if pattern.search(p.read_text())
    ]
    assert offenders == []
