"""Loop nests over run-time extents for `lower-graph-to-loop` (symbolic dimensions).

Every tensor of a function with symbolic dimensions lives in a flat row-major buffer,
`memref<?xT>` (or `memref<NxT>` when its shape is static); an extent is an `i64` value,
a constant or a size the caller passed. `NestEmitter` builds the nests, the row-major
index arithmetic and the element loads and stores (bool is `i8` in memory, `i1` in
registers) at one insertion point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, IntegerType, MemRefType, i8, i64
from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects import graph_dims, loop
from dlc.dialects.graph_types import TensorType
from dlc.lowering.scalar_ops import ScalarBuilder
from dlc.lowering.tensor_to_loop.body import load, storage_type

PARALLEL_WORK = 1 << 15
"""The fewest elements (or multiply-adds) a nest works on to run its loop on threads:
below it, waking the team costs more than it saves (and on a busy machine the call
waits for a descheduled thread)."""


def buffer_type(t: TensorType) -> MemRefType:
    """The flat buffer of tensor type `t`: `memref<?xT>` when a dimension is symbolic."""
    count = DYNAMIC_INDEX if t.is_dynamic else t.num_elements
    return MemRefType(storage_type(t.dt), [count])


class NestEmitter:
    """Loop-level code at the end of a block: extents, nests, indices, loads, stores."""

    def __init__(self, block: Block, sizes: dict[str, SSAValue]) -> None:
        self.builder = Builder(InsertPoint.at_end(block))
        self.scalars = ScalarBuilder(self.builder)
        self.sizes = sizes
        self.block = block
        self.indices: dict[int, SSAValue] = {}
        self.zero = self.index_const(0)
        self.one = self.index_const(1)

    def index_const(self, value: int) -> SSAValue:
        """An i64 constant made once, at the top of the function (dominating every use)."""
        if value not in self.indices:
            op = arith.ConstantOp(IntegerAttr(value, i64))
            Builder(InsertPoint.at_start(self.block)).insert(op)
            self.indices[value] = op.result
        return self.indices[value]

    def emit(self, op: Operation) -> SSAValue:
        return self.scalars.emit(op)

    def extent(self, d: int | str) -> SSAValue:
        """The extent of one dimension: a constant or the caller's size of `%d`."""
        if isinstance(d, str):
            return self.sizes[d]
        return self.index_const(d)

    def merged_sizes(self, types: Sequence[TensorType]) -> None:
        """The extents of the symbolic dimensions of `types` that are expressions
        (`%seq*12`, `%past+1`), computed here (at the top of the function, dominating
        every use)."""
        for t in types:
            for d in t.dims:
                if not isinstance(d, str) or d in self.sizes:
                    continue
                total: SSAValue | None = None
                for names, coefficient in graph_dims.poly(d).items():
                    term = self.index_const(coefficient)
                    for name in names:
                        term = self.emit(arith.MuliOp(term, self.sizes[name]))
                    total = term if total is None else self.emit(arith.AddiOp(total, term))
                assert total is not None
                self.sizes[d] = total

    def count(self, t: TensorType) -> SSAValue:
        """The number of elements of `t` (an `i64` value)."""
        total = self.one
        for d in t.dims:
            e = self.extent(d)
            total = e if total is self.one else self.emit(arith.MuliOp(total, e))
        return total

    def open_loops(
        self, extents: Sequence[SSAValue], init: SSAValue | None = None, parallel: bool = False
    ) -> tuple[list[SSAValue], list[loop.ForOp], SSAValue | None]:
        """Nested `loop.for`s from 0 to each extent (one accumulator through all when
        `init` is given; the outermost loop `parallel` when asked, its iterations being
        independent); the insertion point moves into the innermost body. Returns the
        induction variables, the loops and the accumulator inside."""
        ivs: list[SSAValue] = []
        fors: list[loop.ForOp] = []
        acc = init
        for extent in extents:
            threads = parallel and not fors and acc is None
            op = loop.ForOp(
                self.zero, extent, self.one, [] if acc is None else [acc], parallel=threads
            )
            self.builder.insert(op)
            fors.append(op)
            ivs.append(op.iv)
            acc = op.iter_args[0] if acc is not None else None
            self.builder.insertion_point = InsertPoint.at_end(op.body.block)
        return ivs, fors, acc

    def close_loops(self, fors: list[loop.ForOp], value: SSAValue | None = None) -> SSAValue | None:
        """End the nests of `open_loops` (yielding `value`, the next accumulator); the
        insertion point returns after the outermost loop. Returns the final value."""
        for op in reversed(fors):
            op.body.block.add_op(loop.YieldOp() if value is None else loop.YieldOp(value))
            value = op.res[0] if value is not None else None
        if fors:
            parent = fors[0].parent_block()
            assert parent is not None
            self.builder.insertion_point = InsertPoint.at_end(parent)
        return value

    def index(self, t: TensorType, ivs: Sequence[SSAValue], out: Sequence[int | str]) -> SSAValue:
        """Row-major flat index into a tensor of type `t` read at the point `ivs` of an
        iteration space of dimensions `out`: a scalar reads element 0, a dimension of
        extent 1 against a larger one broadcasts (reads index 0)."""
        if t.is_scalar:
            return self.zero
        linear: SSAValue | None = None
        for d, iv, o in zip(t.dims, ivs, out, strict=True):
            here = self.zero if d == 1 and o != 1 else iv
            if linear is None:
                linear = here
                continue
            if d != 1:
                linear = self.emit(arith.MuliOp(linear, self.extent(d)))
            linear = self.emit(arith.AddiOp(linear, here))
        assert linear is not None
        return linear

    def threads(self, work: Sequence[int | str] | None, emit: Callable[[bool], None]) -> None:
        """`emit(parallel)` the nest of an op whose work is the product of the extents
        `work`: on threads when the work reaches `PARALLEL_WORK` (decided here when
        every extent is static, else by a `loop.if` over both versions); `work` None:
        never on threads."""
        if work is None:
            emit(False)
            return
        if all(isinstance(d, int) for d in work):
            emit(math.prod(d for d in work if isinstance(d, int)) >= PARALLEL_WORK)
            return
        total = self.one
        for d in work:
            total = self.emit(arith.MuliOp(total, self.extent(d)))
        large = self.emit(arith.CmpiOp(total, self.index_const(PARALLEL_WORK), "sge"))
        branch = loop.IfOp(large, [], Block(), Block())
        self.builder.insert(branch)
        after = self.builder.insertion_point
        for region, parallel in ((branch.then_region, True), (branch.else_region, False)):
            self.builder.insertion_point = InsertPoint.at_end(region.block)
            emit(parallel)
            self.builder.insert(loop.YieldOp())
        self.builder.insertion_point = after

    def open_range(self, lb: SSAValue, ub: SSAValue, step: SSAValue, parallel: bool) -> loop.ForOp:
        """One `loop.for` from `lb` to `ub` by `step`; the insertion point moves into its
        body (`close_loops([op])` ends it)."""
        op = loop.ForOp(lb, ub, step, parallel=parallel)
        self.builder.insert(op)
        self.builder.insertion_point = InsertPoint.at_end(op.body.block)
        return op

    def load(self, buffer: SSAValue, index: SSAValue, dtype: str) -> SSAValue:
        return load(self.builder, buffer, [index], dtype)

    def store(self, value: SSAValue, buffer: SSAValue, index: SSAValue, dtype: str) -> None:
        if dtype == "bool" and isinstance(value.type, IntegerType) and value.type.width.data == 1:
            value = self.emit(arith.ExtUIOp(value, i8))
        self.builder.insert(loop.StoreOp(value, buffer, [index]))

    def alloc(self, t: TensorType) -> SSAValue:
        """A fresh buffer for a tensor of type `t`, sized at run time."""
        mtype = MemRefType(storage_type(t.dt), [DYNAMIC_INDEX])
        return self.emit(loop.AllocSizedOp(self.count(t), mtype))


def localize_constants(block: Block) -> None:
    """Give each parallel loop in `block` its own copies of the constants it uses
    (`index_const` makes them once, at the top): an outlined parallel loop receives
    the values it captures at run time, and a loop step or extent LLVM cannot see is 1
    or 16 keeps it from vectorizing."""
    loops = [op for top in block.ops for op in top.walk() if isinstance(op, loop.ForOp)]
    for op in loops:
        if op.parallel is None:
            continue
        copies: dict[SSAValue, SSAValue] = {}
        body = op.body.block
        for inner in list(body.walk()):
            for i, operand in enumerate(inner.operands):
                owner = operand.owner
                if not isinstance(owner, arith.ConstantOp) or _inside(owner, op):
                    continue
                if operand not in copies:
                    copy = owner.clone()
                    Builder(InsertPoint.at_start(body)).insert(copy)
                    copies[operand] = copy.result
                inner.operands[i] = copies[operand]


def _inside(op: Operation, ancestor: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent_op()
    return False
