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
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from dlc.dialects.graph_tensor import ConcatenateOp, SliceOp
from dlc.dialects.graph_types import TensorType
from dlc.lowering.graph_to_loop.nests import NestEmitter

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
