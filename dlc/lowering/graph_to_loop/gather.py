"""`gather` of a static table at indices of symbolic shape (`lower-graph-to-loop`): an
embedding lookup, `out[p, i, q] = data[p, indices[i], q]`.

Every index is checked against [-n, n) first, in a serial loop (a `loop.raw_check ...
always`: an index out of range stops the call with IndexError naming the op, in every
build, as for static shapes); the copy nest reads each index again, negative ones
counted from the end and clamped into [0, n - 1], so no access is out of bounds.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects import loop_memory as lm
from dlc.dialects.graph_gather import GatherOp
from dlc.dialects.graph_types import TensorType, format_type
from dlc.lowering.graph_to_loop.nests import NestEmitter

Reader = Callable[[SSAValue, list[SSAValue], tuple[int | str, ...]], SSAValue]


def _index(nest: NestEmitter, raw: SSAValue, dt: str, n: int) -> SSAValue:
    """Index `raw` (i32/i64) as i64, negative counted from the end, clamped."""
    s = nest.scalars
    k = s.cast(raw, dt, "i64")
    negative = s.cmpi("slt", k, nest.zero)
    k = s.select(negative, nest.emit(arith.AddiOp(k, nest.index_const(n))), k)
    k = nest.emit(arith.MaxSIOp(k, nest.zero))
    return nest.emit(arith.MinSIOp(k, nest.index_const(max(n - 1, 0))))


def check_indices(nest: NestEmitter, op: GatherOp, read: Reader) -> None:
    """A serial loop over the indices checking each against [-n, n)."""
    data, idx = op.operands[0].type, op.operands[1].type
    assert isinstance(data, TensorType) and isinstance(idx, TensorType)
    n = data.dims[op.axis.data]
    assert isinstance(n, int)
    ivs, fors, _ = nest.open_loops([nest.extent(d) for d in idx.dims])
    k = nest.scalars.cast(read(op.operands[1], ivs, idx.dims), idx.dt, "i64")
    what = f"gather index into axis {op.axis.data} of {format_type(data)}"
    args = [k, nest.zero, nest.zero, nest.index_const(max(2 * n - 1, 0))]
    check = lm.RawCheckOp(args, what, offset=-n, always=True)
    copy_loc(op, check)
    nest.builder.insert(check)
    nest.close_loops(fors)


def gather_nest(
    nest: NestEmitter, op: GatherOp, out: SSAValue, read: Reader, parallel: bool
) -> None:
    """`out[p, i, q] = data[p, clamp(indices[i]), q]` over the result's dimensions."""
    data, idx, t = op.operands[0].type, op.operands[1].type, op.results[0].type
    assert isinstance(data, TensorType) and isinstance(idx, TensorType)
    assert isinstance(t, TensorType)
    axis = op.axis.data
    n = data.dims[axis]
    assert isinstance(n, int)
    ivs, fors, _ = nest.open_loops([nest.extent(d) for d in t.dims], parallel=parallel)
    before, at, after = ivs[:axis], ivs[axis : axis + idx.rank], ivs[axis + idx.rank :]
    k = _index(nest, read(op.operands[1], at, idx.dims), idx.dt, n)
    value = read(op.operands[0], [*before, k, *after], data.dims)
    nest.store(value, out, nest.index(t, ivs, t.dims), t.dt)
    nest.close_loops(fors)
