"""Packed operands of the nest builder: `pack [n]` of a `#schedule.nest` carried out.

A matrix product's B operand is copied, block by block right before the row loops (or at
compile time when it is a constant), into zero-padded NR-wide panels the microkernel
reads contiguously and without a column tail; values are copied, so the bits do not
change. Anything else is a located diagnostic (`NestPlan`). Layout: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    IntegerType,
    MemRefType,
    TensorType,
)
from xdsl.ir import Operation, SSAValue

from dlc.analysis.tensor_nest_plan import NestPlan, index_slice
from dlc.diagnostics import copy_loc
from dlc.dialects import loop, tensor
from dlc.dialects.schedule import Loop
from dlc.lowering.scalar_ops import ScalarBuilder
from dlc.lowering.tensor_to_loop.body import dtype_of, index, load, memref_type, store
from dlc.lowering.tensor_to_loop.constants import loaded, made
from dlc.lowering.tensor_to_loop.loop_ops import vload

Scratch = Callable[[MemRefType], SSAValue]
"""Allocates a buffer that lives for the whole function (freed before it returns)."""


class PackedOperand(NestPlan):
    """`pack` emission (module docstring; planned by `NestPlan`)."""

    op: tensor.ComputeOp
    loops: list[Loop]
    tile: list[Loop]
    chain: tuple[int, int] | None
    feeders: list
    prefix: dict[str, SSAValue]
    known: dict[SSAValue, SSAValue]
    buffers: dict[SSAValue, SSAValue]
    scratch: Scratch | None
    _indices: Callable[..., list[SSAValue]]

    # -- emission -------------------------------------------------------------------------

    def _pack_buffer(self, b: Builder) -> None:
        """Allocate the scratch buffer, or make the packed constant (at the start of
        `emit`, at `b`)."""
        plan = self.pack
        if plan is None:
            return
        assert self.scratch is not None
        t = memref_type(plan.read.tensor.type)
        shape = [plan.panels, plan.depth, plan.width]
        mtype = MemRefType(t.element_type, shape)
        if plan.constant is None:
            plan.buffer = self.scratch(mtype)
            return
        data = packed_literal(*plan.constant, plan.width)
        element = t.element_type
        assert isinstance(element, IntegerType | AnyFloat), element  # a tensor's buffer
        dense = DenseIntOrFPElementsAttr(TensorType(element, shape), BytesAttr(data))
        plan.buffer = b.insert(loop.ConstBufferOp(dense, mtype)).res
        plan.k_base = index(b, 0)

    def _pack_block(self, b: Builder, env: dict) -> None:
        """Copy the block of B that `env` leaves to the inner loops into its panels."""
        plan = self.pack
        assert plan is not None and plan.buffer is not None
        (j0, k0) = self._indices(b, env, ["d1", "r0"])
        plan.k_base = k0
        depth = env["r0"].extent
        k_extent = depth if isinstance(depth, SSAValue) else index(b, depth)
        columns = env["d1"].extent
        width = index(b, plan.width)
        extent = columns if isinstance(columns, SSAValue) else index(b, columns)
        end = b.insert(arith.AddiOp(j0, extent)).result
        first = b.insert(arith.DivUIOp(j0, width)).result
        full = b.insert(arith.DivUIOp(end, width)).result
        rounded = b.insert(arith.AddiOp(end, index(b, plan.width - 1))).result
        last = b.insert(arith.DivUIOp(rounded, width)).result
        self._pack_panels(b, first, full, k0, k_extent, None)
        self._pack_panels(b, full, last, k0, k_extent, end)

    def _pack_panels(
        self,
        b: Builder,
        lo: SSAValue,
        hi: SSAValue,
        k0: SSAValue,
        k_extent: SSAValue,
        end: SSAValue | None,
    ) -> None:
        """Panels [lo, hi): `packed[p][kk][r] = B(k0 + kk, p * NR + r)`; with `end`,
        columns from `end` on are zeros (a clamped read)."""
        plan = self.pack
        assert plan is not None and plan.buffer is not None
        one = index(b, 1)
        ivs: list[SSAValue] = []
        for lb, ub in ((lo, hi), (index(b, 0), k_extent), (index(b, 0), index(b, plan.width))):
            nest = b.insert(loop.ForOp(lb, ub, one))
            copy_loc(self.op, nest)
            terminator = loop.YieldOp()
            nest.body.block.add_op(terminator)
            ivs.append(nest.iv)
            b = Builder(InsertPoint.before(terminator))
        p, kk, r = ivs
        start = b.insert(arith.MuliOp(p, index(b, plan.width))).result
        column = b.insert(arith.AddiOp(start, r)).result
        k = b.insert(arith.AddiOp(k0, kk)).result
        dt = dtype_of(plan.read.tensor)
        if end is None:
            store(b, self._read_at(b, column, k), plan.buffer, [p, kk, r], dt)
            return
        final = b.insert(arith.SubiOp(end, one)).result
        clamped = b.insert(arith.MinSIOp(column, final)).result
        value = self._read_at(b, clamped, k)
        inside = b.insert(arith.CmpiOp(column, end, "slt")).result
        zero = ScalarBuilder(b).const(0, dt)
        store(b, b.insert(arith.SelectOp(inside, value, zero)).result, plan.buffer, [p, kk, r], dt)

    def _read_at(self, b: Builder, column: SSAValue, k: SSAValue) -> SSAValue:
        """The packed read at column `column` and reduction index `k` (its index
        arithmetic cloned from the body; the rows do not matter)."""
        plan = self.pack
        assert plan is not None
        args = self.op.body.block.args
        mapping: dict[SSAValue, SSAValue] = {args[0]: index(b, 0), args[1]: column, args[2]: k}
        needed = index_slice(plan.read)
        for inner in self.op.body.block.ops:
            if inner is plan.read:
                break
            if inner in needed:
                b.insert(inner.clone(mapping))
        where = [mapping.get(i, i) for i in plan.read.indices]
        return load(b, self.buffers[plan.read.tensor], where, dtype_of(plan.read.tensor))

    def _packed_reads(self) -> dict[Operation, Callable[..., SSAValue]]:
        """The reads the body inliners take from the panels instead of the operand."""
        return {} if self.pack is None else {self.pack.read: self._packed_load}

    def _packed_load(self, b: Builder, point: Sequence[SSAValue], lanes: int) -> SSAValue:
        """`lanes` values of the packed operand from column `point[1]` on (within one
        panel) at reduction index `point[2]`."""
        plan = self.pack
        assert plan is not None and plan.buffer is not None and plan.k_base is not None
        width = index(b, plan.width)
        k_base, buffer = plan.k_base, plan.buffer
        p = made(b, ("/", point[1], width), lambda: arith.DivUIOp(point[1], width)).results[0]
        r = made(b, ("%", point[1], width), lambda: arith.RemUIOp(point[1], width)).results[0]
        kk = made(b, ("-", point[2], k_base), lambda: arith.SubiOp(point[2], k_base)).results[0]
        if lanes > 1:
            make = lambda: vload(buffer, [p, kk, r], lanes)  # noqa: E731
            return loaded(b, (buffer, (p, kk, r), lanes), make).results[0]
        return load(b, buffer, [p, kk, r], dtype_of(plan.read.tensor))


def packed_literal(literal: tensor.ConstantOp, transposed: bool, width: int) -> bytes:
    """The bytes of `literal` (K x N, or N x K when `transposed`) as `width`-wide panels
    `[ceil(N / width)][K][width]`, zeros past column N."""
    dims = literal.result.type.dims
    dtype = np.dtype(f"<f{int(dtype_of(literal.result)[1:]) // 8}")
    values = np.frombuffer(literal.value.data.data, dtype=dtype).reshape(dims)
    kn = values.T if transposed else values
    k, n = kn.shape
    panels = -(-n // width)
    padded = np.zeros((k, panels * width), dtype=dtype)
    padded[:, :n] = kn
    return padded.reshape(k, panels, width).transpose(1, 0, 2).tobytes()
