"""A graph program lowered through the pipeline: `lower` (a clone of the module at the
llvm level, with the compile `Report`) and `ProgramLevels` (`CompiledModule.ir`: each
level lowered again on first use; `CompiledModule.export`: the C library of
`export_graph_module`). `dlc.api` compiles and caches what `lower` produces.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from xdsl.dialects.builtin import ModuleOp

from dlc import pipeline
from dlc.diagnostics import clone_located, error_at
from dlc.dialects.graph import FuncOp as GraphFuncOp
from dlc.dialects.graph_symbolic import is_symbolic
from dlc.dialects.graph_types import NATIVE_DTYPES
from dlc.externs import not_allowed_message
from dlc.runtime.convention import entry_checks
from dlc.runtime.fastcall import ARRAY_LAYOUT, FAST_CALLS
from dlc.runtime.jit import JITModule, llvm_ir

if TYPE_CHECKING:
    from dlc.aot import Exported


def defined_functions(module: ModuleOp) -> dict[str, GraphFuncOp]:
    """The functions with bodies of a graph module, by name."""
    return {
        f.sym_name.data: f
        for f in module.body.block.ops
        if isinstance(f, GraphFuncOp) and not f.is_declaration and f.body.blocks
    }


class Report(NamedTuple):
    """The compile report: loop-level facts per function, counts per pass, the arena a
    call context needs, and the functions that may run unboundedly long."""

    functions: dict[str, dict[str, int]]
    passes: dict[str, dict[str, int]]
    arena_bytes: int
    unbounded: list[str]


def lower(
    module: ModuleOp,
    options: pipeline.Options,
    snapshots: dict[str, ModuleOp] | None = None,
    externs: frozenset[str] | None = None,
    python_entries: bool = True,
    stop: str = "llvm",
    workers_ahead: bool = False,
) -> tuple[ModuleOp, Report]:
    """A clone of graph `module` lowered to the llvm level (with Python entries unless
    `python_entries` is False), and the compile report. `snapshots` receives a copy of
    each level as the pipeline leaves it (graph after the optimizer, tensor after
    fusion, ...). With `externs`, every C call of the loop level must name one of them
    (a located error otherwise). With `stop="loop"` the pipeline ends before
    lower-loop-to-llvm: the module returned is the loop level. `workers_ahead`: the
    llvm level will be compiled here (`JITModule`), so the LLVM workers of a large
    module start as its loop level is lowered (`jit_parts.start_ahead`)."""
    from dlc.analysis.loop_callgraph import arena_bytes_needed, unbounded_functions
    from dlc.analysis.walk import walk_ops
    from dlc.dialects import loop
    from dlc.passes.loop.plan_memory import function_stats
    from dlc.passes.statistics import PassStatistics
    from dlc.runtime.jit_parts import start_ahead

    stats: dict[str, dict[str, int]] = {}
    passes: dict[str, dict[str, int]] = {}
    arena = [0]
    unbounded: list[str] = []

    def after(step: pipeline.Step, _work: ModuleOp) -> None:
        if isinstance(step.pass_, PassStatistics):
            counts = passes.setdefault(step.pass_.name, {})
            for key, n in step.pass_.take_statistics().items():
                counts[key] = counts.get(key, 0) + n

    def on_level(level: str, work: ModuleOp) -> None:
        if level != "graph" and pipeline.verify_levels():
            work.verify()
        if snapshots is not None:
            snapshots[level] = clone_located(work)  # keeps block and value names
        if level == "loop":
            arena[0] = arena_bytes_needed(work)
            unbounded.extend(sorted(unbounded_functions(work)))
            if externs is not None:
                check_extern_calls(work, externs)
            for f in work.body.block.ops:
                if isinstance(f, loop.FuncOp):
                    stats[f.sym_name.data] = function_stats(f)
            if workers_ahead and stop != "loop":
                start_ahead(len(walk_ops(work)), options.opt_level, options.target)

    symbolic = is_symbolic(module)
    steps = pipeline.symbolic_steps(options) if symbolic else pipeline.steps(options)
    if stop == "loop":  # the last step lowers the loop level
        steps = steps[:-1]
    work = pipeline.run(clone_located(module), steps, after=after, on_level=on_level)
    if stop == "loop":
        on_level("loop", work)
        return work, Report(stats, passes, arena[0], unbounded)
    if python_entries and not symbolic:  # dlc.runtime.symbolic calls the functions itself
        add_entries(work, module)
    return work, Report(stats, passes, arena[0], unbounded)


def add_entries(llvm_level: ModuleOp, graph: ModuleOp) -> None:
    """The Python entries of the functions of `graph` added to its `llvm_level`."""
    from dlc.lowering.loop_to_llvm.python_entry import add_python_entries

    checks: dict[str, Sequence[tuple[tuple[int, ...], int]] | None] = {
        name: entry_checks(f) for name, f in defined_functions(graph).items()
    }
    add_python_entries(llvm_level, checks, ARRAY_LAYOUT, len(NATIVE_DTYPES), fast=FAST_CALLS)


def lower_loop_level(graph: ModuleOp, loop_level: ModuleOp, options: pipeline.Options) -> ModuleOp:
    """A clone of `loop_level` (what `lower(graph, options, stop="loop")` returns, or its
    snapshot) lowered as `lower(graph, options)` lowers it: the llvm level."""
    work = pipeline.run(clone_located(loop_level), [pipeline.loop_lowering_step(options)])
    if not is_symbolic(graph):
        add_entries(work, graph)
    return work


def check_extern_calls(loop_level: ModuleOp, externs: frozenset[str]) -> None:
    """Every `loop.extern_call` calls an allowed extern: the second line of defence
    behind `check_externs` (the graph-level check), before anything is linked."""
    from dlc.dialects import loop

    for op in loop_level.walk():
        if isinstance(op, loop.ExternCallOp) and op.callee.data not in externs:
            raise error_at(op, not_allowed_message(op.callee.data))


def export_graph_module(
    module: ModuleOp,
    path: str | os.PathLike[str],
    options: pipeline.Options,
    externs: frozenset[str],
    *,
    entries: Iterable[str] | None = None,
    **settings: Any,
) -> Exported:
    """Write graph `module` (verified, externs checked: `externs` are those it calls) as
    a C library `path` (`.so`, `.o` or `.a`) and its header (`dlc.aot`), compiled with
    `options` for the target of `settings` (`dlc.aot.make_request`: `prefix`,
    `header`, `target`, `target_cpu`, `cc`). Exports `entries` (default: all)."""
    from dlc import aot
    from dlc.passes.graph.autodiff.differentiate_tape import entry_points
    from dlc.passes.graph.differentiate import differentiated

    request = aot.make_request(path, opt_level=options.opt_level, externs=externs, **settings)
    module = differentiated(module)
    symbolic = is_symbolic(module)
    functions = aot.exported_functions(entry_points(module), entries, request.prefix, symbolic)
    options = aot.target_options(options, request)
    snapshots: dict[str, ModuleOp] | None = {} if symbolic else None
    llvm_level, report = lower(module, options, snapshots, externs, python_entries=False)
    formulas = None
    if snapshots is not None:  # the arena of a call: a formula of its sizes
        params = {f.name: len(f.params) for f in functions}
        formulas = aot.arena_formulas(snapshots["loop"], params, report.arena_bytes)
    return aot.write_library(llvm_level, functions, report.arena_bytes, request, formulas)


class ProgramLevels:
    """`CompiledModule.ir`: the program at each level, lowered again on first use (only
    down to the loop level until the llvm level is asked for); `CompiledModule.export`:
    the program as a C library."""

    def __init__(
        self, graph: ModuleOp, options: pipeline.Options, jit: JITModule, externs: frozenset[str]
    ) -> None:
        self.graph, self.options, self.jit, self.externs = graph, options, jit, externs
        self.snapshots: dict[str, ModuleOp] | None = None

    def export(self, path: str | os.PathLike[str], **settings: Any) -> Exported:
        """Export with this module's options; for this machine, for its CPU model."""
        if settings.get("target_cpu") is None and not settings.get("target"):
            settings["target_cpu"] = self.options.target_cpu
        return export_graph_module(self.graph, path, self.options, self.externs, **settings)

    def module(self, level: str) -> ModuleOp:
        snapshots = self.snapshots
        if snapshots is None:  # above llvm, no lower-loop-to-llvm
            snapshots = self.snapshots = {}
            if level == "llvm":
                snapshots["llvm"], _ = lower(self.graph, self.options, snapshots)
            else:
                lower(self.graph, self.options, snapshots, stop="loop")
        elif level == "llvm" and "llvm" not in snapshots:  # on from the loop level
            snapshots["llvm"] = lower_loop_level(self.graph, snapshots["loop"], self.options)
        if level not in snapshots:  # symbolic dimensions skip the tensor level
            raise ValueError(f"this module has no {level} level (symbolic dimensions)")
        return snapshots[level]

    def text(self, level: str) -> str:
        from dlc.parser import print_module

        if level == "llvm":
            if self.jit.optimized_ir is None:
                options = self.options
                self.jit.optimized_ir = llvm_ir(
                    self.module("llvm"), options.opt_level, options.target
                )
            return self.jit.optimized_ir
        if level == "graph":
            return print_module(self.module("graph"))
        return str(self.module(level))
