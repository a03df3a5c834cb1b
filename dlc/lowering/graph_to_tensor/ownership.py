"""Where the reference counts of indirect enum boxes change in one graph function.

A value is *counted* when its type holds box addresses (layout.box_mask). The rules:

- every counted SSA value owns one reference per box it holds, except the function's
  parameters, which the caller lends for the call;
- an op whose result copies references retains them: `extract`, `insert`, `load`, the
  operands a `literal` copies, a branch's block arguments (and `branchEnum`'s case
  values); `apply` returns references the callee owned, and a new box starts at 1;
- `return` gives the caller one reference (a retain), and arguments of `apply` are
  lent (nothing changes);
- an owned value is released where it dies: after its last use in its block, or on
  each edge to a successor where it is no longer live (liveness over the blocks).

So every box is freed when its last reference dies, including in loops; a call that
traps mid-way may leak what it held (the status word aborts the function).
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects import graph
from dlc.dialects.graph import Symbols
from dlc.dialects.layout import LayoutError, box_mask

TERMINATORS = (graph.ReturnOp, graph.BranchOp, graph.ConditionalOp, graph.BranchEnumOp)


class Ownership:
    """Liveness of the counted values of one function (module docstring)."""

    def __init__(self, func: graph.FuncOp, order: list[Block], symbols: Symbols):
        self.symbols = symbols
        self._counted: dict[object, bool] = {}
        entry = order[0]
        self.borrowed = set(entry.args)
        self.live_in: dict[Block, set[SSAValue]] = {b: set() for b in order}
        self.live_out: dict[Block, set[SSAValue]] = {b: set() for b in order}
        self.last_use: dict[Block, dict[SSAValue, Operation | None]] = {}
        self.index: dict[SSAValue, int] = {}  # definition order: a deterministic order
        self.active = any(self.counted(a) for b in order for a in b.args) or any(
            self.counted(r) for b in order for op in b.ops for r in op.results
        )
        if self.active:
            self._liveness(order)

    def counted(self, value: SSAValue) -> bool:
        t = value.type
        if t not in self._counted:
            try:
                self._counted[t] = any(box_mask(t, self.symbols))
            except LayoutError:  # (reported by the lowering's type checks)
                self._counted[t] = False
        return self._counted[t]

    def owned(self, value: SSAValue) -> bool:
        return self.counted(value) and value not in self.borrowed

    def _liveness(self, order: list[Block]) -> None:
        uses: dict[Block, set[SSAValue]] = {}
        defs: dict[Block, set[SSAValue]] = {}
        for block in order:
            defined: set[SSAValue] = {a for a in block.args if self.counted(a)}
            for a in block.args:
                self.index.setdefault(a, len(self.index))
            used: set[SSAValue] = set()
            last: dict[SSAValue, Operation | None] = {a: None for a in defined}
            for op in block.ops:
                for operand in op.operands:
                    if self.counted(operand):
                        if operand not in defined:
                            used.add(operand)
                        last[operand] = op
                for r in op.results:
                    self.index.setdefault(r, len(self.index))
                    if self.counted(r):
                        defined.add(r)
                        last[r] = op
            uses[block], defs[block], self.last_use[block] = used, defined, last
        changed = True
        while changed:
            changed = False
            for block in reversed(order):
                out: set[SSAValue] = set()
                for succ in _successors(block):
                    out |= self.live_in.get(succ, set())
                live = uses[block] | (out - defs[block])
                if out != self.live_out[block] or live != self.live_in[block]:
                    self.live_out[block], self.live_in[block] = out, live
                    changed = True

    def dying_after(self, block: Block, op: Operation | None) -> list[SSAValue]:
        """Owned values whose last use in `block` is `op` (not a terminator) and that are
        not live after the block; with `op` None, the block arguments never used
        (released on entry)."""
        if not self.active:
            return []
        last = self.last_use[block]
        return [
            v
            for v, at in last.items()
            if at is op and self.owned(v) and v not in self.live_out[block]
        ]

    def dying_before_args(self, block: Block) -> list[SSAValue]:
        """Owned block arguments never used and not live out (released on entry)."""
        return self.dying_after(block, None)

    def alive_at_end(self, block: Block) -> list[SSAValue]:
        """Owned values not yet released when `block`'s terminator runs."""
        if not self.active:
            return []
        term = block.last_op
        last = self.last_use[block]
        values = set(last) | self.live_in[block]
        return [
            v
            for v in sorted(values, key=lambda v: self.index[v])
            if self.owned(v) and (v in self.live_out[block] or last.get(v) is term)
        ]

    def dying_on_edge(self, block: Block, succ: Block) -> list[SSAValue]:
        """What the edge `block` -> `succ` releases (after passing its arguments)."""
        keep = self.live_in.get(succ, set())
        return [v for v in self.alive_at_end(block) if v not in keep]


def _successors(block: Block) -> list[Block]:
    last = block.last_op
    return list(last.successors) if last is not None else []
