"""Which level a module is at: graph, tensor, loop or llvm.

A module is at the highest level any of its ops belongs to (a module in the middle of
a lowering can mix levels). dlc-opt uses this to choose the default output syntax and
which lowerings `-t llvm` / `-t asm` still have to run.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, UnregisteredOp

from dlc.diagnostics import error_at

LEVELS = ("graph", "tensor", "loop", "llvm")
"""From highest to lowest; `dlc.pipeline.LOWERINGS[level]` lowers a level to the next."""


def level_of(module: ModuleOp) -> str:
    """The highest level of any op in `module`; an empty dlc module is at the graph level."""
    dialects = {op.name.split(".", 1)[0] for op in module.walk() if op is not module}
    for level in LEVELS[:-1]:
        if level in dialects:
            return level
    if not dialects and "dlc.name" in module.attributes:
        return "graph"
    return "llvm"


def is_graph_level(module: ModuleOp) -> bool:
    return level_of(module) == "graph"


def check_llvm_level(module: ModuleOp) -> None:
    """A located error at the first op of an llvm-level module that LLVM IR translation
    cannot take (a nested module, an `arith` op in MLIR input, ...)."""
    for op in module.walk():
        if op is module or op.name.startswith("llvm."):
            continue
        name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
        raise error_at(op, f"not supported by the code generator yet: {name}")
