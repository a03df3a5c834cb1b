"""Shape and linear-algebra ops of the `graph` dialect.

Type rules follow docs/reference/language.md with dlc's fix: `slice from L upto U` is the
closed range [L, U] of dimension 0 with 0 ≤ L ≤ U < dim0. Reductions, windows and
convolution live in `graph_reduction.py`; they and the shared property helpers are
re-exported here so `graph_tensor.ReduceOp` etc. keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from dlc.dialects import graph_dims
from dlc.dialects.graph_canonicalization import GraphCanonicalization
from dlc.dialects.graph_elementwise import tensor_operand
from dlc.dialects.graph_module import GraphInstruction, InferenceError, Props, Symbols
from dlc.dialects.graph_props import check_dims, int_array, int_prop, ints
from dlc.dialects.graph_reduction import (
    ConvolveOp,
    ReduceOp,
    ReduceWindowOp,
    ScanOp,
    check_combinator,
    conv_config,
    window_shape,
)
from dlc.dialects.graph_types import TensorType, dtype_bytes, format_type, scalar


@irdl_op_definition
class DotOp(GraphInstruction):
    """`dot %a, %b`: (batched) matrix product, or vector·vector giving a scalar."""

    name = "graph.dot"
    OPCODE: ClassVar[str] = "dot"
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        lhs = tensor_operand("dot", operand_types[0], "lhs")
        rhs = tensor_operand("dot", operand_types[1], "rhs")
        what = f"dot: cannot multiply {format_type(lhs)} by {format_type(rhs)}"
        if lhs.dt != rhs.dt:
            raise InferenceError(what + ": data types differ")
        if lhs.dt == "bf16":
            raise InferenceError(what + ": bf16 is a storage type (cast to f32 to compute)")
        if lhs.rank == 1 and rhs.rank == 1:
            if lhs.dims != rhs.dims:
                raise InferenceError(what + ": lengths differ")
            return [scalar(lhs.dt)]
        if lhs.rank < 2 or lhs.rank != rhs.rank:
            raise InferenceError(what + ": ranks must be equal and at least 2")
        if lhs.dims[:-2] != rhs.dims[:-2]:
            raise InferenceError(what + ": batch dimensions differ")
        if lhs.dims[-1] != rhs.dims[-2]:
            raise InferenceError(what + ": inner dimensions differ")
        return [lhs.with_shape([*lhs.dims[:-1], rhs.dims[-1]])]


@irdl_op_definition
class ConcatenateOp(GraphInstruction):
    """`concatenate %a, %b along 0`"""

    name = "graph.concatenate"
    OPCODE: ClassVar[str] = "concatenate"
    inputs = var_operand_def()
    axis = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        if not operand_types:
            raise InferenceError("concatenate: needs at least one operand")
        axis = int_prop(props, "axis")
        first = tensor_operand("concatenate", operand_types[0])
        if not 0 <= axis < first.rank:
            raise InferenceError(f"concatenate: axis {axis} out of range for {format_type(first)}")
        extents: list[int | str] = []
        for t in operand_types:
            x = tensor_operand("concatenate", t)
            same = x.rank == first.rank and all(
                a == b for i, (a, b) in enumerate(zip(x.dims, first.dims)) if i != axis
            )
            if x.dt != first.dt or not same:
                raise InferenceError(
                    f"concatenate: {format_type(x)} does not match {format_type(first)} "
                    f"along axis {axis}"
                )
            extents.append(x.dims[axis])
        dims: list[int | str] = list(first.dims)
        dims[axis] = graph_dims.add(extents)  # `%past+1` along a symbolic axis
        return [TensorType(dims, first.dt)]


@irdl_op_definition
class TransposeOp(GraphInstruction):
    """`transpose %x`: reverses all dimensions."""

    name = "graph.transpose"
    OPCODE: ClassVar[str] = "transpose"
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("transpose", operand_types[0])
        return [x.with_shape(x.dims[::-1])]


@irdl_op_definition
class ReverseOp(GraphInstruction):
    """`reverse %x along 0, 1`"""

    name = "graph.reverse"
    OPCODE: ClassVar[str] = "reverse"
    operand = operand_def()
    dims = prop_def(ArrayAttr[IntAttr])
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("reverse", operand_types[0])
        check_dims("reverse", x, ints(props["dims"]))
        return [x]


@irdl_op_definition
class SliceOp(GraphInstruction):
    """`slice %x from L upto U`: rows L..U (closed) of dimension 0."""

    name = "graph.slice"
    OPCODE: ClassVar[str] = "slice"
    operand = operand_def()
    lower = prop_def(IntAttr)
    upper = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("slice", operand_types[0])
        if x.rank == 0:
            raise InferenceError(f"slice: operand must have rank ≥ 1, got {format_type(x)}")
        lo, hi = int_prop(props, "lower"), int_prop(props, "upper")
        if not 0 <= lo <= hi < x.dims[0]:
            raise InferenceError(
                f"slice: range [{lo}, {hi}] is not within dimension 0 of {format_type(x)}"
            )
        return [x.with_shape([hi - lo + 1, *x.dims[1:]])]


class _ShapeQueryOp(GraphInstruction):
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure())


@irdl_op_definition
class RankOp(_ShapeQueryOp):
    """`rank of %x` -> i64"""

    name = "graph.rank"
    OPCODE: ClassVar[str] = "rank"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        tensor_operand("rank", operand_types[0])
        return [scalar("i64")]


@irdl_op_definition
class ShapeOp(_ShapeQueryOp):
    """`shape of %x` -> <rank x i64>"""

    name = "graph.shape"
    OPCODE: ClassVar[str] = "shape"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("shape", operand_types[0])
        return [TensorType([x.rank], "i64")]


@irdl_op_definition
class UnitCountOp(_ShapeQueryOp):
    """`unitCount of %x` -> i64"""

    name = "graph.unit_count"
    OPCODE: ClassVar[str] = "unitCount"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        tensor_operand("unitCount", operand_types[0])
        return [scalar("i64")]


@irdl_op_definition
class PadShapeOp(GraphInstruction):
    """`padShape %x at i`: inserts a dimension of size 1 at i (0 ≤ i ≤ rank)."""

    name = "graph.pad_shape"
    OPCODE: ClassVar[str] = "padShape"
    operand = operand_def()
    index = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("padShape", operand_types[0])
        i = int_prop(props, "index")
        if not 0 <= i <= x.rank:
            raise InferenceError(f"padShape: index {i} out of range for {format_type(x)}")
        return [x.with_shape([*x.dims[:i], 1, *x.dims[i:]])]


@irdl_op_definition
class SqueezeShapeOp(GraphInstruction):
    """`squeezeShape %x at i`: removes dimension i, which must be 1."""

    name = "graph.squeeze_shape"
    OPCODE: ClassVar[str] = "squeezeShape"
    operand = operand_def()
    index = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("squeezeShape", operand_types[0])
        i = int_prop(props, "index")
        if not 0 <= i < x.rank or x.dims[i] != 1:
            raise InferenceError(f"squeezeShape: dimension {i} of {format_type(x)} is not 1")
        return [x.with_shape([*x.dims[:i], *x.dims[i + 1 :]])]


def same_count(a: TensorType, b: TensorType) -> bool:
    """Whether `a` and `b` have as many elements for every size of their symbolic
    dimensions: equal products of their dimensions as polynomials in the names."""
    if not a.is_dynamic and not b.is_dynamic:
        return a.num_elements == b.num_elements
    return graph_dims.product_poly(a.dims) == graph_dims.product_poly(b.dims)


@irdl_op_definition
class ShapeCastOp(GraphInstruction):
    """`shapeCast %x to 2 x 3` (or `to scalar`): same elements, new shape."""

    name = "graph.shape_cast"
    OPCODE: ClassVar[str] = "shapeCast"
    operand = operand_def()
    shape = prop_def(ArrayAttr[IntAttr | StringAttr])
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("shapeCast", operand_types[0])
        shape = props["shape"]
        assert isinstance(shape, ArrayAttr)
        target = TensorType([d.data for d in shape.data], x.dt)
        if not same_count(x, target):
            raise InferenceError(
                f"shapeCast: cannot cast {format_type(x)} to {format_type(target)}: "
                f"element counts differ"
            )
        return [target]


@irdl_op_definition
class BitCastOp(GraphInstruction):
    """`bitCast %x to T`: reinterprets the bits; sizes must match when both are tensors."""

    name = "graph.bit_cast"
    OPCODE: ClassVar[str] = "bitCast"
    operand = operand_def()
    target = prop_def(Attribute)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x, target = operand_types[0], props["target"]
        if isinstance(x, TensorType) and isinstance(target, TensorType):
            src = x.num_elements * dtype_bytes(x.dt)
            dst = target.num_elements * dtype_bytes(target.dt)
            if src != dst:
                raise InferenceError(
                    f"bitCast: {format_type(x)} ({src} bytes) and {format_type(target)} "
                    f"({dst} bytes) differ in size"
                )
        return [target]


OPS: list[type[Operation]] = [
    ScanOp,
    ReduceOp,
    ReduceWindowOp,
    DotOp,
    ConcatenateOp,
    TransposeOp,
    ReverseOp,
    SliceOp,
    ConvolveOp,
    RankOp,
    ShapeOp,
    UnitCountOp,
    PadShapeOp,
    SqueezeShapeOp,
    ShapeCastOp,
    BitCastOp,
]

__all__ = [
    "ConvolveOp",
    "ReduceOp",
    "ReduceWindowOp",
    "ScanOp",
    "check_combinator",
    "check_dims",
    "conv_config",
    "int_array",
    "ints",
    "window_shape",
]
