"""The shape of the house (ARCHITECTURE.md), checked: the floors drawn there match the import graph
(every import points down or level, every package and top-level module on exactly one floor), no
module imports one that imports it back (function-level imports included), the top level stays small,
no two modules share a name, the stored schema's keys live in one module, and test modules share code
only through tests/support."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "nova_search"
ARCHITECTURE = REPO / "ARCHITECTURE.md"
#: top-level modules that are entry points or the public surface, not concepts
ENTRY_MODULES = {"__init__", "__main__", "api"}
MAX_TOP_LEVEL_MODULES = 8


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


def floors(text: str) -> list[list[str]]:
    """The floors block of ARCHITECTURE.md, top first: per floor, the units on it (a package, a
    top-level module, or ``package.module`` for a module that sits lower than its package)."""
    m = re.search(r"^```floors\n(.*?)^```", text, flags=re.S | re.M)
    assert m, "ARCHITECTURE.md has no ```floors block"
    return [line.split("|", 1)[0].split() for line in m.group(1).splitlines() if line.strip()]


def unit_of(module: str, units: set[str]) -> str | None:
    """The unit a module belongs to: the longest listed name it is, or is inside of."""
    parts = module.split(".")[1:]  # without "nova_search"
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in units:
            return ".".join(parts[:n])
    return None


def downward_violations(graph: dict[str, set[str]], drawn: list[list[str]]) -> list[str]:
    """Imports that point up the floors (the top floor is 0)."""
    floor = {unit: i for i, units in enumerate(drawn) for unit in units}
    out = []
    for module, targets in sorted(graph.items()):
        here = unit_of(module, set(floor))
        for target in sorted(targets):
            there = unit_of(target, set(floor))
            if here and there and floor[here] > floor[there]:
                out.append(
                    f"{module} (floor {floor[here]}: {here}) imports {target} (floor {floor[there]}: {there})"
                )
    return out


def test_the_floor_checker_finds_an_import_that_points_up():
    graph = {"nova_search.a.x": {"nova_search.b"}, "nova_search.b": set(), "nova_search.a.low": set()}
    assert downward_violations(graph, [["a"], ["b"]]) == []
    assert len(downward_violations(graph, [["b"], ["a"]])) == 1
    # a module listed on its own floor is judged by its own floor, not its package's
    graph = {
        "nova_search.b": {"nova_search.a.low"},
        "nova_search.a.low": set(),
        "nova_search.a.x": {"nova_search.b"},
    }
    assert downward_violations(graph, [["a"], ["b"], ["a.low"]]) == []


def test_every_package_and_top_level_module_is_on_exactly_one_floor():
    drawn = floors(ARCHITECTURE.read_text())
    listed = [unit for units in drawn for unit in units]
    assert len(listed) == len(set(listed)), sorted({u for u in listed if listed.count(u) > 1})
    modules = _modules()
    for unit in listed:
        assert f"nova_search.{unit}" in modules, f"ARCHITECTURE.md names {unit}, which nova_search has not"
    top = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    top |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert top <= set(listed), f"on no floor: {sorted(top - set(listed))}"
    for unit in listed:  # a module named on a floor of its own: its package is on one too
        assert unit.partition(".")[0] in listed, unit


def test_every_import_points_down_the_floors():
    graph = import_graph()
    assert len(graph) > 50  # the graph was really read
    assert downward_violations(graph, floors(ARCHITECTURE.read_text())) == []


def test_the_top_level_stays_small():
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ENTRY_MODULES)
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def _is_migration(path: Path) -> bool:
    return "versions" in path.relative_to(PACKAGE).parts


def test_no_two_modules_share_a_name():
    seen: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.stem in ("__init__", "__main__") or _is_migration(path):
            continue
        seen.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


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
