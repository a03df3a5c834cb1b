"""The nest builder: one `tensor.compute` as the loops its schedule says.

`NestBuilder(...).emit(b)` emits the loops of the compute's `#schedule.nest` (none:
output loops, then reduction loops) and decides nothing itself: tiles with remainders,
unrolled loops, split index ranges, packed operands, register-tile accumulators, vector lanes. Every element
is folded in the order of its reduction indices, so every schedule gives the same bits.
How each primitive becomes loops: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Block, SSAValue

from dlc.analysis.tensor_lanes import vector_pieces
from dlc.analysis.tensor_nest_plan import NestPlan, check_unroll, in_register
from dlc.diagnostics import copy_loc, error_at
from dlc.dialects import loop, tensor
from dlc.lowering.scalar_ops import (
    ScalarBuilder,
    Unsupported,
    mark_contractible,
)
from dlc.lowering.tensor_to_loop.body import (
    dtype_of,
    index,
    inline_body,
    inline_body_lanes,
    load,
    store,
)
from dlc.lowering.tensor_to_loop.collapse import collapsed_position
from dlc.lowering.tensor_to_loop.constants import constant, offset
from dlc.lowering.tensor_to_loop.epilogue import EpilogueMember, EpilogueTile
from dlc.lowering.tensor_to_loop.pack import PackedOperand, Scratch
from dlc.lowering.tensor_to_loop.tile import Block_, RegisterTile, constant_extent

Inner = Callable[[Builder, dict[str, Block_]], None]
"""A loop's body: emitted at a builder with the environment of its iteration."""


@dataclass(frozen=True)
class Feeder:
    """A group member evaluated at each reduction point, and its buffer (or None)."""

    op: tensor.ComputeOp
    buffer: SSAValue | None


class NestBuilder(RegisterTile, PackedOperand, EpilogueTile):
    """Emits the loops of one compute (module docstring)."""

    def __init__(
        self,
        op: tensor.ComputeOp,
        buffer: SSAValue | None,
        buffers: dict[SSAValue, SSAValue],
        *,
        prefix: Sequence[SSAValue] = (),
        known: dict[SSAValue, SSAValue] | None = None,
        feeders: Sequence[Feeder] = (),
        scratch: Scratch | None = None,
        epilogue: Sequence[EpilogueMember] = (),
        keep_result: bool = True,
    ) -> None:
        self.buffer, self.buffers, self.scratch = buffer, buffers, scratch
        self.known = dict(known or {})
        self.feeders = list(feeders)
        NestPlan.__init__(
            self,
            op,
            prefix=len(prefix),
            known=bool(self.known),
            fed=bool(self.feeders),
            has_buffer=buffer is not None,
            has_scratch=scratch is not None,
            epilogue=[m.op for m in epilogue],
        )
        self.prefix = dict(zip(self.axes, prefix, strict=False))
        self.epilogue, self.keep_result = list(epilogue), keep_result
        kept = {*self.unrolled, *self.splits, *self.parallel, self.lane_loop}
        grouped = self.in_group or bool(self.feeders or self.epilogue or self.pack)
        self.collapse_at = collapsed_position(op, self.loops, kept, grouped)

    # -- emission -------------------------------------------------------------------------

    def emit(self, b: Builder) -> SSAValue | None:
        """Emit the nest at `b`; the value when the compute is one point of the nest
        (no output loops left: a group's base member), else None."""
        self._pack_buffer(b)
        return self.emit_loops(b)

    def emit_loops(self, b: Builder) -> SSAValue | None:
        """`emit` after the packed operand's buffer is made (`kernels.py` makes it in
        the caller and the loops in a kernel)."""
        env = {
            a: Block_(self.prefix.get(a), 0, 1 if a in self.prefix else n)
            for a, n in self.extents.items()
        }
        self.result: SSAValue | None = None
        self._emit(0, b, env)
        return self.result

    def _emit(self, pos: int, b: Builder, env: dict[str, Block_]) -> None:
        if self.pack is not None and pos == self.pack.pos:
            self._pack_block(b, env)
        if pos == self.first_reduction and self.memory_init and self.chain is None:
            self._init_nest(b, env, pos)
        if self.chain is not None and pos == self.chain[0]:
            self._register_chain(b, env)
            return
        if pos == len(self.loops):
            self._point(b, env)
            return
        if self.op.combinator is None and self.loops[pos].name == self.lane_loop:
            self._lane_points(pos, b, env)
            return
        if pos == self.collapse_at:
            self._collapsed(pos, b, env)
            return
        self._loop(pos, b, env, lambda b2, env2: self._emit(pos + 1, b2, env2))

    def _collapsed(self, pos: int, b: Builder, env: dict[str, Block_]) -> None:
        """Loops `pos` and `pos + 1` as one over rows x columns (`collapse.py`)."""
        row, column = self.loops[pos].axis, self.loops[pos + 1].axis
        columns = constant_extent(env[column].extent, self.op, column)
        points = constant_extent(env[row].extent, self.op, row) * columns
        nest = b.insert(loop.ForOp(index(b, 0), index(b, points), index(b, 1)))
        copy_loc(self.op, nest)
        body = Builder(InsertPoint.at_end(nest.body.block))
        at_row = body.insert(arith.DivUIOp(nest.iv, index(body, columns))).result
        at_column = body.insert(arith.RemUIOp(nest.iv, index(body, columns))).result
        point = {**env, row: Block_(at_row, 0, 1), column: Block_(at_column, 0, 1)}
        self._emit(pos + 2, body, point)
        body.insert(loop.YieldOp())

    def _loop(self, pos: int, b: Builder, env: dict[str, Block_], inner: Inner) -> None:
        """Loop `pos` over its axis' current block, calling `inner(b, env)` for the body
        (once per iteration when unrolled; peeled where an inner level needs a constant
        extent)."""
        lp = self.loops[pos]
        block = env[lp.axis]
        if lp.name in self.splits:  # index-set splitting: one loop per piece, in order
            extent = constant_extent(block.extent, self.op, lp.name)
            bounds = [0, *self.splits[lp.name], extent]
            for lo, hi in zip(bounds, bounds[1:]):
                piece = {**env, lp.axis: replace(block, offset=block.offset + lo, extent=hi - lo)}
                self._for(pos, b, piece, index(b, hi - lo), 1, inner)
            return
        if lp.name in self.unrolled or self._needsconstant_extent(pos):
            extent = constant_extent(block.extent, self.op, lp.name)
            full = extent - extent % lp.step
            if lp.name in self.unrolled:
                self._check_unroll(extent // max(1, lp.step))
                for x in range(0, extent, lp.step):
                    inner(
                        b,
                        {
                            **env,
                            lp.axis: replace(
                                block, offset=block.offset + x, extent=min(lp.step, extent - x)
                            ),
                        },
                    )
                return
            if full and extent % lp.step and lp.name in self.parallel:
                self._split_for(pos, b, env, extent, inner)
                return
            if full:
                whole = {**env, lp.axis: replace(block, extent=full)}
                self._for(pos, b, whole, index(b, full), lp.step, inner)
            if extent % lp.step:
                inner(
                    b,
                    {
                        **env,
                        lp.axis: replace(
                            block, offset=block.offset + full, extent=extent % lp.step
                        ),
                    },
                )
            return
        ub = block.extent if isinstance(block.extent, SSAValue) else index(b, block.extent)
        self._for(pos, b, env, ub, lp.step, inner)

    def _for(
        self, pos: int, b: Builder, env: dict[str, Block_], ub: SSAValue, step: int, inner: Inner
    ) -> None:
        lp = self.loops[pos]
        block = env[lp.axis]
        parallel = lp.name in self.parallel and not lp.is_reduction
        nest = b.insert(loop.ForOp(index(b, 0), ub, index(b, step), parallel=parallel))
        copy_loc(self.op, nest)
        body = Builder(InsertPoint.at_end(nest.body.block))
        child = self._child(body, block, nest.iv, ub, step)
        inner(body, {**env, lp.axis: child})
        body.insert(loop.YieldOp())

    def _split_for(
        self, pos: int, b: Builder, env: dict[str, Block_], extent: int, inner: Inner
    ) -> None:
        """A parallel loop whose last block is partial, peeled inside the loop: each
        iteration branches to the full block or the remainder (both of constant
        extent), so the remainder runs on a thread of its own instead of after the
        parallel loop (measured: docs/performance.md, "Measurements behind the
        defaults")."""
        lp = self.loops[pos]
        block = env[lp.axis]
        full = extent - extent % lp.step
        nest = b.insert(loop.ForOp(index(b, 0), index(b, extent), index(b, lp.step), parallel=True))
        copy_loc(self.op, nest)
        body = Builder(InsertPoint.at_end(nest.body.block))
        base = (
            nest.iv if block.base is None else body.insert(arith.AddiOp(block.base, nest.iv)).result
        )
        is_full = body.insert(arith.CmpiOp(nest.iv, index(body, full), "slt")).result
        branch = body.insert(loop.IfOp(is_full, [], Block(), Block()))
        copy_loc(self.op, branch)
        for region, size in ((branch.then_region, lp.step), (branch.else_region, extent - full)):
            arm = Builder(InsertPoint.at_end(region.block))
            inner(arm, {**env, lp.axis: Block_(base, block.offset, size)})
            arm.insert(loop.YieldOp())
        body.insert(loop.YieldOp())

    def _child(self, b: Builder, block: Block_, iv: SSAValue, ub: SSAValue, step: int) -> Block_:
        """The block of one iteration `iv` of a loop over `block` in steps of `step`."""
        base = iv if block.base is None else b.insert(arith.AddiOp(block.base, iv)).result
        if step == 1:
            return Block_(base, block.offset, 1)
        if isinstance(block.extent, int) and block.extent % step == 0:
            return Block_(base, block.offset, step)
        rest = b.insert(arith.SubiOp(ub, iv)).result
        return Block_(base, block.offset, b.insert(arith.MinSIOp(rest, index(b, step))).result)

    def _needsconstant_extent(self, pos: int) -> bool:
        """A deeper level of this loop's axis is unrolled: peel instead of `min`."""
        lp = self.loops[pos]
        return any(
            o.axis == lp.axis and o.level > lp.level and o.name in self.unrolled for o in self.loops
        )

    def _check_unroll(self, copies: int) -> None:
        check_unroll(self.op, copies)

    # -- points ---------------------------------------------------------------------------

    def _indices(self, b: Builder, env: dict[str, Block_], axes: Sequence[str]) -> list[SSAValue]:
        out = []
        for a in axes:
            block = env[a]
            if block.base is None:
                out.append(index(b, block.offset))
            elif block.offset:
                out.append(offset(b, block.base, block.offset))
            else:
                out.append(block.base)
        return out

    def _outputs(self) -> list[str]:
        return self.axes[: len(self.op.domain)]

    def _element(
        self, b: Builder, env: dict[str, Block_], known: dict[SSAValue, SSAValue], lanes: int = 1
    ) -> SSAValue:
        """The body at the current point (`lanes` > 1: a vector of the points from
        there along the vectorized axis); feeders first (stored, then in registers)."""
        point = self._indices(b, env, self.axes)
        if lanes > 1:
            return inline_body_lanes(
                b, self.op, point, self.buffers, self.lane_plan, lanes, self._packed_reads(), known
            )
        for feeder in self.feeders:
            known[feeder.op.result] = inline_body(b, feeder.op, point, self.buffers, known)
            if feeder.buffer is not None:
                store(b, known[feeder.op.result], feeder.buffer, point, dtype_of(feeder.op.result))
        return inline_body(b, self.op, point, self.buffers, known, self._packed_reads())

    def _lane_points(self, pos: int, b: Builder, env: dict[str, Block_]) -> None:
        """The vectorized last loop of an element-wise nest: its block as vectors (and
        narrower ones for the rest, `vector_pieces`), each computed and stored whole."""
        lp = self.loops[pos]
        block = env[lp.axis]
        extent = constant_extent(block.extent, self.op, lp.name)
        for x, size, lanes in vector_pieces(extent, self.lanes):
            point = {**env, lp.axis: replace(block, offset=block.offset + x, extent=size)}
            value = self._element(b, point, dict(self.known), lanes)
            self._deliver(b, value, self._indices(b, point, self._outputs()), lanes)

    def _point(self, b: Builder, env: dict[str, Block_]) -> None:
        """Innermost point: an element-wise value, or a reduction step in memory."""
        known = dict(self.known)
        element = self._element(b, env, known)
        where = self._indices(b, env, self._outputs())
        if self.op.combinator is None:
            self._deliver(b, element, where)
            return
        assert self.buffer is not None
        acc = load(b, self.buffer, where, self.dt)
        store(b, self._combine(b, acc, element), self.buffer, where, self.dt)

    def _deliver(
        self,
        b: Builder,
        value: SSAValue,
        where: list[SSAValue],
        lanes: int = 1,
        valid: int | None = None,
    ) -> None:
        """Store a point's value; of a vector, its first `valid` lanes (all by default)."""
        if self.buffer is not None and lanes > 1:
            self._vstore_valid(b, value, where, lanes, lanes if valid is None else valid)
        elif self.buffer is not None:
            store(b, value, self.buffer, where, self.dt)
        if in_register(self.op, len(self.prefix)):
            self.result = value  # one point of the nest: later members read the register

    def _combine(self, b: Builder, acc: SSAValue, element: SSAValue) -> SSAValue:
        """combine(acc, element); with `fma`, an `acc + x * y` may contract."""
        assert self.op.combinator is not None
        try:
            value = ScalarBuilder(b).binary(self.op.combinator.data, self.dt, acc, element)
        except Unsupported as err:
            raise error_at(
                self.op, f"not supported by the code generator yet: reduce by {err}"
            ) from None
        if self.fma and isinstance(value.owner, arith.AddfOp):
            mark_contractible(value.owner, element)
        return value

    def _init_value(self, b: Builder) -> SSAValue:
        init = self.op.init
        if init is not None:
            return self.known.get(init) or load(b, self.buffers[init], [], self.dt)
        value = self.op.init_value
        if isinstance(value, IntegerAttr | FloatAttr):
            return constant(b, value)
        return b.insert(arith.ConstantOp(value)).result  # type: ignore[arg-type]

    def _init_nest(self, b: Builder, env: dict[str, Block_], pos: int) -> None:
        """`buffer = init` over the output points inside loop `pos`."""
        inside = [a for a in self._outputs() if any(lp.axis == a for lp in self.loops[pos:])]
        env = dict(env)
        for a in inside:
            block = env[a]
            ub = block.extent if isinstance(block.extent, SSAValue) else index(b, block.extent)
            nest = b.insert(loop.ForOp(index(b, 0), ub, index(b, 1)))
            copy_loc(self.op, nest)
            terminator = loop.YieldOp()
            nest.body.block.add_op(terminator)
            b = Builder(InsertPoint.before(terminator))
            env[a] = self._child(b, replace(block, extent=ub), nest.iv, ub, 1)
        assert self.buffer is not None
        store(b, self._init_value(b), self.buffer, self._indices(b, env, self._outputs()), self.dt)
