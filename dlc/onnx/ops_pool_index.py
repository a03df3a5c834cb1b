"""MaxPool's Indices output: for each window, the flat index (into the whole input,
row-major, or column-major over the spatial axes with storage_order=1) of its first
largest element in row-major window order, as onnx's reference computes it.

One `gather` of constant positions picks every window's elements from the padded
input ([N, C, K, *out] for K window elements); the index is the smallest row-major
position (a constant) among the elements equal to the window's maximum, which is
the first in the reference's scan; padding never matches. A NaN window picks its
first NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import SelectOp
from dlc.dialects.graph_gather import GatherOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of
from dlc.onnx.node import Node

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
    if int(np.prod(window[0])) > MAX_WINDOW:
        raise ImportProblem(f"the Indices output of windows over {MAX_WINDOW} elements")
    e, dims, out = node.emit, shape_of(padded), shape_of(y)[2:]
    spatial = [d - lo - hi for d, (lo, hi) in zip(dims[2:], pads, strict=True)]
    positions = _window_positions(dims[2:], out, window)
    flat = np.arange(int(np.prod(spatial)), dtype=np.int64).reshape(spatial)
    rows = np.pad(flat, pads, constant_values=-1).reshape(-1)[positions]  # -1: padding
    windows = e.op(
        GatherOp,
        [e.reshape(padded, (*dims[:2], int(np.prod(dims[2:])))), e.constant(positions)],
        axis=IntAttr(2),
    )
    y_k = e.reshape(y, (*dims[:2], 1, *out))
    match = e.binary("or", e.binary("equal", windows, y_k), _both_nan(e, windows, y_k))
    rows_k = e.constant(rows.reshape(1, 1, *rows.shape))
    match = e.binary("and", match, e.binary("greaterThanOrEqual", rows_k, e.scalar(0, "i64")))
    last = e.splat(flat.size, shape_of(match), "i64")
    first = e.reduce(
        e.op(SelectOp, [e.broadcast_to(rows_k, shape_of(match)), last, match]),
        "min",
        math.inf,
        [2],
        keepdims=False,
    )
    if order:
        first = _column_major(e, first, spatial)
    base = np.arange(dims[0] * dims[1], dtype=np.int64) * flat.size
    return [e.binary("add", first, e.constant(base.reshape(dims[:2] + (1,) * len(spatial))))]


def _window_positions(padded: Sequence[int], out: Sequence[int], window: Window) -> np.ndarray:
    """[K, *out] row-major positions in the padded spatial axes of each window's
    elements (K = the kernel's elements, in row-major order)."""
    kernel, strides, dilations = window
    grids = np.meshgrid(
        *(np.arange(k) for k in kernel), *(np.arange(n) for n in out), indexing="ij"
    )
    rank = len(kernel)
    coords = [
        grids[i] * d + grids[rank + i] * s for i, (s, d) in enumerate(zip(strides, dilations))
    ]
    positions = np.ravel_multi_index(coords, padded)
    return positions.reshape(-1, *out)


def _column_major(e: Emitter, rows: SSAValue, spatial: Sequence[int]) -> SSAValue:
    """Row-major positions in `spatial` as column-major ones."""
    result, stride, rest = None, 1, rows
    coords = []
    for n in reversed(spatial):
        coords.append(e.binary("modulo", rest, e.scalar(n, "i64")))
        rest = e.binary("floorDivide", rest, e.scalar(n, "i64"))
    for coord, n in zip(reversed(coords), spatial):
        term = e.binary("multiply", coord, e.scalar(stride, "i64"))
        result = term if result is None else e.binary("add", result, term)
        stride *= n
    assert result is not None
    return result


def _both_nan(e: Emitter, x: SSAValue, y: SSAValue) -> SSAValue:
    return e.binary("and", e.binary("notEqual", x, x), e.binary("notEqual", y, y))
