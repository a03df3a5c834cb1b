"""Scalar pieces of the tensor -> loop lowering: buffer types, loads, stores, and a
compute body inlined at an index point (its reads become loads)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, i1, i8, i64
from xdsl.ir import Attribute, SSAValue

from dlc.dialects import loop, tensor
from dlc.dialects.graph_types import TensorType


def memref_type(t: Attribute) -> MemRefType:
    """The buffer of a tensor: same shape, bool stored as i8."""
    assert isinstance(t, TensorType)
    element = i8 if t.dt == "bool" else tensor.scalar_type(t.dt)
    return MemRefType(element, t.dims)


def load(b: Builder, buffer: SSAValue, indices: Sequence[SSAValue], dtype: str) -> SSAValue:
    """loop.load, with bool i8 -> i1."""
    value = b.insert(loop.LoadOp(buffer, list(indices))).res
    if dtype == "bool":
        value = b.insert(arith.TruncIOp(value, i1)).result
    return value


def store(
    b: Builder, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue], dtype: str
) -> None:
    """loop.store, with bool i1 -> i8."""
    if dtype == "bool":
        value = b.insert(arith.ExtUIOp(value, i8)).result
    b.insert(loop.StoreOp(value, buffer, list(indices)))


def index(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, i64))).result


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
) -> SSAValue:
    """Inline `op`'s body at `indices` (output then reduction indices); reads of
    `known` tensors use their values (registers), other reads load from `buffers`.
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
            where = [mapping.get(i, i) for i in inner.indices]
            dtype = dtype_of(inner.tensor)
            mapping[inner.result] = load(b, buffers[inner.tensor], where, dtype)
            continue
        b.insert(inner.clone(mapping))
    raise AssertionError("compute body without tensor.yield")
