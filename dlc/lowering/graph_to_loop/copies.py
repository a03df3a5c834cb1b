"""`concatenate` and `slice` with symbolic dimensions (`lower-graph-to-loop`): copies
at offsets. A concatenation copies each operand into its place in the result,
`out[..., offset_j + i, ...] = x_j[..., i, ...]`, where `offset_j` is the sum of the
extents of the operands before it along the axis (run-time values when they are
symbolic: a KV cache `<%past x ...>` and the new token's `<1 x ...>` make `<%past+1 x
...>`).

A copy is one nest over its operand's dimensions (on threads from `PARALLEL_WORK`
elements when optimized); the dimensions before the axis and the offset place its
rows, so each nest's innermost loop is a contiguous run of both buffers. A slice
(`slice %x from L upto U`, rows of dimension 0: a static extent) copies rows L..U,
`out[i, ...] = x[L + i, ...]`.

A `transpose` (all axes reversed) is `out[i0, ..., ik] = x[ik, ..., i0]`: `out`'s
last axis is `x`'s first. Optimized, from rank 2, the two axes that are contiguous in
one buffer and strided in the other (`out`'s first and last) are cut in blocks of
`TRANSPOSE_BLOCK` (run-time remainders: each block ends at the least of its end and
the extent): a block reads and writes `TRANSPOSE_BLOCK` lines of each buffer, all in
L1, instead of one element per line of `x` along all of `out`'s last axis.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from dlc.dialects import loop
from dlc.dialects.graph_tensor import ConcatenateOp, SliceOp, TransposeOp
from dlc.dialects.graph_types import TensorType
from dlc.lowering.graph_to_loop.nests import NestEmitter

TRANSPOSE_BLOCK = 16
"""The side of a block of a transpose, in elements (module doc): one 64-byte line of
`f32`; 16 lines of each buffer in a block."""

TRANSPOSE_LINES = 256
"""The most lines of `x` (16 KiB) a transpose reads in a plain nest before it reads
the next element of each (module doc): more, and it is blocked."""

Reader = Callable[[SSAValue, list[SSAValue], tuple[int | str, ...]], SSAValue]


def concat_nests(
    nest: NestEmitter, op: ConcatenateOp, out: SSAValue, read: Reader, optimize: bool
) -> None:
    """The copies of `op`'s operands into `out` (module doc)."""
    t = op.result.type
    assert isinstance(t, TensorType)
    axis = op.axis.data
    offset = nest.zero
    for operand in op.inputs:
        x = operand.type
        assert isinstance(x, TensorType)

        def copy(
            parallel: bool, operand: SSAValue = operand, x: TensorType = x, start: SSAValue = offset
        ) -> None:
            extents = [nest.extent(d) for d in x.dims]
            ivs, fors, _ = nest.open_loops(extents, parallel=parallel)
            value = read(operand, ivs, x.dims)
            place = list(ivs)
            if start is not nest.zero:
                place[axis] = nest.emit(arith.AddiOp(ivs[axis], start))
            nest.store(value, out, nest.index(t, place, t.dims), t.dt)
            nest.close_loops(fors)

        nest.threads(x.dims if optimize else None, copy)
        extent = nest.extent(x.dims[axis])
        offset = extent if offset is nest.zero else nest.emit(arith.AddiOp(offset, extent))


def slice_nest(nest: NestEmitter, op: SliceOp, out: SSAValue, read: Reader, optimize: bool) -> None:
    """`out[i, ...] = x[lower + i, ...]` over the result's dimensions."""
    t, x = op.result.type, op.operand.type
    assert isinstance(t, TensorType) and isinstance(x, TensorType)
    start = nest.index_const(op.lower.data)

    def copy(parallel: bool) -> None:
        ivs, fors, _ = nest.open_loops([nest.extent(d) for d in t.dims], parallel=parallel)
        row = nest.emit(arith.AddiOp(ivs[0], start)) if op.lower.data else ivs[0]
        value = read(op.operand, [row, *ivs[1:]], x.dims)
        nest.store(value, out, nest.index(t, ivs, t.dims), t.dt)
        nest.close_loops(fors)

    nest.threads(t.dims if optimize else None, copy)


def transpose_nest(
    nest: NestEmitter, op: TransposeOp, out: SSAValue, read: Reader, options: tuple[bool, bool]
) -> None:
    """`out[i0, ..., ik] = x[ik, ..., i0]`: a nest over the result's dimensions, in
    blocks when optimized (module doc); `options`: optimized, and whether `read` walks
    the rows of what it reads along `out`'s last axis (`views.View.walks_rows`: a plain
    nest copies rows)."""
    optimize, rows = options
    t, x = op.result.type, op.operand.type
    assert isinstance(t, TensorType) and isinstance(x, TensorType)
    axes = [a for a, d in enumerate(t.dims) if d != 1]  # (static 1s: index 0)

    def permute(parallel: bool) -> None:
        extents = [nest.extent(d) for d in t.dims]
        if not optimize or rows or not _strided(t, axes):
            ivs, fors, _ = nest.open_loops(extents, parallel=parallel)
        else:
            ivs, fors = _blocks(nest, extents, axes, parallel)
        nest.store(read(op.operand, ivs[::-1], x.dims), out, nest.index(t, ivs, t.dims), t.dt)
        nest.close_loops(fors)

    nest.threads(t.dims if optimize else None, permute)


def _strided(t: TensorType, axes: list[int]) -> bool:
    """Whether a plain nest would touch more than `TRANSPOSE_LINES` lines of `x` before
    its next step along `x`'s rows (`out`'s first axis): the elements of all the other
    axes (a symbolic extent: maybe)."""
    lines = 1
    for a in axes[1:]:
        d = t.dims[a]
        if isinstance(d, str):
            return True
        lines *= d
    return len(axes) > 1 and lines > TRANSPOSE_LINES


def _blocks(
    nest: NestEmitter, extents: list[SSAValue], axes: list[int], parallel: bool
) -> tuple[list[SSAValue], list[loop.ForOp]]:
    """The loops of a blocked transpose over the axes `axes` of `extents` (the others
    of extent 1): blocks of the first and the last, the axes between, then each
    block's elements. Returns every axis's index and the loops, outermost first."""
    size = nest.index_const(TRANSPOSE_BLOCK)
    ivs = [nest.zero] * len(extents)
    head, tail = axes[0], axes[-1]
    first = nest.open_range(nest.zero, extents[head], size, parallel=parallel)
    middle, fors, _ = nest.open_loops([extents[a] for a in axes[1:-1]])
    last = nest.open_range(nest.zero, extents[tail], size, parallel=False)
    inner = []
    for block, a in ((first, head), (last, tail)):
        end = nest.emit(arith.MinSIOp(nest.emit(arith.AddiOp(block.iv, size)), extents[a]))
        inner.append(nest.open_range(block.iv, end, nest.one, parallel=False))
        ivs[a] = inner[-1].iv
    for a, iv in zip(axes[1:-1], middle, strict=True):
        ivs[a] = iv
    return ivs, [first, *fors, last, *inner]
