"""`dce`: dead code elimination (ops, blocks, block arguments)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.dialects.cfg import predecessors, reachable
from dlc.dialects.graph import FuncOp
from dlc.passes.graph.pass_support import (
    edges,
    erase_blocks,
    erase_dead_ops,
    functions,
    pure_functions,
    rebuild_terminator,
)
from dlc.passes.statistics import PassStatistics


def remove_unreachable_blocks(func: FuncOp) -> int:
    """Erase the blocks no path from the entry reaches."""
    assert func.entry is not None
    live = set(reachable(func.entry))
    dead = [b for b in func.body.blocks if b not in live]
    erase_blocks(dead)
    return len(dead)


def removable_args(block: Block, preds: list[Block]) -> list[int]:
    """Indices of `block`'s unused arguments, when every predecessor passes them explicitly."""
    if all(edges(p.last_op) is not None for p in preds if p.last_op is not None):
        return [a.index for a in block.args if not a.uses]
    return []


def remove_unused_args(func: FuncOp) -> int:
    """Drop unused arguments of non-entry blocks together with the matching branch operands."""
    blocks = list(func.body.blocks)
    preds = predecessors(blocks)
    removed = 0
    for block in blocks[1:]:
        drop = removable_args(block, preds[block])
        if not drop:
            continue
        for pred in set(preds[block]):
            assert pred.last_op is not None
            old = edges(pred.last_op)
            assert old is not None
            new = [
                (b, [v for i, v in enumerate(args) if b is not block or i not in drop])
                for b, args in old
            ]
            rebuild_terminator(pred.last_op, new)
        for i in reversed(drop):
            block.erase_arg(block.args[i])
        removed += len(drop)
    return removed


@dataclass(frozen=True)
class DCEPass(PassStatistics, ModulePass):
    """Remove dead code from every graph function.

    Removes: pure ops whose results are unused (docs/reference/semantics.md's sound purity:
    random, memory, allocation, stack and refcount ops, trap and calls of impure or
    recursive callees stay), blocks unreachable from the entry, and unused arguments of
    non-entry blocks together with the operands every branch/conditional passes for
    them (no stale arguments). Entry arguments (the signature) stay. Repeats until
    nothing changes. Statistics: "ops erased", "blocks erased", "block arguments erased".
    """

    name = "dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        pure = pure_functions(op)
        changed = True
        while changed:
            blocks = sum(remove_unreachable_blocks(f) for f in functions(op))
            ops = erase_dead_ops(op, pure)
            args = sum(remove_unused_args(f) for f in functions(op))
            self.count("blocks erased", blocks)
            self.count("ops erased", ops)
            self.count("block arguments erased", args)
            changed = bool(blocks or ops or args)
