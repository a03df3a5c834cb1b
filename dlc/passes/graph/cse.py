"""`cse`: common subexpression elimination across blocks, by dominance."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.dialects.cfg import dominator_tree, successors
from dlc.dialects.graph import FuncOp, LiteralOp
from dlc.passes.graph.pass_support import functions, is_pure, pure_functions
from dlc.passes.statistics import PassStatistics

COMMUTATIVE = {
    "graph.add",
    "graph.multiply",
    "graph.min",
    "graph.max",
    "graph.and",
    "graph.or",
    "graph.equal",
    "graph.notEqual",
}


def op_key(op: Operation) -> Hashable:
    """Structural identity: name, operands (sorted when commutative), properties, types."""
    operands = tuple(id(v) for v in op.operands)
    if op.name in COMMUTATIVE:
        operands = tuple(sorted(operands))
    props = tuple(sorted(op.properties.items()))
    return (op.name, operands, props, tuple(r.type for r in op.results))


def eliminate(func: FuncOp, pure: set[str]) -> int:
    """Replace each pure op by an equal op that dominates it; return how many."""
    assert func.entry is not None
    children = dominator_tree(func.entry, successors)
    available: dict[Hashable, Operation] = {}
    removed = 0
    stack: list[tuple[Block, list[Hashable] | None]] = [(func.entry, None)]
    while stack:
        block, added = stack.pop()
        if added is not None:  # leaving `block`: its ops stop being available
            for key in added:
                del available[key]
            continue
        added = []
        for op in list(block.ops):
            if not is_pure(op, pure) or not op.results or isinstance(op, LiteralOp) and op.inline:
                continue
            key = op_key(op)
            twin = available.get(key)
            if twin is None:
                available[key] = op
                added.append(key)
                continue
            for old, new in zip(op.results, twin.results, strict=True):
                old.replace_all_uses_with(new)
            block.erase_op(op)
            removed += 1
        stack.append((block, added))
        stack.extend((c, None) for c in reversed(children[block]))
    return removed


@dataclass(frozen=True)
class CSEPass(PassStatistics, ModulePass):
    """Merge structurally equal pure ops when one dominates the other.

    Input: a graph-level module. Two ops are equal when they have the same opcode,
    properties, result types and operands, with the operands of add, multiply, min,
    max, and, or, equal and notEqual compared as unordered pairs. The dominating op
    (same block earlier, or a block that dominates) replaces the other, across blocks.
    Never merged: random, load, allocations, stack and refcount ops, store, copy,
    trap, calls of impure or recursive callees, indirect calls (docs/reference/semantics.md, Purity).
    Statistics: "ops merged".
    """

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        pure = pure_functions(op)
        self.count("ops merged", sum(eliminate(f, pure) for f in functions(op)))
