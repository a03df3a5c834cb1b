"""Building graph-dialect ops in memory for the ONNX importer.

`Emitter` appends ops to one block, typing each with its op class's `infer` (as the
DLVM parser does), and supplies the small compositions ONNX needs and DLVM lacks:
NumPy rank extension before broadcasting, broadcasting to a shape, transposes with a
permutation, reductions that keep their dimensions and explicit padding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from onnx import TensorProto
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Block, SSAValue

from dlc.dialects import graph_dims
from dlc.dialects.graph import GraphInstruction, InferenceError, LiteralOp
from dlc.dialects.graph_elementwise import BINARY_OPS, UNARY_OPS, DataTypeCastOp
from dlc.dialects.graph_literal import LiteralAttr, scalar_tree
from dlc.dialects.graph_tensor import (
    ConcatenateOp,
    ConvolveOp,
    DotOp,
    PadShapeOp,
    ReduceOp,
    ShapeCastOp,
    TransposeOp,
)
from dlc.dialects.graph_types import TensorType, format_type, numpy_dtype, size_error
from dlc.passes.graph.fold_constants import literal_of
from dlc.passes.graph.permutations import block_reversals

MAX_PERMUTE_RANK = 6
"""Transposes with a permutation are searched for among reshape + reverse sequences up
to this rank (720 permutations)."""


ELEMENT_TYPES: dict[int, str] = {
    TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64", TensorProto.FLOAT16: "f16",
    TensorProto.INT8: "i8", TensorProto.INT16: "i16", TensorProto.INT32: "i32",
    TensorProto.INT64: "i64", TensorProto.BOOL: "bool", TensorProto.UINT8: "u8",
    TensorProto.UINT16: "u16", TensorProto.UINT32: "u32", TensorProto.UINT64: "u64",
    TensorProto.BFLOAT16: "bf16",
}  # fmt: skip
"""ONNX element types dlc has."""


class ImportProblem(Exception):
    """One node cannot be imported; the message says what is missing."""


class NotConstant(ImportProblem):
    """An input that must be known at import time (a shape, axes) is not; `name` is
    the ONNX value."""

    def __init__(self, message: str, name: str):
        super().__init__(message)
        self.name = name


def ints_attr(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(int(v)) for v in values])


def tensor_type(value: SSAValue) -> TensorType:
    t = value.type
    assert isinstance(t, TensorType)
    return t


def merged_dim(dims: Sequence[int | str]) -> int | str:
    """The extent of adjacent dimensions merged into one: a product, or with symbolic
    dimensions the symbolic dimension `%seq*12` (`graph_dims.multiply`)."""
    return graph_dims.multiply(dims)


def shape_of(value: SSAValue) -> tuple[int, ...]:
    return tensor_type(value).dims


class Emitter:
    """Appends typed graph ops to `block`."""

    def __init__(self, block: Block):
        self.block = block

    def op(
        self, cls: type[GraphInstruction], operands: Sequence[SSAValue], **props: Attribute
    ) -> SSAValue:
        """Create `cls` with inferred result types; a type error is an `ImportProblem`.
        f16 products and convolutions accumulate in f32 (as NumPy and onnxruntime do),
        rounding once at the end instead of after every step."""
        if cls in (DotOp, ConvolveOp) and all(tensor_type(o).dt == "f16" for o in operands):
            wide = [self.op(DataTypeCastOp, [o], dtype=StringAttr("f32")) for o in operands]
            y = self.op(cls, wide, **props)
            return self.op(DataTypeCastOp, [y], dtype=StringAttr("f16"))
        try:
            results = cls.infer([o.type for o in operands], props)
        except InferenceError as err:
            if any(tensor_type(o).dt == "bf16" for o in operands):
                return self._in_f32(cls, operands, props)
            raise ImportProblem(str(err)) from None
        for t in results:
            if isinstance(t, TensorType) and (message := size_error(t)) is not None:
                raise ImportProblem(message)
        op = cls.create(operands=list(operands), result_types=list(results), properties=props)
        self.block.add_op(op)
        return op.results[0]

    def _in_f32(
        self, cls: type[GraphInstruction], operands: Sequence[SSAValue], props: dict[str, Attribute]
    ) -> SSAValue:
        """An op that computes, on bf16 operands: computed in f32 (each bf16 operand
        widened exactly), an f32 result rounded back to bf16, as ONNX's reference does."""
        wide = [
            self.op(DataTypeCastOp, [o], dtype=StringAttr("f32"))
            if tensor_type(o).dt == "bf16"
            else o
            for o in operands
        ]
        y = self.op(cls, wide, **props)
        if tensor_type(y).dt == "f32":
            y = self.op(DataTypeCastOp, [y], dtype=StringAttr("bf16"))
        return y

    def unary(self, opcode: str, x: SSAValue) -> SSAValue:
        return self.op(UNARY_OPS[opcode], [x])

    def binary(self, opcode: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """`opcode a, b` with NumPy broadcasting (ranks extended on the left)."""
        a, b = self.rank_extended(a, b)
        return self.op(BINARY_OPS[opcode], [a, b])

    # ---- literals -------------------------------------------------------------------

    def constant(self, value: np.ndarray) -> SSAValue:
        """A literal of `value` (a splat when all elements are equal, or there are none),
        placed in the function's entry block: read in a loop body, it is not made again
        per iteration."""
        t = TensorType(value.shape, _dtype_name(value.dtype))
        if value.size == 0:
            return self.splat(False if t.dt == "bool" else 0, t.dims, t.dt)
        op = literal_of(np.ascontiguousarray(value), t)
        entry = self.block.parent.first_block if self.block.parent else None
        if entry is None or entry is self.block or entry.last_op is None:
            self.block.add_op(op)
        else:
            entry.insert_op_before(op, entry.last_op)  # before its terminator
        return op.result

    def scalar(self, value: float, dt: str) -> SSAValue:
        """An inline scalar literal (`1.0: f32`); ±inf is an integer type's extreme."""
        value = integer_extreme(value, dt)
        op = LiteralOp(LiteralAttr(scalar_tree(value, dt)), TensorType((), dt), inline=True)
        self.block.add_op(op)
        return op.result

    def splat(self, value: float, shape: Sequence[int], dt: str) -> SSAValue:
        value = integer_extreme(value, dt)
        op = LiteralOp(LiteralAttr(scalar_tree(value, dt)), TensorType(shape, dt))
        self.block.add_op(op)
        return op.result

    # ---- shapes ---------------------------------------------------------------------

    def reshape(self, x: SSAValue, shape: Sequence[int | str]) -> SSAValue:
        """`shapeCast x to shape` (a `str` is a symbolic dimension, `%n`)."""
        if tuple(shape) == shape_of(x):
            return x
        dims = [StringAttr(d) if isinstance(d, str) else IntAttr(int(d)) for d in shape]
        return self.op(ShapeCastOp, [x], shape=ArrayAttr(dims))

    def pad_shape(self, x: SSAValue, index: int) -> SSAValue:
        return self.op(PadShapeOp, [x], index=IntAttr(index))

    def to_rank(self, x: SSAValue, rank: int) -> SSAValue:
        """Leading 1s up to `rank` (NumPy's rank extension)."""
        dims = shape_of(x)
        if not dims or len(dims) >= rank:
            return x  # scalars broadcast in DLVM already
        return self.reshape(x, (1,) * (rank - len(dims)) + dims)

    def rank_extended(self, a: SSAValue, b: SSAValue) -> tuple[SSAValue, SSAValue]:
        rank = max(len(shape_of(a)), len(shape_of(b)))
        return self.to_rank(a, rank), self.to_rank(b, rank)

    def broadcast_to(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`x` broadcast to `shape` (x + -0.0 keeps every value, -0.0 included)."""
        if shape_of(x) == tuple(shape):
            return x
        zero = self.splat(-0.0, shape, tensor_type(x).dt)
        return self.binary("add", x, zero)

    def concatenate(self, values: Sequence[SSAValue], axis: int) -> SSAValue:
        if len(values) == 1:
            return values[0]
        return self.op(ConcatenateOp, values, axis=IntAttr(axis))

    def pad(
        self, x: SSAValue, pads: Sequence[tuple[int, int]], value: float | SSAValue
    ) -> SSAValue:
        """`x` with `pads[i] = (lo, hi)` elements of `value` (a number, or a
        one-element tensor computed at run time) around dimension i."""
        dt = tensor_type(x).dt
        for axis, (lo, hi) in enumerate(pads):
            parts = []
            for count, position in ((lo, 0), (hi, 1)):
                if count:
                    dims = list(shape_of(x))
                    dims[axis] = count
                    parts.append((position, self._filled(value, dims, dt)))
            before = [v for p, v in parts if p == 0]
            after = [v for p, v in parts if p == 1]
            x = self.concatenate([*before, x, *after], axis)
        return x

    def _filled(self, value: float | SSAValue, dims: Sequence[int], dt: str) -> SSAValue:
        if not isinstance(value, SSAValue):
            return self.splat(value, dims, dt)
        scalar = self.reshape(value, [1] * len(dims))
        return self.binary("add", scalar, self.splat(-0.0, dims, dt))  # x + -0.0 is x

    def transpose(self, x: SSAValue, perm: Sequence[int]) -> SSAValue:
        """Axes permuted as NumPy's `transpose(x, perm)`, from reshapes and `transpose`
        (which reverses all axes): reversing blocks of adjacent axes is a reshape that
        merges each block, a transpose, and a reshape that splits the blocks again."""
        perm = tuple(perm)
        if perm == tuple(range(len(perm))):
            return x
        if len(perm) > MAX_PERMUTE_RANK:
            raise ImportProblem(f"transposes of rank > {MAX_PERMUTE_RANK} are not supported")
        for blocks in block_reversals(perm):
            dims = shape_of(x)
            sizes = [merged_dim([dims[i] for i in block]) for block in blocks]
            merged = self.reshape(x, sizes)
            flipped = self.op(TransposeOp, [merged])
            x = self.reshape(flipped, [dims[i] for block in reversed(blocks) for i in block])
        return x

    def reduce(
        self, x: SSAValue, combinator: str, init: float, axes: Sequence[int], keepdims: bool
    ) -> SSAValue:
        """`reduce x by combinator init init along axes`, keeping size-1 dims if asked."""
        if not axes:
            return x
        dt = tensor_type(x).dt
        wide = dt == "f16" and combinator in ("add", "multiply")  # f32 accumulation
        if wide:
            x, dt = self.op(DataTypeCastOp, [x], dtype=StringAttr("f32")), "f32"
        props = {"dims": ints_attr(sorted(axes)), "combinator": StringAttr(combinator)}
        y = self.op(ReduceOp, [x, self.scalar(init, dt)], **props)
        if wide:
            y = self.op(DataTypeCastOp, [y], dtype=StringAttr("f16"))
        if keepdims:
            y = self.reshape(y, [1 if i in axes else d for i, d in enumerate(shape_of(x))])
        return y


def integer_extreme(value: float, dt: str) -> float:
    """±inf (the identity of max / min, the padding of max pooling) as the lowest or
    highest integer of `dt`; other values unchanged."""
    if dt in ("bool", "f16", "bf16", "f32", "f64") or not math.isinf(value):
        return value
    info = np.iinfo(numpy_dtype(dt))
    return info.max if value > 0 else info.min


def _dtype_name(dtype: np.dtype) -> str:
    names = {
        "float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
        "int32": "i32", "int64": "i64", "bool": "bool", "uint8": "u8", "uint16": "u16",
        "uint32": "u32", "uint64": "u64", "bfloat16": "bf16",
    }  # fmt: skip
    if dtype.name not in names:
        raise ImportProblem(f"constants of type {dtype.name} are not supported")
    return names[dtype.name]


def describe(value: SSAValue) -> str:
    return format_type(value.type)
