"""Gather and scatter ops of the `graph` dialect (dlc's additions to DLVM, ONNX's
Gather, GatherElements, GatherND, ScatterElements and ScatterND semantics).

    %y = gather %table: <30522 x 768 x f32> at %ids: <128 x i64> along 0
    %e = gatherElements %x: <3 x 4 x f32> at %i: <3 x 2 x i32> along 1
    %n = gatherND %x: <2 x 3 x 4 x f32> at %i: <2 x 1 x i64> batchDims 1
    %s = scatterElements %u: <2 x 3 x f32> to %x: <4 x 3 x f32> at %i: <2 x 3 x i64> along 0 by add
    %t = scatterND %u: <2 x 4 x f32> to %x: <5 x 4 x f32> at %i: <2 x 1 x i64>

Indices are i32 or i64; a negative index counts from the end of its axis. An index
outside [-n, n) is an error at run time in every build (IndexError naming the op's
location), never an out-of-bounds access or a silently wrong value. Scatters without
`by` replace (the last of duplicate indices wins); `by add|multiply|max|min` combine
the updates with the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from dlc.dialects.graph_elementwise import tensor_operand
from dlc.dialects.graph_module import GraphInstruction, InferenceError, Props, Symbols
from dlc.dialects.graph_props import int_prop
from dlc.dialects.graph_types import TensorType, dtype_is_numeric, format_type

INDEX_DTYPES = ("i32", "i64")
SCATTER_REDUCTIONS = ("add", "multiply", "max", "min")


def index_operand(opcode: str, t: Attribute) -> TensorType:
    """The indices operand: an i32 or i64 tensor."""
    idx = tensor_operand(opcode, t, "indices")
    if idx.dt not in INDEX_DTYPES:
        raise InferenceError(f"{opcode}: indices must be i32 or i64, got {format_type(idx)}")
    return idx


def check_axis(opcode: str, x: TensorType, axis: int) -> None:
    if not 0 <= axis < x.rank:
        raise InferenceError(f"{opcode}: axis {axis} out of range for {format_type(x)}")


def check_fits(opcode: str, data: TensorType, idx: TensorType, axis: int) -> None:
    """Element-wise indices: the rank of the data, no larger off the axis."""
    if idx.rank != data.rank:
        raise InferenceError(
            f"{opcode}: indices {format_type(idx)} must have the rank of {format_type(data)}"
        )
    if any(i > d for k, (i, d) in enumerate(zip(idx.dims, data.dims)) if k != axis):
        raise InferenceError(
            f"{opcode}: indices {format_type(idx)} do not fit {format_type(data)} off axis {axis}"
        )


def check_reduction(opcode: str, data: TensorType, props: Props) -> None:
    """`by add|multiply|max|min` (absent: replace) on numeric data."""
    reduction = props.get("reduction")
    if reduction is None:
        return
    assert isinstance(reduction, StringAttr)
    if reduction.data not in SCATTER_REDUCTIONS:
        raise InferenceError(
            f"{opcode}: unknown reduction '{reduction.data}' (add, multiply, max, min)"
        )
    if not dtype_is_numeric(data.dt):
        raise InferenceError(
            f"{opcode}: reduction '{reduction.data}' needs numeric data, got {data.dt}"
        )


def nd_shape(opcode: str, data: TensorType, idx: TensorType, batch: int) -> tuple[int, ...]:
    """The result shape of gatherND (= the updates shape of scatterND at batch 0)."""
    if idx.rank < 1:
        raise InferenceError(f"{opcode}: indices must have rank ≥ 1, got {format_type(idx)}")
    if not 0 <= batch < min(idx.rank, data.rank):
        raise InferenceError(
            f"{opcode}: batchDims {batch} must be below the ranks of "
            f"{format_type(data)} and {format_type(idx)}"
        )
    if idx.dims[:batch] != data.dims[:batch]:
        raise InferenceError(
            f"{opcode}: batch dimensions of {format_type(idx)} and {format_type(data)} differ"
        )
    depth = idx.dims[-1]
    if batch + depth > data.rank:
        raise InferenceError(
            f"{opcode}: index depth {depth} is too deep for {format_type(data)}"
            + (f" after {batch} batch dimensions" if batch else "")
        )
    return (*idx.dims[:-1], *data.dims[batch + depth :])


class _GatherBase(GraphInstruction):
    data = operand_def()
    indices = operand_def()
    result = result_def()
    traits = traits_def(Pure())


@irdl_op_definition
class GatherOp(_GatherBase):
    """`gather %data at %indices along a`: out[p, i, q] = data[p, indices[i], q] with
    p the dimensions before `a` and q those after (ONNX Gather)."""

    name = "graph.gather"
    OPCODE: ClassVar[str] = "gather"
    axis = prop_def(IntAttr)

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        data = tensor_operand("gather", operand_types[0], "data")
        idx = index_operand("gather", operand_types[1])
        axis = int_prop(props, "axis")
        check_axis("gather", data, axis)
        return [data.with_shape([*data.dims[:axis], *idx.dims, *data.dims[axis + 1 :]])]


@irdl_op_definition
class GatherElementsOp(_GatherBase):
    """`gatherElements %data at %indices along a`: out[j] = data[j with j[a] =
    indices[j]] (ONNX GatherElements); the result has the shape of the indices."""

    name = "graph.gather_elements"
    OPCODE: ClassVar[str] = "gatherElements"
    axis = prop_def(IntAttr)

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        data = tensor_operand("gatherElements", operand_types[0], "data")
        idx = index_operand("gatherElements", operand_types[1])
        axis = int_prop(props, "axis")
        check_axis("gatherElements", data, axis)
        check_fits("gatherElements", data, idx, axis)
        return [data.with_shape(idx.dims)]


@irdl_op_definition
class GatherNDOp(_GatherBase):
    """`gatherND %data at %indices batchDims b`: out[B, i, q] = data[B, indices[B, i,
    :], q], the last indices dimension a (partial) index tuple (ONNX GatherND)."""

    name = "graph.gather_nd"
    OPCODE: ClassVar[str] = "gatherND"
    batch_dims = prop_def(IntAttr)

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        data = tensor_operand("gatherND", operand_types[0], "data")
        idx = index_operand("gatherND", operand_types[1])
        return [data.with_shape(nd_shape("gatherND", data, idx, int_prop(props, "batch_dims")))]


class _ScatterBase(GraphInstruction):
    updates = operand_def()
    data = operand_def()
    indices = operand_def()
    reduction = opt_prop_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure())


@irdl_op_definition
class ScatterElementsOp(_ScatterBase):
    """`scatterElements %updates to %data at %indices along a [by add]`: data with
    data[j with j[a] = indices[j]] replaced by (or combined with) updates[j]."""

    name = "graph.scatter_elements"
    OPCODE: ClassVar[str] = "scatterElements"
    axis = prop_def(IntAttr)

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        updates = tensor_operand("scatterElements", operand_types[0], "updates")
        data = tensor_operand("scatterElements", operand_types[1], "data")
        idx = index_operand("scatterElements", operand_types[2])
        axis = int_prop(props, "axis")
        check_axis("scatterElements", data, axis)
        check_fits("scatterElements", data, idx, axis)
        _check_updates("scatterElements", updates, data, idx.dims)
        check_reduction("scatterElements", data, props)
        return [data]


@irdl_op_definition
class ScatterNDOp(_ScatterBase):
    """`scatterND %updates to %data at %indices [by add]`: data with the slices
    data[indices[i, :]] replaced by (or combined with) updates[i] (ONNX ScatterND)."""

    name = "graph.scatter_nd"
    OPCODE: ClassVar[str] = "scatterND"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        updates = tensor_operand("scatterND", operand_types[0], "updates")
        data = tensor_operand("scatterND", operand_types[1], "data")
        idx = index_operand("scatterND", operand_types[2])
        _check_updates("scatterND", updates, data, nd_shape("scatterND", data, idx, 0))
        check_reduction("scatterND", data, props)
        return [data]


def _check_updates(opcode: str, updates: TensorType, data: TensorType, dims: Sequence[int]) -> None:
    if updates.dt != data.dt or updates.dims != tuple(dims):
        want = format_type(data.with_shape(dims))
        raise InferenceError(f"{opcode}: updates {format_type(updates)} must be {want}")


OPS: list[type[Operation]] = [
    GatherOp,
    GatherElementsOp,
    GatherNDOp,
    ScatterElementsOp,
    ScatterNDOp,
]
