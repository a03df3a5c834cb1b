"""The import structure of `dlc/` (docs/design/architecture.md, "Import rules"): files import
downward only, no circle between packages or between modules of different packages, no
private name crosses a file.

Units are the packages of `dlc/` (`dialects`, `analysis`, `parser`, `semantics`,
`passes`, `lowering`, `runtime`, `cli`, ...) and its top-level modules (`api`, `pipeline`,
`diagnostics`, `target`, `dtypes`, `options`, `warm`, and `dlc` for the package's
`__init__`, the public API).
Every import counts, also those inside functions and under TYPE_CHECKING, and so does a
string that names a dlc module (`"dlc.passes.graph.cse:CSEPass"`: the pass registry imports
by name).
"""

from __future__ import annotations

import ast
import re
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

LEAVES = {"diagnostics", "dtypes", "llvm_c", "target", "version"}
"""Units that import no other unit of dlc (but `LEAF_IMPORTS`)."""

LEAF_IMPORTS = {("target", "llvm_c")}
"""Leaves importing another leaf: the host's CPU is LLVM's answer, asked without
importing llvmlite.binding (the warm start does not load it)."""

CIRCLES_INSIDE_PACKAGES: dict[frozenset[str], str] = {
    frozenset(
        {
            "lowering.graph_to_tensor.gathers",
            "lowering.graph_to_tensor.keys",
            "lowering.graph_to_tensor.memory",
            "lowering.graph_to_tensor.ops",
            "lowering.graph_to_tensor.windows",
        }
    ): "ops.py holds the rule table built from the family modules, which import its "
    "Rule, UnsupportedOp and combinator_name; keys and memory lower nested keys of each other",
    frozenset({"semantics.handlers", "semantics.interpreter", "semantics.memory"}): (
        "the interpreter dispatches to the handlers, which are handed the interpreter "
        "(imported for the annotation only, under TYPE_CHECKING)"
    ),
    frozenset(
        {
            "passes.graph.autodiff.differentiate_replay",
            "passes.graph.autodiff.differentiate_sweep",
            "passes.graph.autodiff.differentiate_tape",
            "passes.graph.autodiff.differentiator",
        }
    ): (
        "the sweep and the tapes are handed the (Function)Differentiator, the replay the "
        "tape's Layout (annotations only, TYPE_CHECKING)"
    ),
    frozenset({"lowering.loop_to_llvm.func_emitter", "lowering.loop_to_llvm.memory"}): (
        "the memory lowerings are handed the FuncEmitter (annotation only, TYPE_CHECKING)"
    ),
    frozenset({"runtime.jit", "runtime.jit_parts", "runtime.jit_worker"}): (
        "jit compiles a large module in parts (jit_parts), whose worker processes (jit_worker, "
        "started by name) build each part with jit's target machine and build_object"
    ),
    frozenset({"tuner.features", "tuner.space"}): (
        "features read space's NestInfo; the space ranks its candidates by their features"
    ),
}
"""Module circles left inside one package (the modules, without `dlc.`), each with the
reason it stays; a circle that is not listed here, or a listed one that no longer
exists, fails `test_module_circles_stay_inside_a_package_and_are_listed`."""

_MODULE_STRING = re.compile(r"dlc(\.[a-z_0-9]+)+(:\w+)?")


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
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = node.value.partition(":")[0]
                if _MODULE_STRING.fullmatch(node.value) and _path_of(named) is not None:
                    found.append((module, named, "", node.lineno))
    return found


def _path_of(module: str) -> Path | None:
    """The file of a dlc module, None when there is none."""
    base = DLC.parent.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _module_graph() -> dict[str, set[str]]:
    """Module -> the dlc modules it imports (`from pkg import mod` imports `pkg.mod`)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported, name, _ in _imports():
        target = f"{imported}.{name}" if name and _path_of(f"{imported}.{name}") else imported
        if target != importer:
            graph[importer].add(target)
    return graph


def _package(module: str) -> str:
    """The package a module belongs to; a top-level module of dlc is a unit of its own."""
    parts = module.split(".")
    path = _path_of(module)
    if len(parts) == 2 or (path is not None and path.name == "__init__.py"):
        return module
    return ".".join(parts[:-1])


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph.get(root, ()))))]
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
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
        leaf = pair[0] in LEAVES and pair[0] != pair[1] and pair not in LEAF_IMPORTS
        if pair in FORBIDDEN or leaf:
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


def test_no_import_circle_between_modules_of_different_packages() -> None:
    bad = [
        " <-> ".join(sorted(c))
        for c in _circles(_module_graph())
        if len({_package(m) for m in c}) > 1
    ]
    assert not bad, "\n".join(bad)


def test_module_circles_stay_inside_a_package_and_are_listed() -> None:
    found = {
        frozenset(m.removeprefix("dlc.") for m in c)
        for c in _circles(_module_graph())
        if len({_package(m) for m in c}) == 1
    }
    unlisted = [" <-> ".join(sorted(c)) for c in found - CIRCLES_INSIDE_PACKAGES.keys()]
    gone = [" <-> ".join(sorted(c)) for c in CIRCLES_INSIDE_PACKAGES.keys() - found]
    assert not unlisted, "circles without a reason in CIRCLES_INSIDE_PACKAGES:\n" + "\n".join(
        unlisted
    )
    assert not gone, "listed circles that no longer exist:\n" + "\n".join(gone)


def test_the_circle_finder_sees_circles() -> None:
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": {"d2"}, "d2": {"d"}, "e": {"a"}}
    assert sorted(map(sorted, _circles(graph))) == [["a", "b", "c"], ["d", "d2"]]
    assert _package("dlc.api") == "dlc.api" and _package("dlc.passes") == "dlc.passes"
    assert _package("dlc.passes.graph.cse") == "dlc.passes.graph"
    assert "dlc.passes.graph.cse" in _module_graph()["dlc.pipeline"]


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
    assert graph["runtime"] <= {"dialects", "diagnostics", "dtypes", "llvm_c", "target"}
