"""ONNX OneHot and EyeLike: one-hot encodings and identity-like matrices.

OneHot compares each index (negative ones wrapped by + depth; exactly, in i64 or f64,
as onnx's reference does, so a fractional or out-of-range index matches no position)
with a constant `0 .. depth-1` laid along the new axis, and selects `on` or `off`
(`values` may be computed at run time). EyeLike depends only on its input's shape, so
it is a constant.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto
from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import DataTypeCastOp, SelectOp
from dlc.dialects.graph_tensor import SliceOp
from dlc.dialects.graph_types import dtype_is_float, dtype_is_numeric, numpy_dtype
from dlc.onnx.emitter import ELEMENT_TYPES, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result


def _depth(node: Node) -> int:
    value = node.constant(1, "depth")
    if value is None or value.size != 1:
        raise ImportProblem("depth must be one number")
    depth = float(value.reshape(-1)[0])
    if not depth.is_integer() or depth < 1:
        raise ImportProblem(f"depth must be a positive integer, got {depth:g}")
    return int(depth)


def _on_off(node: Node) -> tuple[SSAValue, SSAValue]:
    """(on, off) as scalars, from the two-element `values` input."""
    e, values = node.emit, node.input(2)
    if shape_of(values) != (2,):
        raise ImportProblem(f"values must have shape (2,), got {shape_of(values)}")
    off, on = (e.op(SliceOp, [values], lower=IntAttr(i), upper=IntAttr(i)) for i in (0, 1))
    return e.reshape(on, ()), e.reshape(off, ())


def one_hot(node: Node) -> list[Result]:
    e, indices = node.emit, node.input(0)
    dims, dt = shape_of(indices), tensor_type(indices).dt
    if not dtype_is_numeric(dt):
        raise ImportProblem(f"indices must be numeric, got {dt}")
    depth = _depth(node)
    axis = node.axis(node.attr("axis", -1), len(dims) + 1)
    # exact comparisons, as NumPy's int64 positions against any index type
    wide = "f64" if dtype_is_float(dt) or dt == "u64" else "i64"
    if dt != wide:
        indices, dt = e.op(DataTypeCastOp, [indices], dtype=StringAttr(wide)), wide
    zero = e.scalar(0, dt)
    wrapped = e.op(
        SelectOp,
        [
            e.binary("add", indices, e.scalar(depth, dt)),
            indices,
            e.binary("lessThan", indices, zero),
        ],
    )
    spread = e.reshape(wrapped, (*dims[:axis], 1, *dims[axis:]))
    positions = np.arange(depth, dtype=numpy_dtype(dt))
    targets = e.constant(positions.reshape((depth,) + (1,) * (len(dims) - axis)))
    mask = e.binary("equal", spread, targets)
    on, off = _on_off(node)
    on, off = (e.broadcast_to(v, shape_of(mask)) for v in (on, off))
    return [e.op(SelectOp, [on, off, mask])]


def eye_like(node: Node) -> list[Result]:
    """A constant with ones where column - row = k, of the input's shape."""
    dims = shape_of(node.input(0))
    if len(dims) != 2:
        raise ImportProblem(f"the input must be a matrix, got shape {dims}")
    kind = node.attr("dtype")
    dt = tensor_type(node.input(0)).dt if kind is None else ELEMENT_TYPES.get(kind)
    if dt is None:
        raise ImportProblem(f"dtype {TensorProto.DataType.Name(kind)} is not supported")
    return [np.eye(dims[0], dims[1], k=int(node.attr("k", 0)), dtype=numpy_dtype(dt))]


CONVERTERS: dict[str, Converter] = {"OneHot": one_hot, "EyeLike": eye_like}
