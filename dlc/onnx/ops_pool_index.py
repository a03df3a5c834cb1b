"""MaxPool's Indices output: for each window, the flat index (into the whole input,
row-major, or column-major over the spatial axes with storage_order=1) of its first
largest element, as onnx's reference computes it.

The window's elements are strided slices of the padded input, one per kernel offset;
the index is that of the first slice whose element equals the window's maximum
(`select`s from the last offset to the first). Padding never matches: its index
is -1. A NaN window picks its first NaN.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import SelectOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of
from dlc.onnx.node import Node
from dlc.onnx.ops_slice import rows_of

MAX_WINDOW = 256
"""Elements of the largest window whose indices are computed (one slice each)."""

Window = tuple[Sequence[int], Sequence[int], Sequence[int]]
"""kernel, strides, dilations."""


def max_indices(
    node: Node, padded: SSAValue, y: SSAValue, pads: Sequence[tuple[int, int]], window: Window
) -> list[SSAValue]:
    """[Indices] when the node asks for them, else []; `padded` is the input padded
    with -inf as the pool reads it, `y` the pool's maximum."""
    order = node.require("storage_order", (0, 1), 0)
    if len(node.proto.output) < 2 or not node.proto.output[1]:
        return []
    kernel, strides, dilations = window
    if int(np.prod(kernel)) > MAX_WINDOW:
        raise ImportProblem(f"the Indices output of windows over {MAX_WINDOW} elements")
    e, dims = node.emit, shape_of(padded)
    spatial = [d - lo - hi for d, (lo, hi) in zip(dims[2:], pads, strict=True)]
    plane = int(np.prod(spatial))
    flat = np.arange(plane, dtype=np.int64).reshape(spatial[::-1] if order else spatial)
    flat = flat.transpose() if order else flat
    flat = np.pad(flat, pads, constant_values=-1).reshape(1, 1, *dims[2:])
    indices = e.constant(flat)
    found = e.splat(-1, shape_of(y), "i64")
    y_nan = e.binary("notEqual", y, y)
    for offset in reversed(list(itertools.product(*(range(k) for k in kernel)))):
        x_k, i_k = padded, indices
        for axis, (a, s, d, n) in enumerate(zip(offset, strides, dilations, shape_of(y)[2:])):
            rows = range(a * d, a * d + (n - 1) * s + 1, s)
            x_k, i_k = rows_of(e, x_k, axis + 2, rows), rows_of(e, i_k, axis + 2, rows)
        match = e.binary("or", e.binary("equal", x_k, y), _both_nan(e, x_k, y_nan))
        match = e.binary("and", match, e.binary("greaterThanOrEqual", i_k, e.scalar(0, "i64")))
        found = _select(e, i_k, found, match)
    base = np.arange(dims[0] * dims[1], dtype=np.int64) * plane
    return [e.binary("add", found, e.constant(base.reshape(dims[:2] + (1,) * len(spatial))))]


def _both_nan(e: Emitter, x: SSAValue, y_nan: SSAValue) -> SSAValue:
    return e.binary("and", e.binary("notEqual", x, x), y_nan)


def _select(e: Emitter, a: SSAValue, b: SSAValue, mask: SSAValue) -> SSAValue:
    """a where mask, else b; a broadcast to mask's shape."""
    if shape_of(a) != shape_of(mask):
        a = e.broadcast_to(a, shape_of(mask))
    return e.op(SelectOp, [a, b, mask])
