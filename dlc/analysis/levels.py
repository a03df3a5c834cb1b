"""Which level a module is at: graph, tensor, loop or llvm.

A module is at the highest level any of its ops belongs to (a module in the middle of
a lowering can mix levels). dlc-opt uses this to choose the default output syntax and
which lowerings `-t llvm` / `-t asm` still have to run, and every pass that works on one
level checks its input with `require_level` (a pass run at the wrong level would
otherwise find nothing it knows and silently do nothing, or drop what it does not know).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, UnregisteredOp

from dlc.analysis.walk import walk_ops
from dlc.diagnostics import DiagnosticError, error_at

LEVELS = ("graph", "tensor", "loop", "llvm")
"""From highest to lowest; `LOWERINGS[level]` lowers a level to the next."""

LOWERINGS = {
    "graph": "lower-graph-to-tensor",
    "tensor": "lower-tensor-to-loop",
    "loop": "lower-loop-to-llvm",
}
"""level -> the pass that lowers it to the next level of `LEVELS`."""


def level_of(module: ModuleOp) -> str:
    """The highest level of any op in `module`; an empty dlc module is at the graph level."""
    ops = walk_ops(module)[1:]
    kinds = {type(op) for op in ops}  # by class: `isinstance` per op is slow on xDSL's ABCs
    unregistered = {kind for kind in kinds if issubclass(kind, UnregisteredOp)}
    names = {op.name for op in ops if type(op) in unregistered} if unregistered else set()
    names.update(kind.name for kind in kinds if kind.name != "builtin.unregistered")
    dialects = {name.split(".", 1)[0] for name in names}
    for level in LEVELS[:-1]:
        if level in dialects:
            return level
    if not dialects and "dlc.name" in module.attributes:
        return "graph"
    return "llvm"


def is_graph_level(module: ModuleOp) -> bool:
    return level_of(module) == "graph"


def require_level(module: ModuleOp, level: str, pass_name: str) -> None:
    """Raise a `DiagnosticError` unless `module`, the input of pass `pass_name`, is at
    `level` (it may hold ops of lower levels, as a module in the middle of a lowering
    does; an empty module is at every level). Above `level`, the message names the
    lowerings to run first."""
    if module.body.block.first_op is None:
        return
    actual = level_of(module)
    if actual == level:
        return
    message = f"{pass_name}: expected a module at the {level} level, got the {actual} level"
    if LEVELS.index(actual) < LEVELS.index(level):
        missing = LEVELS[LEVELS.index(actual) : LEVELS.index(level)]
        message += f" (run {','.join(LOWERINGS[m] for m in missing)} first)"
    raise DiagnosticError(message)


def check_llvm_level(module: ModuleOp) -> None:
    """A located error at the first op of an llvm-level module that LLVM IR translation
    cannot take (a nested module, an `arith` op in MLIR input, ...)."""
    for op in module.walk():
        if op is module or op.name.startswith("llvm."):
            continue
        name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
        raise error_at(op, f"not supported by the code generator yet: {name}")
