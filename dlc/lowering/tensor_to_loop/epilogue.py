"""Epilogues of the nest builder: `epilogue n` of a reduction's schedule
(dlc/dialects/schedule.py) computes the `n` computes right after it at its register
tile, on the final accumulators, before anything is stored.

`epilogue_members(op)` (dlc/analysis/tensor_epilogue.py) checks the structure
(located diagnostics), `NestPlan` (dlc/analysis/tensor_nest_plan.py) the lanes. `EpilogueTile` (a base class of `NestBuilder`, like `RegisterTile`) carries
it out: where a tile point's accumulator is final, each member's body runs on it
(`known` values instead of loads; as vectors of the tile's lanes when vectorized,
loading only the valid lanes of a zero-padded tail), and a value is stored only
where something besides the later members reads it. Where reduction loops lie
outside the tile (a K-blocked product), the accumulators are final only in the last
block of each: the tile branches (`loop.if`) between the epilogue and storing the
partial sums.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.ir import Block, SSAValue

from dlc.analysis.tensor_nest_plan import NestPlan
from dlc.diagnostics import copy_loc
from dlc.dialects import loop, tensor
from dlc.dialects.tensor_groups import uses_of
from dlc.lowering.tensor_to_loop.body import (
    all_of,
    dtype_of,
    index,
    inline_body,
    inline_body_lanes,
    store,
    vstore_valid,
)


@dataclass(frozen=True)
class EpilogueMember:
    """A compute evaluated at the register tile, and its buffer (None: only later
    members read it, in registers)."""

    op: tensor.ComputeOp
    buffer: SSAValue | None


def read_elsewhere(value: SSAValue, members: list[tensor.ComputeOp]) -> bool:
    """Whether something besides `members` uses `value` (it needs its buffer)."""
    uses = uses_of(value)
    return uses.blocked or any(c not in members for c in uses.reads)


class EpilogueTile(NestPlan):
    """Delivery of a register tile's final values through an epilogue (module doc)."""

    op: tensor.ComputeOp
    buffer: SSAValue | None
    buffers: dict[SSAValue, SSAValue]
    axes: list[str]
    extents: dict[str, int]
    memory_init: bool
    lanes: int
    lane_axis: str
    epilogue: list[EpilogueMember]
    keep_result: bool  # the reduction's own result is read by others than the members
    epilogue_plans: dict[tensor.ComputeOp, dict]  # planned by `NestPlan`
    # provided by NestBuilder / RegisterTile
    _indices: Callable[..., list[SSAValue]]
    _deliver: Callable[..., None]
    _valid: Callable[..., int]

    def _deliver_final(
        self, b: Builder, env: dict, points: list, wheres: list, finals: list[SSAValue]
    ) -> None:
        """Store the tile's values through the epilogue where they are final."""
        last = self._last_block(b, env) if self.memory_init else True
        if last is True:
            self._epilogue_points(b, points, wheres, finals)
            return
        if last is False:  # an earlier block of the reduction (unrolled): values partial
            self._deliver_partial(b, points, wheres, finals)
            return
        branch = b.insert(loop.IfOp(last, [], Block(), Block()))
        copy_loc(self.op, branch)
        then = Builder(InsertPoint.at_end(branch.then_region.block))
        self._epilogue_points(then, points, wheres, finals)
        then.insert(loop.YieldOp())
        partial = Builder(InsertPoint.at_end(branch.else_region.block))
        self._deliver_partial(partial, points, wheres, finals)
        partial.insert(loop.YieldOp())

    def _deliver_partial(self, b: Builder, points: list, wheres: list, finals: list) -> None:
        """Store the tile's values as they are (the reduction goes on: no epilogue)."""
        for value, where, (point, lanes) in zip(finals, wheres, points, strict=True):
            self._deliver(b, value, where, lanes, self._valid(point, lanes))

    def _last_block(self, b: Builder, env: dict) -> SSAValue | bool:
        """Whether every reduction axis is at its last block at `env` (an i1 value,
        or a constant when known here)."""
        conditions: list[SSAValue] = []
        for a in self.axes[len(self.op.domain) :]:
            block = env[a]
            if block.base is None and isinstance(block.extent, int):
                if block.offset + block.extent < self.extents[a]:
                    return False
                continue
            end = block.extent if isinstance(block.extent, SSAValue) else index(b, block.extent)
            if block.base is not None:
                end = b.insert(arith.AddiOp(block.base, end)).result
            if block.offset:
                end = b.insert(arith.AddiOp(end, index(b, block.offset))).result
            done = arith.CmpiOp(end, index(b, self.extents[a]), "sge")
            conditions.append(b.insert(done).result)
        return all_of(b, conditions)

    def _epilogue_points(
        self, b: Builder, points: list, wheres: list, finals: list[SSAValue]
    ) -> None:
        for value, where, (point, lanes) in zip(finals, wheres, points, strict=True):
            valid = self._valid(point, lanes)
            if self.keep_result:
                self._deliver(b, value, where, lanes, valid)
            known: dict[SSAValue, SSAValue] = {self.op.result: value}
            for m in self.epilogue:
                if lanes > 1:
                    plan = self.epilogue_plans[m.op]
                    result = inline_body_lanes(
                        b, m.op, where, self.buffers, plan, lanes, known=known, valid=valid
                    )
                else:
                    result = inline_body(b, m.op, where, self.buffers, known)
                known[m.op.result] = result
                if m.buffer is None:
                    continue
                if lanes > 1:
                    vstore_valid(b, result, m.buffer, where, lanes, valid)
                else:
                    store(b, result, m.buffer, where, dtype_of(m.op.result))
