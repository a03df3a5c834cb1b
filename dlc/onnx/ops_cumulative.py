"""ONNX CumSum and CumProd (`exclusive`, `reverse`) from a triangular selection and a
reduction: out[.., i, ..] combines the x[.., j, ..] whose (i, j) a constant n × n mask
keeps (j ≤ i; j < i when exclusive; ≥ / > when reversed), the others replaced by the
combinator's identity (0 or 1) with `select`, so no arithmetic touches them and an
infinite or NaN input reaches only the outputs that include it. It costs n² work per
scanned line of n elements."""

from __future__ import annotations

import numpy as np

from dlc.dialects.graph_elementwise import SelectOp
from dlc.onnx.emitter import ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result

NUMBERS = ("f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def triangle(n: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """keep[i, j]: whether output i includes input j."""
    i, j = np.indices((n, n))
    if reverse:
        i, j = j, i
    return j < i if exclusive else j <= i


def cumulative(node: Node) -> list[Result]:
    """CumSum / CumProd along the constant `axis` input."""
    e, x = node.emit, node.input(0)
    dims, dt = shape_of(x), tensor_type(x).dt
    if dt not in NUMBERS:
        raise ImportProblem(f"{node.op_type} of {dt} tensors is not supported")
    if not dims:
        raise ImportProblem(f"{node.op_type} needs rank ≥ 1")
    value = node.constant(1, "axis")
    if value is None or value.size != 1:
        raise ImportProblem("axis must be one integer")
    axis = node.axis(int(value.reshape(-1)[0]), len(dims))
    n = dims[axis]
    keep = triangle(n, bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0)))
    rank = len(dims) + 1
    lines = e.reshape(x, (*dims[:axis], 1, n, *dims[axis + 1 :]))
    mask = e.constant(keep.reshape((1,) * axis + (n, n) + (1,) * (rank - axis - 2)))
    combinator, init = ("add", 0) if node.op_type == "CumSum" else ("multiply", 1)
    identity = e.scalar(init, dt)
    kept = e.op(SelectOp, [lines, e.to_rank(identity, rank), mask])
    return [e.reduce(kept, combinator, init, [axis + 1], keepdims=False)]


CONVERTERS: dict[str, Converter] = {"CumSum": cumulative, "CumProd": cumulative}
