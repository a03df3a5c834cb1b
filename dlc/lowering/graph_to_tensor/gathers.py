"""Graph -> tensor rules of the gathers and scatters (dlc/dialects/graph_gather.py).

Bounds: before the op, the largest and the smallest index (per component for the ND
forms) are computed by two small reductions over the indices and checked against
[-n, n) by `tensor.index_check ... always`: in every build an index out of range
stops the function with IndexError naming the op's location and the index. Inside
the bodies every index is also clamped into [0, n - 1], so no access is ever out of
bounds whatever the checks see.

Gathers are one `tensor.compute` each: the body reads the index, makes a negative one
count from the end, clamps it and reads the data there (`tensor.read` with an
index computed in the body). A gather of whole rows (an embedding lookup) reads rows
contiguously along the innermost output loop, which is vectorized.

Scatters are defined output element by output element: a reduction over the index
positions finds the updates that hit the element (combined by `by`'s combinator, or,
replacing, the last one that hits) and combines them with the data. This costs
(output elements x index positions) work; scatterElements only scans its own axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from dlc.dialects import graph_gather as gg
from dlc.dialects import tensor
from dlc.dialects import tensor_memory as tm
from dlc.dialects.graph_types import TensorType, dtype_is_float, format_type, numpy_dtype
from dlc.lowering.graph_to_tensor.compute_builder import (
    BodyBuilder,
    Lowered,
    Splat,
    build_compute,
    lowered_type,
)
from dlc.lowering.graph_to_tensor.ops import Rule

I64 = TensorType((), "i64")
HitFn = Callable[[BodyBuilder, Sequence[SSAValue], Sequence[SSAValue]], SSAValue]
"""(body, output indices, index positions) -> i1 / a list of indices."""
AtFn = Callable[[BodyBuilder, Sequence[SSAValue], Sequence[SSAValue]], list[SSAValue]]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _result_type(op: Operation) -> TensorType:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t


def _data_type(op: Operation) -> TensorType:
    t = op.data.type  # type: ignore[attr-defined]
    assert isinstance(t, TensorType)
    return t


def index_value(s: BodyBuilder, raw: SSAValue, dt: str, n: int) -> SSAValue:
    """An index read from the indices (i32 or i64) as i64: a negative one counted from
    the end of an `n` axis, then clamped into [0, n - 1]."""
    k = s.cast(raw, dt, "i64")
    negative = s.cmpi("slt", k, s.index(0))
    k = s.select(negative, s.emit(arith.AddiOp(k, s.index(n))), k)
    k = s.emit(arith.MaxSIOp(k, s.index(0)))
    return s.emit(arith.MinSIOp(k, s.index(max(n - 1, 0))))


def check_indices(
    b: Builder, op: Operation, idx: Lowered, n: int, axis: int, component: int | None = None
) -> None:
    """`tensor.index_check ... always` of the largest and smallest index (of the
    `component`-th entries of the last dimension for the ND forms) against [-n, n)."""
    it = lowered_type(idx)
    dims = it.dims if component is None else it.dims[:-1]
    known = _constant_indices(idx, component)
    if 0 in dims or (known is not None and all(-n <= k < n for k in known)):
        return
    what = f"{op.OPCODE} index into axis {axis} of {format_type(_data_type(op))}"  # type: ignore[attr-defined]
    for comb, init in (("max", INT64_MIN), ("min", INT64_MAX)):

        def body(s: BodyBuilder, _: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
            at = list(r) if component is None else [*r, s.index(component)]
            return s.cast(s.read(idx, at), it.dt, "i64")

        extreme = build_compute(
            b, I64, body, reduction=list(dims), combinator=comb, init=Splat(init, I64)
        )
        b.insert(tm.IndexCheckOp(extreme.result, n, what, lower=-n, always=True))


def _constant_indices(idx: Lowered, component: int | None) -> list[int] | None:
    """The indices (the `component`-th of each tuple) when known at compile time."""
    if isinstance(idx, Splat):
        return [int(idx.value)]
    owner = getattr(idx, "owner", None)
    if not isinstance(owner, tensor.ConstantOp):
        return None
    values = [int(v) for v in owner.values]
    if component is None:
        return values
    depth = lowered_type(idx).dims[-1]
    return values[component::depth]


def lower_gather(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """out[p, i, q] = data[p, clamp(indices[i]), q]"""
    assert isinstance(op, gg.GatherOp)
    data, idx = args
    axis, out, it = op.axis.data, _result_type(op), lowered_type(idx)
    n = lowered_type(data).dims[axis]
    check_indices(b, op, idx, n, axis)
    if n == 0 or out.num_elements == 0:
        return Splat(0, out)

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        k = index_value(s, s.read(idx, i[axis : axis + it.rank]), it.dt, n)
        return s.read(data, [*i[:axis], k, *i[axis + it.rank :]])

    return build_compute(b, out, body).result


def lower_gather_elements(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """out[j] = data[j with j[axis] = clamp(indices[j])]"""
    assert isinstance(op, gg.GatherElementsOp)
    data, idx = args
    axis, out, it = op.axis.data, _result_type(op), lowered_type(idx)
    n = lowered_type(data).dims[axis]
    check_indices(b, op, idx, n, axis)
    if n == 0 or out.num_elements == 0:
        return Splat(0, out)

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        k = index_value(s, s.read(idx, i), it.dt, n)
        return s.read(data, [*i[:axis], k, *i[axis + 1 :]])

    return build_compute(b, out, body).result


def _nd_keys(
    s: BodyBuilder, idx: Lowered, at: Sequence[SSAValue], dims: Sequence[int]
) -> list[SSAValue]:
    """The clamped index tuple indices[at, :] into axes of sizes `dims`."""
    dt = lowered_type(idx).dt
    return [index_value(s, s.read(idx, [*at, s.index(t)]), dt, n) for t, n in enumerate(dims)]


def lower_gather_nd(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """out[B, i, q] = data[B, clamp(indices[B, i, :]), q]"""
    assert isinstance(op, gg.GatherNDOp)
    data, idx = args
    batch, out, it, dims = op.batch_dims.data, _result_type(op), lowered_type(idx), _data_type(op)
    depth, lead = it.dims[-1], it.rank - 1
    axes = dims.dims[batch : batch + depth]
    for t, n in enumerate(axes):
        check_indices(b, op, idx, n, batch + t, t)
    if 0 in axes or out.num_elements == 0:
        return Splat(0, out)

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        keys = _nd_keys(s, idx, i[:lead], axes)
        return s.read(data, [*i[:batch], *keys, *i[lead:]])

    return build_compute(b, out, body).result


def _identity(reduction: str, dt: str) -> int | float:
    """The unit of a scatter combinator on `dt`: 0, 1, or the lowest (max) or highest
    (min) value of the type."""
    if reduction in ("add", "multiply"):
        return 0 if reduction == "add" else 1
    if dtype_is_float(dt):
        return -math.inf if reduction == "max" else math.inf
    info = np.iinfo(numpy_dtype(dt))
    return int(info.min) if reduction == "max" else int(info.max)


@dataclass(frozen=True)
class Scatter:
    """What both scatters share: `hit(s, i, r)` (i1: the update at index position r
    lands on output element i) and `at(s, i, r)` (that update's indices into the
    updates), over index positions of extents `extents` (r: i64 values)."""

    extents: Sequence[int]
    hit: HitFn
    at: AtFn

    def positions(self, r: Sequence[SSAValue]) -> list[SSAValue]:
        """The index position (none for a single position: the reduction runs over
        one dummy axis of extent 1)."""
        return list(r) if self.extents else []


def _scatter(b: Builder, op: Operation, args: list[Lowered], parts: Scatter) -> Lowered:
    reduction = op.reduction  # type: ignore[attr-defined]
    if reduction is None:
        return _replace(b, op, args, parts)
    return _combine(b, op, args, parts, reduction.data)


def _replace(b: Builder, op: Operation, args: list[Lowered], parts: Scatter) -> Lowered:
    """out[i] = updates[at(i, w)] for the last position w that hits i, else data[i]."""
    updates, data = args[0], args[1]
    out, red = _result_type(op), list(parts.extents) or [1]

    def last(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        flat = s.index(0)
        for index, n in zip(parts.positions(r), red, strict=False):
            flat = s.emit(arith.AddiOp(s.emit(arith.MuliOp(flat, s.index(n))), index))
        return s.select(parts.hit(s, i, parts.positions(r)), flat, s.index(-1))

    winner = build_compute(
        b, out.with_dtype("i64"), last, reduction=red, combinator="max", init=Splat(-1, I64)
    ).result

    def pick(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        w = s.read(winner, i)
        flat = s.emit(arith.MaxSIOp(w, s.index(0)))
        r: list[SSAValue] = []
        for n in reversed(parts.extents):
            r.insert(0, s.emit(arith.RemSIOp(flat, s.index(n))))
            flat = s.emit(arith.DivSIOp(flat, s.index(n)))
        new = s.read(updates, parts.at(s, i, r))
        return s.select(s.cmpi("sge", w, s.index(0)), new, s.read(data, i))

    return build_compute(b, out, pick).result


def _combine(
    b: Builder, op: Operation, args: list[Lowered], parts: Scatter, reduction: str
) -> Lowered:
    """out[i] = data[i] (r) fold_r(hit ? updates[at(i, r)] : unit), r the reduction."""
    updates, data = args[0], args[1]
    out = _result_type(op)
    unit = Splat(_identity(reduction, out.dt), TensorType((), out.dt))

    def combined(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        new = s.read(updates, parts.at(s, i, parts.positions(r)))
        return s.select(parts.hit(s, i, parts.positions(r)), new, s.read(unit, []))

    red = list(parts.extents) or [1]
    acc = build_compute(b, out, combined, reduction=red, combinator=reduction, init=unit).result
    return build_compute(
        b, out, lambda s, i, _: s.binary(reduction, out.dt, s.read(data, i), s.read(acc, i))
    ).result


def lower_scatter_elements(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """out[j] = data[j] combined with the updates u[p] whose p equals j off the axis
    and whose clamp(indices[p]) equals j[axis]."""
    assert isinstance(op, gg.ScatterElementsOp)
    idx, axis, dims = args[2], op.axis.data, _data_type(op).dims
    it = lowered_type(idx)
    n = dims[axis]
    check_indices(b, op, idx, n, axis)
    if it.num_elements == 0:
        return args[1]
    short = [d for d in range(len(dims)) if d != axis and it.dims[d] < dims[d]]

    def at(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> list[SSAValue]:
        pos = [r[0] if d == axis else v for d, v in enumerate(i)]
        for d in short:
            pos[d] = s.emit(arith.MinSIOp(pos[d], s.index(it.dims[d] - 1)))
        return pos

    def hit(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        k = index_value(s, s.read(idx, at(s, i, r)), it.dt, n)
        cond = s.cmpi("eq", k, i[axis])
        for d in short:
            cond = s.emit(arith.AndIOp(cond, s.cmpi("slt", i[d], s.index(it.dims[d]))))
        return cond

    return _scatter(b, op, args, Scatter([it.dims[axis]], hit, at))


def lower_scatter_nd(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """out[k, q] = data[k, q] combined with the updates u[r, q] whose
    clamp(indices[r, :]) equals k."""
    assert isinstance(op, gg.ScatterNDOp)
    idx, dims = args[2], _data_type(op).dims
    it = lowered_type(idx)
    depth, lead = it.dims[-1], it.dims[:-1]
    for t in range(depth):
        check_indices(b, op, idx, dims[t], t, t)
    if 0 in lead:
        return args[1]

    def hit(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        cond = s.all_equal([], [])
        for key, v in zip(_nd_keys(s, idx, r, dims[:depth]), i, strict=False):
            cond = s.emit(arith.AndIOp(cond, s.cmpi("eq", key, v)))
        return cond

    return _scatter(b, op, args, Scatter(lead, hit, lambda s, i, r: [*r, *i[depth:]]))


RULES: dict[type[Operation], Rule] = {
    gg.GatherOp: lower_gather,
    gg.GatherElementsOp: lower_gather_elements,
    gg.GatherNDOp: lower_gather_nd,
    gg.ScatterElementsOp: lower_scatter_elements,
    gg.ScatterNDOp: lower_scatter_nd,
}
