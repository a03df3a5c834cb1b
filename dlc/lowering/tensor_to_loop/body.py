"""Scalar pieces of the tensor -> loop lowering: buffer types, loads, stores, and a
compute body inlined at an index point (its reads become loads) or at W consecutive
points of one axis at once (vector lanes, `inline_body_lanes`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, VectorType, i1, i8
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.analysis.tensor_lanes import READ_KINDS, vector_pieces
from dlc.dialects import loop, tensor
from dlc.dialects.graph_types import TensorType
from dlc.lowering.scalar_ops import ScalarBuilder
from dlc.lowering.tensor_to_loop import constants
from dlc.lowering.tensor_to_loop import loop_ops as ops
from dlc.lowering.tensor_to_loop.constants import SHARED, constant, loaded, made, offset, shared


def storage_type(dtype: str) -> Attribute:
    """The element type of a buffer of `dtype` (bool is stored as i8)."""
    return i8 if dtype == "bool" else tensor.scalar_type(dtype)


def memref_type(t: Attribute) -> MemRefType:
    """The buffer of a tensor: same shape, bool stored as i8."""
    assert isinstance(t, TensorType)
    return MemRefType(storage_type(t.dt), t.dims)


def load(b: Builder, buffer: SSAValue, indices: Sequence[SSAValue], dtype: str) -> SSAValue:
    """loop.load, with bool i8 -> i1."""
    value = loaded(b, (buffer, tuple(indices), 1), lambda: ops.load(buffer, indices)).results[0]
    if dtype == "bool":
        value = b.insert(arith.TruncIOp(value, i1)).result
    return value


def store(
    b: Builder, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue], dtype: str
) -> None:
    """loop.store, with bool i1 -> i8."""
    if dtype == "bool":
        value = b.insert(arith.ExtUIOp(value, i8)).result
    b.insert(ops.store(value, buffer, indices))


def index(b: Builder, value: int) -> SSAValue:
    """The function's i64 constant `value` (`constants.py`)."""
    return constants.index(b, value)


def dtype_of(value: SSAValue) -> str:
    t = value.type
    assert isinstance(t, TensorType)
    return t.dt


def inline_body(
    b: Builder,
    op: tensor.ComputeOp,
    indices: Sequence[SSAValue],
    buffers: Mapping[SSAValue, SSAValue],
    known: Mapping[SSAValue, SSAValue] = {},
    reads: Mapping[Operation, Callable[..., SSAValue]] = {},
) -> SSAValue:
    """Inline `op`'s body at `indices` (output then reduction indices); reads of
    `known` tensors use their values (registers), reads in `reads` the value
    `reads[read](b, indices, 1)` (a packed operand), other reads load from `buffers`.
    Returns the yielded value."""
    block = op.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, indices, strict=True))
    for inner in block.ops:
        if isinstance(inner, tensor.YieldOp):
            return mapping.get(inner.value, inner.value)
        if isinstance(inner, tensor.ReadOp):
            if inner.tensor in known:
                mapping[inner.result] = known[inner.tensor]
                continue
            if inner in reads:
                mapping[inner.result] = reads[inner](b, indices, 1)
                continue
            where = [mapping.get(i, i) for i in inner.indices]
            dtype = dtype_of(inner.tensor)
            mapping[inner.result] = load(b, buffers[inner.tensor], where, dtype)
            continue
        _clone(b, inner, mapping)
    raise AssertionError("compute body without tensor.yield")


def inline_body_lanes(
    b: Builder,
    op: tensor.ComputeOp,
    indices: Sequence[SSAValue],
    buffers: Mapping[SSAValue, SSAValue],
    plan: Mapping[Operation, str],
    lanes: int,
    reads: Mapping[Operation, Callable[..., SSAValue]] = {},
    known: Mapping[SSAValue, SSAValue] = {},
    valid: int | None = None,
) -> SSAValue:
    """Inline `op`'s body at `lanes` consecutive points of the axis `plan` was made
    for (`dlc.analysis.tensor_lanes.lane_plan`); `indices` hold that axis' first point;
    `reads` and `known` (vectors here) as for `inline_body`; `valid`: vector loads
    read only the first `valid` lanes (zeros past them: a zero-padded tail). Returns
    the yielded value as a `vector<lanes x T>`."""
    block = op.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, indices, strict=True))
    broadcasts: dict[SSAValue, SSAValue] = {}

    def vector(value: SSAValue) -> SSAValue:
        if isinstance(value.type, VectorType):
            return value
        if value not in broadcasts:
            make = lambda: ops.broadcast(value, lanes)  # noqa: E731
            broadcasts[value] = made(b, ("broadcast", value, lanes), make).results[0]
        return broadcasts[value]

    for inner in block.ops:
        kind = plan[inner]
        if isinstance(inner, tensor.YieldOp):
            return vector(mapping.get(inner.value, inner.value))
        if isinstance(inner, tensor.ReadOp):
            where = [mapping.get(i, i) for i in inner.indices]
            if inner.tensor in known:
                mapping[inner.result] = known[inner.tensor]
            elif inner in reads:
                mapping[inner.result] = reads[inner](b, indices, lanes if kind == "vload" else 1)
            elif kind in READ_STEPS:
                wide = lanes if valid is None else valid
                dt = dtype_of(inner.tensor)
                mapping[inner.result] = vload_valid(
                    b, buffers[inner.tensor], where, lanes, wide, dt, READ_STEPS[kind]
                )
            else:
                mapping[inner.result] = load(
                    b, buffers[inner.tensor], where, dtype_of(inner.tensor)
                )
            continue
        if kind not in ("vector", "compare", "select"):  # scalar, or the first lane's index
            _clone(b, inner, mapping)
            continue
        new = _lane_op(inner, kind, [mapping.get(v, v) for v in inner.operands], vector, lanes)
        b.insert(new)
        mapping[inner.results[0]] = new.results[0]
    raise AssertionError("compute body without tensor.yield")


def _clone(b: Builder, inner: Operation, mapping: dict[SSAValue, SSAValue]) -> None:
    """`inner` of a body at `b`, its result in `mapping`: a scalar constant is the
    function's, integer arithmetic the block's when made before (`constants.py`)."""
    if isinstance(inner, arith.ConstantOp) and isinstance(inner.value, IntegerAttr | FloatAttr):
        mapping[inner.result] = constant(b, inner.value)
    elif isinstance(inner, SHARED):
        shared(b, inner, mapping)
    else:
        b.insert(inner.clone(mapping))


def _lane_op(
    inner: Operation,
    kind: str,
    operands: list[SSAValue],
    vector: Callable[[SSAValue], SSAValue],
    lanes: int,
) -> Operation:
    """`inner` on whole vectors: a lane compare (`loop.vcmpf`), a select by a lane
    mask (`loop.vselect`) or by one i1, or the same op on vector types."""
    if kind == "compare":
        assert isinstance(inner, arith.CmpfOp)
        predicate = loop.CMPF_PREDICATES[inner.predicate.value.data]
        return loop.VCmpfOp(predicate, vector(operands[0]), vector(operands[1]))
    if kind == "select":
        cond, lhs, rhs = operands
        if isinstance(cond.type, VectorType):
            return loop.VSelectOp(cond, vector(lhs), vector(rhs))
        return arith.SelectOp(cond, vector(lhs), vector(rhs))
    return type(inner).create(
        operands=[vector(v) for v in operands],
        result_types=[_vector_type(inner.results[0].type, lanes)],
        properties=dict(inner.properties),
        attributes=dict(inner.attributes),
    )


@lru_cache(maxsize=256)
def _vector_type(element: Attribute, lanes: int) -> VectorType:
    """`vector<lanes x element>`, built once (xDSL checks each type it builds)."""
    return VectorType(element, [lanes])


READ_STEPS = {kind: step for step, kind in READ_KINDS.items()}
"""Elements between lanes of the vector reads of a lane plan."""


def vload_valid(
    b: Builder,
    buffer: SSAValue,
    where: list[SSAValue],
    lanes: int,
    valid: int,
    dt: str,
    step: int = 1,
) -> SSAValue:
    """`lanes` values of `buffer` from `where`, `step` elements apart (1 or 2), only
    the first `valid` loaded (in narrower pieces put together; zeros past them):
    nothing past the valid columns is read."""
    if valid == lanes:
        return _vload_step(b, buffer, where, lanes, step)
    zero = b.insert(ops.broadcast(ScalarBuilder(b).const(0, dt), lanes)).results[0]
    *outer, last = where
    for start, size, _ in vector_pieces(valid, max(1, lanes // 2)):
        at = last if not start else offset(b, last, step * start)
        piece = _vload_step(b, buffer, [*outer, at], size, step)
        inside = range(start, start + size)
        wide = [i - start if i in inside else 0 for i in range(lanes)]
        widened = b.insert(loop.ShuffleOp(piece, piece, wide)).res
        mask = [lanes + i if i in inside else i for i in range(lanes)]
        zero = b.insert(loop.ShuffleOp(zero, widened, mask)).res
    return zero


def _vload_step(
    b: Builder, buffer: SSAValue, where: list[SSAValue], lanes: int, step: int
) -> SSAValue:
    """`lanes` values `step` elements apart from `where`; every second element: the
    vectors from the first and from the last wanted element, the even lanes of the
    first half and the odd ones of the second (no element past the last is read)."""
    if step == 1 or lanes == 1:
        make = lambda: ops.vload(buffer, where, lanes)  # noqa: E731
        return loaded(b, (buffer, tuple(where), lanes), make).results[0]
    assert step == 2, f"vector reads {step} elements apart"
    *outer, last = where
    first = b.insert(ops.vload(buffer, where, lanes)).results[0]
    at = offset(b, last, lanes - 1)
    second = b.insert(ops.vload(buffer, [*outer, at], lanes)).results[0]
    mask = [2 * i if 2 * i < lanes else 2 * i + 1 for i in range(lanes)]
    return b.insert(loop.ShuffleOp(first, second, mask)).res


def vstore_valid(
    b: Builder, value: SSAValue, buffer: SSAValue, where: list[SSAValue], lanes: int, valid: int
) -> None:
    """Store the first `valid` of the `lanes` lanes of `value` at `where`."""
    if valid == lanes:
        b.insert(ops.vstore(value, buffer, where))
        return
    *outer, last = where
    for start, size, _ in vector_pieces(valid, max(1, lanes // 2)):
        at = last if not start else offset(b, last, start)
        piece = b.insert(loop.ShuffleOp(value, value, list(range(start, start + size)))).res
        b.insert(ops.vstore(piece, buffer, [*outer, at]))


def all_of(b: Builder, conditions: Sequence[SSAValue]) -> SSAValue | bool:
    """The i1 conjunction of `conditions` (True when there are none)."""
    if not conditions:
        return True
    value = conditions[0]
    for c in conditions[1:]:
        value = b.insert(arith.AndIOp(value, c)).result
    return value


def by_value(call: tensor.CallOp) -> bool:
    """Whether an extern call takes and returns scalars only, by value (at most one
    result); else the pointer convention of `tensor.CallOp`."""
    types = [*(a.type for a in call.args), *(r.type for r in call.res)]
    return len(call.res) <= 1 and all(t.rank == 0 for t in types)  # type: ignore[attr-defined]
