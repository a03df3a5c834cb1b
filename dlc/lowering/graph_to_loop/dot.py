"""`dot` over run-time extents for `lower-graph-to-loop{optimize=true}`: the
result in tiles of `ROWS` x `COLS` elements summed in registers, the row blocks a
parallel loop over a run-time trip count, the rows left over (fewer than a tile: a
run-time remainder) in one tile of as many rows, the columns left over in tiles of one
column.

A tile's elements are loop-carried accumulators of one k loop:

    acc[r, c] = 0;  for k: acc[r, c] += lhs[i0 + r, k] * rhs[k, j0 + c];  out[...] = acc

so every element is still summed from 0 in k order (the plain nest's order; `fma` lets
LLVM fuse each multiply-add, as the static schedule does). Each `lhs` element is loaded
once for `COLS` products and each `rhs` element once for `ROWS`: the scalar tile is
what LLVM's SLP vectorizer turns into vector registers, whatever their width.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Block, SSAValue

from dlc.dialects import loop
from dlc.dialects.graph_literal import dense_dtype
from dlc.dialects.graph_tensor import DotOp
from dlc.dialects.graph_types import TensorType
from dlc.lowering.graph_to_loop.literals import dense_data
from dlc.lowering.graph_to_loop.nests import NestEmitter, buffer_type
from dlc.lowering.scalar_ops import mark_contractible
from dlc.target import Target

ROWS = 4
COLS = 8
"""A tile of scalars (integers, 16-bit floats): `ROWS` x `COLS` accumulators."""

VECTOR_ROWS = 6
VECTORS = 2
"""A tile of f32 or f64: `VECTOR_ROWS` rows of `VECTORS` vectors of the target's width,
12 accumulators, 2 `rhs` vectors and a broadcast `lhs` element in 16 registers."""

LANE_BYTES = {"f32": 4, "f64": 8}

PACK_ROWS = 16
"""The fewest rows a product packs its `rhs` panels for (`pack`): fewer rows read each
`rhs` element too few times to pay for the copy."""

K_BLOCK = 256
"""The k's a vector tile's row blocks walk before the next block (`k_blocks`): a `rhs`
panel of 256 rows x 2 vectors stays in L1, 256 rows of `rhs` on few pages."""

Reader = Callable[[SSAValue, list[SSAValue], tuple[int | str, ...]], SSAValue]


class DotEmitter:
    """One `dot` in tiles (module docstring); `read` loads an element of a graph value
    at a point of an iteration space."""

    def __init__(
        self,
        nest: NestEmitter,
        op: DotOp,
        out: SSAValue,
        read: Reader,
        buffers: Mapping[SSAValue, SSAValue],
        options: tuple[bool, Target],
    ):
        self.nest, self.op, self.out, self.read, self.buffers = nest, op, out, read, buffers
        self.fma, target = options
        lhs, rhs, t = op.lhs.type, op.rhs.type, op.result.type
        assert isinstance(lhs, TensorType) and isinstance(rhs, TensorType)
        assert isinstance(t, TensorType)
        self.lhs, self.rhs, self.t = lhs, rhs, t
        self.batch: list[SSAValue] = []  # the batch indices of a batched product
        self.panels: SSAValue | None = None  # the packed rhs (`pack`), when packed
        self.panel: SSAValue = nest.zero  # the column tile being computed
        self.const_panels: SSAValue | None = None  # `constant_panels`, once made
        vectors = t.dt in LANE_BYTES and op.rhs in buffers and rhs.dims[-1] == t.dims[-1]
        self.lanes = target.vector_bytes // LANE_BYTES[t.dt] if vectors else 0
        self.rows = VECTOR_ROWS if self.lanes else ROWS
        self.cols = VECTORS * self.lanes if self.lanes else COLS

    def emit(self, parallel: bool) -> None:
        """A batched product: a loop over the batch (in parallel) around one product
        a step."""
        batch = self.t.dims[:-2]
        if all(d == 1 for d in batch):  # (a batch of one: its rows and columns on threads)
            self.batch = [self.nest.zero] * len(batch)
            self.packed_or_not(parallel)
            return
        ivs, fors, _ = self.nest.open_loops([self.nest.extent(d) for d in batch], parallel=parallel)
        self.batch = ivs
        self.product(False)
        self.nest.close_loops(fors)

    def packed_or_not(self, parallel: bool) -> None:
        """The product, with the `rhs` panels packed (`pack`) when the rows are at least
        `PACK_ROWS` (decided here for a static extent, by a `loop.if` otherwise)."""
        rows = self.t.dims[-2]
        if self.lanes and self.constant_panels() is not None:
            self.product(parallel, True)
        elif not (self.k_blocked() and self.lanes):
            self.product(parallel)
        elif isinstance(rows, int):
            self.product(parallel, rows >= PACK_ROWS)
        else:
            nest = self.nest
            many = nest.emit(arith.CmpiOp(nest.extent(rows), nest.index_const(PACK_ROWS), "sge"))
            branch = loop.IfOp(many, [], Block(), Block())
            nest.builder.insert(branch)
            after = nest.builder.insertion_point
            for region, packed in ((branch.then_region, True), (branch.else_region, False)):
                nest.builder.insertion_point = InsertPoint.at_end(region.block)
                self.product(parallel, packed)
                nest.builder.insert(loop.YieldOp())
            nest.builder.insertion_point = after

    def constant_panels(self) -> SSAValue | None:
        """The panels of `pack` made at compile time, for a literal `rhs` (weights):
        a read-only buffer beside the literal's (made once for the op's versions)."""
        if self.const_panels is not None or self.rhs.is_dynamic:
            return self.const_panels
        source = self.buffers.get(self.op.rhs)
        literal = source.owner if source is not None else None
        k, n = self.rhs.dims[-2:]
        if not isinstance(literal, loop.ConstBufferOp) or n < self.cols:
            return None
        assert isinstance(k, int) and isinstance(n, int)
        tiles = n // self.cols
        data = np.frombuffer(literal.value.data.data, dense_dtype(self.t.dt)).reshape(k, n)
        panels = data[:, : tiles * self.cols].reshape(k, tiles, self.cols).transpose(1, 0, 2)
        t = TensorType([panels.size], self.t.dt)
        op = loop.ConstBufferOp(
            dense_data(t, np.ascontiguousarray(panels).tobytes()), buffer_type(t)
        )
        Builder(InsertPoint.after(literal)).insert(op)
        self.const_panels = op.res
        return op.res

    def pack(self, parallel: bool) -> SSAValue:
        """`P[jb, k, c] = rhs[k, jb * cols + c]` for the full column tiles `jb`: each
        tile's k rows one after the other (no stride of a `rhs` row between them, no
        cache sets or pages shared by all of them)."""
        nest, lanes = self.nest, self.lanes
        k_extent = nest.extent(self.lhs.dims[-1])
        width = nest.index_const(self.cols)
        count = nest.emit(arith.MuliOp(nest.emit(arith.MuliOp(self.blocks[1], k_extent)), width))
        packed = nest.emit(loop.AllocSizedOp(count, buffer_type(TensorType(["n"], self.t.dt))))
        (jb, k), fors, _ = nest.open_loops([self.blocks[1], k_extent], parallel=parallel)
        (j,) = self.run(jb, 1, self.cols)
        source = nest.index(self.rhs, [*self.batch, k, j], self.rhs.dims)
        row = nest.emit(
            arith.MuliOp(nest.emit(arith.AddiOp(nest.emit(arith.MuliOp(jb, k_extent)), k)), width)
        )
        for v in range(VECTORS):
            offset = nest.index_const(v * lanes)
            at = nest.emit(arith.AddiOp(source, offset))
            value = nest.emit(loop.VLoadOp(self.buffers[self.op.rhs], [at], lanes))
            nest.builder.insert(
                loop.VStoreOp(value, packed, [nest.emit(arith.AddiOp(row, offset))])
            )
        nest.close_loops(fors)
        return packed

    def product(self, parallel: bool, packed: bool = False) -> None:
        """Column tiles over all rows (in parallel), then the columns left over in
        row blocks (in parallel), then the corner: each `rhs` panel of a tile's
        columns stays in cache while the row blocks pass over it. A part a static
        extent leaves empty is not emitted."""
        nest = self.nest
        self.extents = [nest.extent(d) for d in self.t.dims[-2:]]
        self.blocks = [
            nest.emit(arith.DivUIOp(e, nest.index_const(size)))
            for e, size in zip(self.extents, (self.rows, self.cols), strict=True)
        ]
        self.done = [
            nest.emit(arith.MuliOp(b, nest.index_const(size)))
            for b, size in zip(self.blocks, (self.rows, self.cols), strict=True)
        ]
        (full_rows, rest_rows), (full_cols, rest_cols) = (
            _parts(d, size)
            for d, size in zip(self.t.dims[-2:], (self.rows, self.cols), strict=True)
        )
        self.panels = self.constant_panels() if packed else None
        owned = packed and full_cols and self.panels is None
        if owned:
            self.panels = self.pack(parallel)
        if full_cols:
            self.column_tiles(full_rows, rest_rows, parallel)
        if owned and self.panels is not None:
            nest.builder.insert(loop.DeallocOp(self.panels))
        self.panels = None
        if rest_cols and full_rows:
            (b,), fors, _ = nest.open_loops([self.blocks[0]], parallel=parallel)
            j = nest.open_range(self.done[1], self.extents[1], nest.one, parallel=False)
            self.tile(self.run(b, self.rows, 1), [j.iv])
            nest.close_loops([*fors, j])
        if rest_cols and rest_rows:
            i = nest.open_range(self.done[0], self.extents[0], nest.one, parallel=False)
            j = nest.open_range(self.done[1], self.extents[1], nest.one, parallel=False)
            self.tile([i.iv], [j.iv])
            nest.close_loops([i, j])

    def column_tiles(self, full_rows: bool, rest_rows: bool, parallel: bool) -> None:
        """The full column tiles, a parallel loop: row blocks, then the rows left."""
        nest = self.nest
        (jb,), fors, _ = nest.open_loops([self.blocks[1]], parallel=parallel)
        cols = self.columns(jb)
        self.panel = jb
        if full_rows and self.k_blocked():
            self.k_blocks(cols)
        elif full_rows:
            (b,), inner, _ = nest.open_loops([self.blocks[0]])
            self.tile(self.run(b, self.rows, 1), cols, self.lanes)
            nest.close_loops(inner)
        if rest_rows:
            self.rest_rows(cols)
        nest.close_loops(fors)

    def rest_rows(self, cols: list[SSAValue]) -> None:
        """The rows left after the row blocks, fewer than `rows`, in one tile of that
        many rows, each `rhs` element loaded once for all of them (`rows_left`): for a
        run-time row count, a `loop.if` per count from `rows` - 1 down to 2, and a loop
        over the one row or none left in the innermost `else`."""
        nest, rows = self.nest, self.t.dims[-2]
        if isinstance(rows, int):
            self.rows_left(rows % self.rows, cols)
            return
        left = nest.emit(arith.SubiOp(self.extents[0], self.done[0]))
        closing: list[InsertPoint] = []
        for count in range(self.rows - 1, 1, -1):
            same = nest.emit(arith.CmpiOp(left, nest.index_const(count), "eq"))
            branch = loop.IfOp(same, [], Block(), Block())
            nest.builder.insert(branch)
            closing.append(nest.builder.insertion_point)
            nest.builder.insertion_point = InsertPoint.at_end(branch.then_region.block)
            self.rows_left(count, cols)
            nest.builder.insert(loop.YieldOp())
            nest.builder.insertion_point = InsertPoint.at_end(branch.else_region.block)
        self.rows_left(1, cols)
        for after in reversed(closing):
            nest.builder.insert(loop.YieldOp())
            nest.builder.insertion_point = after

    def rows_left(self, count: int, cols: list[SSAValue]) -> None:
        """`count` rows from the end of the row blocks in one tile; for 1, a loop from
        there to the last row (one row or none)."""
        nest, first = self.nest, self.done[0]
        if count == 1:
            i = nest.open_range(first, self.extents[0], nest.one, parallel=False)
            self.tile([i.iv], cols, self.lanes)
            nest.close_loops([i])
            return
        rest = (nest.emit(arith.AddiOp(first, nest.index_const(r))) for r in range(1, count))
        self.tile([first, *rest], cols, self.lanes)

    def k_blocked(self) -> bool:
        """Whether the row blocks of a column tile walk k in blocks of `K_BLOCK`: vector
        tiles whose inner extent may exceed it (one `rhs` panel of a tile's columns, k
        rows a row of `rhs` apart, would miss the caches and the TLB)."""
        k = self.lhs.dims[-1]
        return bool(self.lanes) and (isinstance(k, str) or k > K_BLOCK)

    def k_blocks(self, cols: list[SSAValue]) -> None:
        """For each block of `K_BLOCK` k's, every row block's tile: its accumulators
        start from 0 in the first block and from what the last block stored after it,
        so each element is still summed from 0 in k order."""
        nest = self.nest
        k_extent = nest.extent(self.lhs.dims[-1])
        step = nest.index_const(K_BLOCK)
        kb = nest.open_range(nest.zero, k_extent, step, parallel=False)
        end = nest.emit(arith.AddiOp(kb.iv, step))
        end = nest.emit(arith.MinSIOp(end, k_extent))
        first = nest.emit(arith.CmpiOp(kb.iv, nest.zero, "eq"))
        (b,), inner, _ = nest.open_loops([self.blocks[0]])
        self.tile(self.run(b, self.rows, 1), cols, self.lanes, (kb.iv, end, first))
        nest.close_loops([kb, *inner])

    def run(self, block: SSAValue, count: int, stride: int) -> list[SSAValue]:
        """The first index of block number `block` (`count` x `stride` wide) and the
        indices `stride` apart after it."""
        nest = self.nest
        first = nest.emit(arith.MuliOp(block, nest.index_const(count * stride)))
        rest = (
            nest.emit(arith.AddiOp(first, nest.index_const(r * stride))) for r in range(1, count)
        )
        return [first, *rest]

    def columns(self, tile: SSAValue) -> list[SSAValue]:
        """The columns of column tile `tile`: scalar columns, or where each vector starts."""
        if self.lanes:
            return self.run(tile, VECTORS, self.lanes)
        return self.run(tile, COLS, 1)

    def tile(
        self,
        rows: list[SSAValue],
        cols: list[SSAValue],
        lanes: int = 0,
        k_range: tuple[SSAValue, SSAValue, SSAValue] | None = None,
    ) -> None:
        """`out[rows x cols]`: accumulators carried through one k loop, then stored;
        with `lanes`, each of `cols` starts a vector of `lanes` columns. `k_range`
        (vector tiles): k from, k to, and whether it is the first block (accumulators
        from 0, else from `out`)."""
        nest, t = self.nest, self.t
        zero = nest.scalars.const(0, t.dt)
        if lanes:
            zero = nest.emit(loop.BroadcastOp(zero, lanes))
        count = len(rows) * len(cols)
        start, stop = nest.zero, nest.extent(self.lhs.dims[-1])
        inits = [zero] * count
        if k_range is not None:
            start, stop, first = k_range
            inits = [nest.emit(arith.SelectOp(first, zero, v)) for v in self.partial(rows, cols)]
        k_loop = loop.ForOp(start, stop, nest.one, inits)
        nest.builder.insert(k_loop)
        after = nest.builder.insertion_point
        nest.builder.insertion_point = InsertPoint.at_end(k_loop.body.block)
        k = k_loop.iv
        scales = [self.read(self.op.lhs, [*self.batch, i, k], self.lhs.dims) for i in rows]
        if lanes:
            scales = [nest.emit(loop.BroadcastOp(a, lanes)) for a in scales]
            rhs, at = self.rhs_vectors(k, cols)
            elements = [nest.emit(loop.VLoadOp(rhs, [i], lanes)) for i in at]
        else:
            elements = [self.read(self.op.rhs, [*self.batch, k, j], self.rhs.dims) for j in cols]
        pairs = ((a, b) for a in scales for b in elements)
        sums = [self.multiply_add(acc, a, b) for acc, (a, b) in zip(k_loop.iter_args, pairs)]
        nest.builder.insert(loop.YieldOp(*sums))
        nest.builder.insertion_point = after
        self.store(rows, cols, list(k_loop.res), lanes)

    def store(
        self, rows: list[SSAValue], cols: list[SSAValue], values: list[SSAValue], lanes: int
    ) -> None:
        """The sums of a tile into `out[rows x cols]` (vectors of `lanes` when given)."""
        nest, t = self.nest, self.t
        points = [(i, j) for i in rows for j in cols]
        for (i, j), value in zip(points, values, strict=True):
            where = nest.index(t, [*self.batch, i, j], t.dims)
            if lanes:
                nest.builder.insert(loop.VStoreOp(value, self.out, [where]))
            else:
                nest.store(value, self.out, where, t.dt)

    def rhs_vectors(self, k: SSAValue, cols: list[SSAValue]) -> tuple[SSAValue, list[SSAValue]]:
        """The buffer and the indices of the `rhs` vectors at row `k` and columns
        `cols`: in the packed panels (`pack`) when there are, else in `rhs`."""
        nest = self.nest
        if self.panels is None or len(cols) != VECTORS:
            at = [nest.index(self.rhs, [*self.batch, k, j], self.rhs.dims) for j in cols]
            return self.buffers[self.op.rhs], at
        k_extent = nest.extent(self.lhs.dims[-1])
        row = nest.emit(arith.AddiOp(nest.emit(arith.MuliOp(self.panel, k_extent)), k))
        first = nest.emit(arith.MuliOp(row, nest.index_const(self.cols)))
        rest = [
            nest.emit(arith.AddiOp(first, nest.index_const(v * self.lanes)))
            for v in range(1, VECTORS)
        ]
        return self.panels, [first, *rest]

    def partial(self, rows: list[SSAValue], cols: list[SSAValue]) -> list[SSAValue]:
        """The vectors of `out[rows x cols]` an earlier k block stored."""
        nest, t = self.nest, self.t
        points = [nest.index(t, [*self.batch, i, j], t.dims) for i in rows for j in cols]
        return [nest.emit(loop.VLoadOp(self.out, [at], self.lanes)) for at in points]

    def multiply_add(self, acc: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        """`acc + a * b` (scalars or vectors), fused by LLVM where `fma` allows."""
        if isinstance(a.type, VectorType):
            product = self.nest.emit(arith.MulfOp(a, b))
            total = self.nest.emit(arith.AddfOp(acc, product))
        else:
            product = self.nest.scalars.binary("multiply", self.t.dt, a, b)
            total = self.nest.scalars.binary("add", self.t.dt, acc, product)
        if self.fma and isinstance(total.owner, arith.AddfOp):
            mark_contractible(total.owner, product)
        return total


def _parts(d: int | str, size: int) -> tuple[bool, bool]:
    """Whether an extent `d` may have full blocks of `size`, and a partial one."""
    if isinstance(d, str):
        return True, True
    return d >= size, d % size != 0
