"""ONNX DeformConv (2-D): a convolution whose kernel taps sample the input at offset
positions, with bilinear interpolation.

Tap k of output position l reads the input at p = (l·stride - pad_lo + k·dilation) +
offset[k, l] (the offsets and the optional mask are run-time inputs). The four
neighbours of p are gathered from the flattened image (`gatherElements`; a neighbour
outside the image reads 0, as onnx's reference, which uses GridSample with zero
padding and aligned corners), weighted bilinearly and by the mask. The sampled columns
(channel, tap) × position then meet the weights in one batched `dot` per group.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import DataTypeCastOp, SelectOp
from dlc.dialects.graph_gather import GatherElementsOp
from dlc.dialects.graph_tensor import DotOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_slice import slice_axis

NP_FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def _pair(node: Node, name: str, count: int, default: int) -> list[int]:
    values = node.attr(name) or [default] * count
    if len(values) != count:
        raise ImportProblem(f"{name} needs {count} entries, got {values}")
    return [int(v) for v in values]


def tap_positions(
    kernel: Sequence[int], out: Sequence[int], strides: Sequence[int],
    dilations: Sequence[int], pads: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(row, column) of every tap (kernel row-major) at every output position (row-
    major) before the offsets: two K × L arrays."""
    ki, kj = np.meshgrid(np.arange(kernel[0]), np.arange(kernel[1]), indexing="ij")
    oi, oj = np.meshgrid(np.arange(out[0]), np.arange(out[1]), indexing="ij")
    rows = oi.reshape(1, -1) * strides[0] - pads[0] + ki.reshape(-1, 1) * dilations[0]
    cols = oj.reshape(1, -1) * strides[1] - pads[1] + kj.reshape(-1, 1) * dilations[1]
    return rows, cols


def sample(e: Emitter, image: SSAValue, py: SSAValue, px: SSAValue, groups: int) -> SSAValue:
    """image (N, C, H, W) read bilinearly at (py, px) (N, G, T), each of the G offset
    groups for its C/G channels: (N, C, T). A neighbour outside the image reads the
    zero appended to each flattened image, so no arithmetic touches a clamped pixel."""
    n, c, h, w = shape_of(image)
    dt, taps = tensor_type(image).dt, shape_of(py)[-1]
    flat = e.pad(e.reshape(image, (n, c, h * w)), [(0, 0), (0, 0), (0, 1)], 0.0)
    y0, x0 = e.unary("floor", py), e.unary("floor", px)
    ly, lx = e.binary("subtract", py, y0), e.binary("subtract", px, x0)
    one = e.scalar(1.0, dt)
    per_channel = (n, groups, c // groups, taps)
    total = None
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yc, xc = (e.binary("add", v, e.scalar(float(d), dt)) for v, d in ((y0, dy), (x0, dx)))
        weight_y = ly if dy else e.binary("subtract", one, ly)
        weight_x = lx if dx else e.binary("subtract", one, lx)
        inside = e.binary("and", _within(e, yc, h), _within(e, xc, w))
        at = e.binary("add", e.binary("multiply", yc, e.scalar(float(w), dt)), xc)
        at = e.op(SelectOp, [at, e.scalar(float(h * w), dt), inside])
        at = e.op(DataTypeCastOp, [at], dtype=StringAttr("i64"))
        read = e.op(GatherElementsOp, [flat, _spread(e, at, per_channel)], axis=IntAttr(2))
        weight = _spread(e, e.binary("multiply", weight_y, weight_x), per_channel)
        term = e.binary("multiply", read, weight)
        total = term if total is None else e.binary("add", total, term)
    assert total is not None
    return total


def _spread(e: Emitter, v: SSAValue, per_channel: tuple[int, int, int, int]) -> SSAValue:
    """(N, G, T) -> (N, C, T): each offset group's value for each of its channels."""
    n, groups, size, taps = per_channel
    wide = e.broadcast_to(e.reshape(v, (n, groups, 1, taps)), per_channel)
    return e.reshape(wide, (n, groups * size, taps))


def _within(e: Emitter, v: SSAValue, size: int) -> SSAValue:
    """0 <= v <= size - 1."""
    dt = tensor_type(v).dt
    low = e.binary("greaterThanOrEqual", v, e.scalar(0.0, dt))
    return e.binary("and", low, e.binary("lessThanOrEqual", v, e.scalar(size - 1.0, dt)))


def _geometry(node: Node, xs: Sequence[int], ws: Sequence[int]) -> list[list[int]]:
    """kernel, strides, dilations, pads and the output size, checked."""
    kernel = _pair(node, "kernel_shape", 2, 0) if node.has_attr("kernel_shape") else list(ws[2:])
    if kernel != list(ws[2:]):
        raise ImportProblem(f"kernel_shape {kernel} differs from the weight's {list(ws[2:])}")
    strides, dilations = _pair(node, "strides", 2, 1), _pair(node, "dilations", 2, 1)
    pads = _pair(node, "pads", 4, 0)
    out = [
        (size + pads[i] + pads[2 + i] - (k - 1) * d - 1) // s + 1
        for i, (size, k, s, d) in enumerate(zip(xs[2:], kernel, strides, dilations, strict=True))
    ]
    if min(out) < 1:
        raise ImportProblem(f"the output {out} would be empty")
    return [kernel, strides, dilations, pads, out]


def deform_conv(node: Node) -> list[Result]:
    e, x, w, offset = node.emit, node.input(0), node.input(1), node.input(2)
    xs, ws, dt = shape_of(x), shape_of(w), tensor_type(x).dt
    if len(xs) != 4 or len(ws) != 4:
        raise ImportProblem(f"only 2-D inputs are supported, got {xs} and weight {ws}")
    if dt not in NP_FLOAT or min(xs[2:]) < 2:
        raise ImportProblem(f"the input {xs} ({dt}) must be a float image of at least 2 × 2")
    group, offset_group = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    n, c, oc = xs[0], xs[1], ws[0]
    if c != ws[1] * group or oc % group or c % offset_group:
        raise ImportProblem(
            f"input {xs} and weight {ws} do not fit group={group}, offset_group={offset_group}"
        )
    kernel, strides, dilations, pads, out = _geometry(node, xs, ws)
    taps, positions = kernel[0] * kernel[1], out[0] * out[1]
    if shape_of(offset) != (n, offset_group * taps * 2, *out):
        raise ImportProblem(f"offset {shape_of(offset)} does not fit the output {[n, *out]}")
    parts = e.reshape(offset, (n, offset_group, taps, 2, positions))
    points = []
    for k, base in enumerate(tap_positions(kernel, out, strides, dilations, pads)):
        shift = e.reshape(_component(e, parts, k), (n, offset_group, taps * positions))
        points.append(
            e.binary("add", shift, e.constant(base.reshape(1, 1, -1).astype(NP_FLOAT[dt])))
        )
    columns = sample(e, x, points[0], points[1], offset_group)
    mask = node.optional(4)
    if mask is not None:
        flat = e.reshape(mask, (n, offset_group, taps * positions))
        spread = _spread(e, flat, (n, offset_group, c // offset_group, taps * positions))
        columns = e.binary("multiply", columns, spread)
    y = e.reshape(_grouped_product(e, columns, w, group, (n, c, taps, positions)), (n, oc, *out))
    bias = node.optional(3)
    return [y if bias is None else e.binary("add", y, e.reshape(bias, (1, oc, 1, 1)))]


def _component(e: Emitter, parts: SSAValue, k: int) -> SSAValue:
    """parts[:, :, :, k, :] of the (N, G, K, 2, L) offsets."""
    dims = shape_of(parts)
    piece = slice_axis(e, parts, 3, k, k + 1)
    return e.reshape(piece, (*dims[:3], dims[4]))


def _grouped_product(
    e: Emitter, columns: SSAValue, w: SSAValue, group: int, sizes: tuple[int, int, int, int]
) -> SSAValue:
    """Σ over (channel, tap) of the group of weights · columns: (N, OC, L)."""
    n, c, taps, positions = sizes
    oc = shape_of(w)[0]
    cols = e.reshape(columns, (n, group, c // group * taps, positions))
    cols = e.reshape(e.transpose(cols, [1, 2, 0, 3]), (group, c // group * taps, n * positions))
    weights = e.reshape(w, (group, oc // group, c // group * taps))
    y = e.op(DotOp, [weights, cols])  # (G, OC/G, N·L)
    y = e.transpose(e.reshape(y, (group, oc // group, n, positions)), [2, 0, 1, 3])
    return e.reshape(y, (n, oc, positions))


CONVERTERS: dict[str, Converter] = {"DeformConv": deform_conv}
