"""The superoptimizer's final guard by timing whole functions (`costs=measured`).

Per-op costs (`measure.py`) price each product on its own, as one kernel on one thread.
What runs is different: the products of a function fuse with their element-wise
neighbours, read transposed operands, and run on the compile's threads, and prices
measured at different moments of a loaded machine compare badly, so a rewrite that
the per-op sum calls 3 % cheaper can run slower. Where it is cheap to do, the guard
therefore compiles the function as it was and as rewritten (each alone in a module, after the same constant folding opt_level 3
runs next) at opt_level 2, and times the two against each other in alternating
rounds on random inputs at the thread count the program will run with: the rewrite
stays only if it is at least the margin faster.

A function is timed when it has one block (no control flow whose trip counts random
inputs would set), calls no function, takes only floating-point tensors and scalars,
has at most `MAX_OPS` instructions and costs at most `MAX_NS` by the per-op prices
(beyond that its compile and timing would cost more than the search); otherwise, or
when the runtime cannot time it, the per-op prices decide. The timings are kept in the
cost table, keyed by a hash of the two modules and the thread count, so a later compile
of the same function on this host reuses them instead of compiling and timing again.
"""

from __future__ import annotations

import hashlib

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_types import TensorType
from dlc.parser import print_module
from dlc.passes.graph.fold_constants import WEIGHT_LIMIT, FoldConstantsPass
from dlc.passes.graph.superopt import measure

MAX_OPS = 200
MAX_NS = 50e6  # functions the per-op prices put above 50 ms are not timed
CALLS = ("graph.apply", "graph.apply_indirect")
FLOATS = ("f16", "f32", "f64")


def eligible(func: FuncOp) -> bool:
    """Whether the guard may time `func` (module docstring)."""
    if len(func.body.blocks) != 1:
        return False
    for t in func.function_type.inputs.data:
        if not isinstance(t, TensorType) or t.dt not in FLOATS:
            return False
    ops = list(func.body.block.ops)
    return len(ops) <= MAX_OPS and not any(op.name in CALLS for op in func.walk())


def alone(module: ModuleOp, func: FuncOp) -> ModuleOp:
    """A module of `func` (cloned) and whatever `module` holds besides functions, its
    constants folded as opt_level 3 folds them after the search."""
    others = [op.clone() for op in module.body.block.ops if not isinstance(op, FuncOp)]
    out = ModuleOp([*others, func.clone()])
    for name, attr in module.attributes.items():
        out.attributes[name] = attr
    FoldConstantsPass(max_elements=WEIGHT_LIMIT).apply(Context(), out)
    return out


def timing_key(modules: list[ModuleOp], context: str) -> str:
    """The cost-table key of a timing of `modules` in `context` (the thread count)."""
    digest = hashlib.sha256(context.encode())
    for m in modules:
        digest.update(b"\0" + print_module(m).encode())
    return digest.hexdigest()


def timed(
    module: ModuleOp,
    original: FuncOp,
    rewritten: FuncOp,
    estimate: float,
    table: measure.CostTable | None = None,
) -> tuple[float, float] | None:
    """Median nanoseconds of a call of `original` and of `rewritten` timed against each
    other (from `table` when it has them), or None when the guard does not time them
    (module docstring); `estimate` is the per-op price of `original` (ns)."""
    if estimate > MAX_NS or not eligible(original) or not eligible(rewritten):
        return None
    runtime = measure.installed()
    time_functions = getattr(runtime, "time_functions", None)
    if time_functions is None:
        return None
    modules = [alone(module, original), alone(module, rewritten)]
    context = getattr(runtime, "timing_context", lambda: "")()
    key = timing_key(modules, context)
    if table is not None and key in table.functions:
        return table.functions[key]
    times = time_functions(modules, original.sym_name.data)
    if times is None:
        return None
    if table is not None:
        table.record_function(key, (times[0], times[1]))
    return times[0], times[1]
