"""`cse`: common subexpression elimination across blocks, by dominance."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from dlc.dialects.graph import FuncOp, LiteralOp
from dlc.passes.pass_support import (
    bump,
    functions,
    is_pure,
    predecessors,
    pure_functions,
    reachable,
    successors,
)

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


def dominator_tree(func: FuncOp) -> dict[Block, list[Block]]:
    """Children of each reachable block in the dominator tree (Cooper–Harvey–Kennedy)."""
    assert func.entry is not None
    order = reachable(func.entry)
    rpo = _reverse_postorder(func.entry)
    index = {b: i for i, b in enumerate(rpo)}
    preds = predecessors(order)
    idom: dict[Block, Block] = {func.entry: func.entry}
    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            done = [p for p in preds[b] if p in idom]
            new = done[0]
            for p in done[1:]:
                new = _intersect(p, new, idom, index)
            if idom.get(b) is not new:
                idom[b] = new
                changed = True
    children: dict[Block, list[Block]] = {b: [] for b in rpo}
    for b in rpo[1:]:
        children[idom[b]].append(b)
    return children


def _reverse_postorder(entry: Block) -> list[Block]:
    seen, post = {entry}, []
    stack = [(entry, iter(successors(entry)))]
    while stack:
        block, it = stack[-1]
        nxt = next((s for s in it if s not in seen), None)
        if nxt is None:
            post.append(block)
            stack.pop()
            continue
        seen.add(nxt)
        stack.append((nxt, iter(successors(nxt))))
    return post[::-1]


def _intersect(a: Block, b: Block, idom: dict[Block, Block], index: dict[Block, int]) -> Block:
    while a is not b:
        while index[a] > index[b]:
            a = idom[a]
        while index[b] > index[a]:
            b = idom[b]
    return a


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
    children = dominator_tree(func)
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
class CSEPass(ModulePass):
    """Merge structurally equal pure ops when one dominates the other.

    Input: a graph-level module. Two ops are equal when they have the same opcode,
    properties, result types and operands, with the operands of add, multiply, min,
    max, and, or, equal and notEqual compared as unordered pairs. The dominating op
    (same block earlier, or a block that dominates) replaces the other, across blocks.
    Never merged: random, load, allocations, stack and refcount ops, store, copy,
    trap, calls of impure or recursive callees, indirect calls (shared/DLVM.md §2.3).
    Statistics: "ops merged".
    """

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pure = pure_functions(op)
        bump(self.name, "ops merged", sum(eliminate(f, pure) for f in functions(op)))
