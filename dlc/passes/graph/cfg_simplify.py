"""`cfg-simplify`: DLVM's CFGSimplification without its stale-argument bug."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.dialects.cfg import predecessors
from dlc.dialects.graph import BranchOp, FuncOp
from dlc.passes.graph.dce import remove_unreachable_blocks
from dlc.passes.graph.pass_support import (
    edges,
    erase_blocks,
    functions,
    rebuild_terminator,
)
from dlc.passes.statistics import PassStatistics


def merge_into_predecessor(func: FuncOp) -> int:
    """pred: …; branch 'b(v…)  +  'b(p…): ops  ->  pred: …; ops[p := v]."""
    blocks = list(func.body.blocks)
    preds = predecessors(blocks)
    for block in blocks[1:]:
        if len(preds[block]) != 1 or preds[block][0] is block:
            continue
        pred = preds[block][0]
        term = pred.last_op
        if not isinstance(term, BranchOp):
            continue
        for param, value in zip(block.args, term.args, strict=True):
            param.replace_all_uses_with(value)
        pred.erase_op(term)
        for op in list(block.ops):
            op.detach()
            pred.add_op(op)
        erase_blocks([block])
        return 1
    return 0


def is_trampoline(block: Block) -> bool:
    """'b(p…): branch 'd(p…) with exactly its own parameters, in order."""
    term = block.first_op
    return (
        isinstance(term, BranchOp)
        and term is block.last_op
        and term.dest is not block
        and list(term.args) == list(block.args)
    )


def skip_trampolines(func: FuncOp) -> int:
    """Redirect edges into a trampoline straight to its destination."""
    blocks = list(func.body.blocks)
    preds = predecessors(blocks)
    for block in blocks[1:]:
        if not is_trampoline(block) or any(edges(p.last_op) is None for p in preds[block]):
            continue
        trampoline = block.last_op
        assert isinstance(trampoline, BranchOp)
        dest = trampoline.dest
        for pred in set(preds[block]):
            old = edges(pred.last_op)
            assert old is not None
            rebuild_terminator(pred.last_op, [(dest if b is block else b, args) for b, args in old])
        erase_blocks([block])
        return 1
    return 0


def drop_single_predecessor_params(func: FuncOp) -> int:
    """'b(p…) with one incoming edge a(v…): p := v, and the edge passes nothing (no stale args)."""
    blocks = list(func.body.blocks)
    preds = predecessors(blocks)
    changed = 0
    for block in blocks[1:]:
        if len(preds[block]) != 1 or not block.args or preds[block][0] is block:
            continue
        pred = preds[block][0]
        old = edges(pred.last_op)
        if old is None:
            continue
        (args,) = [a for b, a in old if b is block]
        for param, value in zip(list(block.args), args, strict=True):
            param.replace_all_uses_with(value)
            block.erase_arg(param)
        rebuild_terminator(pred.last_op, [(b, [] if b is block else a) for b, a in old])
        changed += 1
    return changed


@dataclass(frozen=True)
class CFGSimplifyPass(PassStatistics, ModulePass):
    """Simplify the control-flow graph of every function (DLVM's CFGSimplification).

    Repeats until nothing changes: remove blocks unreachable from the entry; merge a
    block into its unique predecessor when that ends in an unconditional `branch`
    (parameters := incoming values); redirect edges into trampolines (`'b(p…): branch
    'd(p…)`) to `'d`; substitute the parameters of a block with one incoming edge and
    remove the matching branch operands too (DLVM left them, failing verification).
    Statistics: "blocks erased", "blocks merged", "trampolines removed", "parameters removed".
    """

    name = "cfg-simplify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        for func in functions(op):
            steps = {
                "blocks erased": remove_unreachable_blocks,
                "blocks merged": merge_into_predecessor,
                "trampolines removed": skip_trampolines,
                "parameters removed": drop_single_predecessor_params,
            }
            changed = True
            while changed:
                changed = False
                for key, step in steps.items():
                    n = step(func)
                    self.count(key, n)
                    changed |= bool(n)
