"""The adjoint of a taped function, laid out from its tape (see differentiate_tape.py).

`TapeUnfolder.from_tape` copies the primal into an adjoint whose last two parameters are
the tape and the seed: the entry `branchEnum`s on the tape to one straight-line copy of
each primal path, in which every `branchEnum` of the primal keeps only the case the
path takes (its values are needed) and conditions are not re-evaluated (the tape says
which way the forward run went); recorded calls read their results (and their callees'
tapes) from the tape case's values instead of running again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.ir import Block, SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects.graph import BranchEnumOp, BranchOp, ConditionalOp
from dlc.dialects.graph_verify import block_name
from dlc.passes.graph.autodiff.differentiate_paths import Path, PathUnfolder

if TYPE_CHECKING:
    from dlc.passes.graph.autodiff.differentiate_tape import Layout, Recorded, Tapes


class TapeUnfolder(PathUnfolder):
    """Unfolds the primal for an adjoint; `from_tape` lays out a taped adjoint (one
    whose last two parameters are the tape and the seed) path by path."""

    def from_tape(self, layout: Layout, tapes: Tapes) -> tuple[list[tuple[Block, Path]], Recorded]:
        """`branchEnum` on the tape to one straight-line copy of each primal path (its
        `branchEnum`s keep only the case taken; conditions are not re-evaluated), the
        path's taped calls reading the tape's values. Returns the leaves and the calls."""
        old_entry = self.primal.body.blocks.first
        assert old_entry is not None
        entry, vm0 = self.copy_entry(old_entry)
        tape = entry.args[-2]
        tape._name = self.fresh("tape")
        starts: list[tuple[str, Block]] = []
        for k, (_, calls) in enumerate(layout):
            start = Block(arg_types=tapes.payload(calls))
            start._name = self.fresh(f"path{k}")
            self.adjoint.body.add_block(start)
            starts.append((f"path{k}", start))
        entry.add_op(BranchEnumOp(tape, starts))
        leaves: list[tuple[Block, Path]] = []
        recorded: Recorded = {}
        for (trail, _), (_, start) in zip(layout, starts, strict=True):
            vm, block, path = dict(vm0), start, []
            values = iter(start.args)
            for i, (old, _) in enumerate(trail):
                if i:
                    block = self.follow(trail[i - 1], old, block, vm)
                for op in self.copy_ops(old, block, vm):
                    path.append(op)
                    if tapes.recorded(op):
                        value = next(values)
                        value._name = op.results[0]._name
                        op.results[0]._name = None
                        taped = next(values) if tapes.of_call(op) is not None else None
                        if taped is not None:
                            taped._name = self.fresh("tape")
                        recorded[op] = (value, taped)
            leaves.append((block, path))
        return leaves, recorded

    def follow(
        self, edge: tuple[Block, int], dest: Block, block: Block, vm: dict[SSAValue, SSAValue]
    ) -> Block:
        """Take the primal edge into `dest`: its block arguments alias the branch's
        operands, or (after a `branchEnum`) the payload of the case taken."""
        term = edge[0].last_op
        if isinstance(term, BranchOp | ConditionalOp):
            args = (
                term.args
                if isinstance(term, BranchOp)
                else term.then_args
                if edge[1] == 0
                else term.else_args
            )
            for param, arg in zip(dest.args, args, strict=True):
                vm[param] = vm.get(arg, arg)
            return block
        assert isinstance(term, BranchEnumOp)
        nxt = Block(arg_types=[a.type for a in dest.args])
        nxt._name = self.fresh(block_name(dest))
        self.adjoint.body.add_block(nxt)
        for a_old, a_new in zip(dest.args, nxt.args, strict=True):
            a_new._name = self.fresh(a_old._name)
            vm[a_old] = a_new
            self.origin[a_new] = a_old
        branch = BranchEnumOp(
            vm.get(term.value, term.value), [(term.cases.data[edge[1]].data, nxt)]
        )
        copy_loc(term, branch)
        block.add_op(branch)
        return nxt
