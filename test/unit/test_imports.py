"""The import structure of `dlc/` (docs/design/architecture.md, "Import rules"): files import
downward only, no circle between packages, no private name crosses a file.

Units are the packages of `dlc/` (`dialects`, `analysis`, `parser`, `semantics`,
`passes`, `lowering`, `runtime`, `cli`, ...) and its top-level modules (`api`, `pipeline`,
`diagnostics`, `target`, `dtypes`, `options`, `warm`, and `dlc` for the package's
`__init__`, the public API).
Every import counts, also those inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

DLC = Path(__file__).resolve().parents[2] / "dlc"

FORBIDDEN = {
    ("passes", "runtime"),
    ("lowering", "runtime"),
    ("lowering", "passes"),
    ("passes", "lowering"),
    ("runtime", "passes"),
    ("runtime", "lowering"),
    ("runtime", "pipeline"),
    ("runtime", "parser"),
    ("dialects", "passes"),
    ("dialects", "lowering"),
    ("dialects", "semantics"),
    ("dialects", "analysis"),
    ("analysis", "passes"),
    ("analysis", "lowering"),
    ("analysis", "runtime"),
    ("analysis", "semantics"),
    ("analysis", "parser"),
    ("analysis", "pipeline"),
    ("semantics", "passes"),
    ("semantics", "lowering"),
    ("semantics", "runtime"),
}
"""(importer, imported) unit pairs that break the layering (on top of: no circles)."""

LEAVES = {"diagnostics", "dtypes", "target", "version"}
"""Units that import no other unit of dlc."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(DLC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "dlc"


def _imports() -> list[tuple[str, str, str, int]]:
    """(importing module, imported module, imported name, line) for every dlc import."""
    found = []
    for path in sorted(DLC.rglob("*.py")):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dlc"):
                found.extend((module, node.module, a.name, node.lineno) for a in node.names)
            elif isinstance(node, ast.Import):
                found.extend(
                    (module, a.name, "", node.lineno)
                    for a in node.names
                    if a.name.startswith("dlc")
                )
    return found


def _unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported, name, _ in _imports():
        target = f"{imported}.{name}" if name and _unit(imported) == "dlc" else imported
        a, b = _unit(importer), _unit(target)
        if a != b:
            graph[a].add(b)
    return graph


def test_no_forbidden_imports() -> None:
    bad = []
    for importer, imported, name, line in _imports():
        target = f"{imported}.{name}" if name and _unit(imported) == "dlc" else imported
        pair = (_unit(importer), _unit(target))
        if pair in FORBIDDEN or (pair[0] in LEAVES and pair[0] != pair[1]):
            bad.append(f"{importer}:{line} imports {target} ({pair[0]} -> {pair[1]})")
    assert not bad, "\n".join(bad)


def test_only_the_cli_imports_the_public_api_package() -> None:
    """`dlc/__init__.py` is the API facade: the compiler below it never imports it."""
    bad = [
        f"{importer}:{line} imports dlc.{name}"
        for importer, imported, name, line in _imports()
        if imported == "dlc"
        and _unit(importer) not in ("dlc", "cli")
        and not (DLC / name).exists()
        and not (DLC / f"{name}.py").exists()
    ]
    assert not bad, "\n".join(bad)


def test_no_import_circle_between_units() -> None:
    graph = _unit_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(unit: str, path: list[str]) -> None:
        state[unit] = 1
        for nxt in sorted(graph.get(unit, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[unit] = 2

    for unit in sorted(graph):
        if unit not in state:
            visit(unit, [unit])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_name_is_imported_from_another_file() -> None:
    bad = [
        f"{importer}:{line} imports {name} from {imported}"
        for importer, imported, name, line in _imports()
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not bad, "\n".join(bad)


def test_the_checks_see_the_layering() -> None:
    """The walker finds the real structure (so the tests above cannot pass vacuously)."""
    graph = _unit_graph()
    assert {"dialects", "analysis", "diagnostics"} <= graph["passes"]
    assert "dialects" in graph["analysis"] and "analysis" in graph["lowering"]
    assert "pipeline" in graph["api"] and "runtime" in graph["api"]
    assert graph["runtime"] <= {"dialects", "diagnostics", "dtypes", "target"}
