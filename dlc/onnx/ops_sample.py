"""ONNX GridSample (opset 16: 2-D `bilinear`/`nearest`/`bicubic`; opset 20: N-D
`linear`/`nearest`/`cubic`), every `padding_mode` and `align_corners`, as one gather
with computed indices and a weighted sum.

Sampling is separable: along each spatial axis a sample position has k candidate
source indices with a weight each (nearest: 1, linear: 2, cubic: 4, the formulas of
onnx's reference `op_grid_sample.py`, which follows PyTorch's GridSampler.h). The
k₁ × … × k_r corners of a sample are one flat index into the input's spatial axes and
the product of their axes' weights; one `gather` from the flattened input reads every
corner of every sample for every channel, and a sum over the corners weighs them. A
corner outside the input is `select`ed to 0 (padding_mode zeros), clamped (border) or
reflected (reflection); every index is clamped into range before the gather, so the
gather never sees an index outside the input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import SSAValue

from dlc.dialects import graph_gather as gg
from dlc.dialects.graph_elementwise import DataTypeCastOp, SelectOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_slice import slice_axis

FLOATS = ("f16", "bf16", "f32", "f64")
MODES = {16: ("bilinear", "nearest", "bicubic"), 20: ("linear", "nearest", "cubic")}
PADDING = ("zeros", "border", "reflection")
NP_FLOAT = {"f32": np.float32, "f64": np.float64}
"""NumPy types of the compute types: f64 data is computed in f64, any other float in f32."""
CUBIC_A = -0.75
"""The cubic convolution coefficient GridSample uses (Keys; PyTorch's and ONNX's)."""


# ---- small element-wise helpers -----------------------------------------------------


def compute_type(value: SSAValue) -> str:
    """f64 for f64 data, f32 for the other floats."""
    return "f64" if tensor_type(value).dt == "f64" else "f32"


def cast(e: Emitter, x: SSAValue, dt: str) -> SSAValue:
    if tensor_type(x).dt == dt:
        return x
    return e.op(DataTypeCastOp, [x], dtype=StringAttr(dt))


def select(e: Emitter, a: SSAValue, b: SSAValue, mask: SSAValue) -> SSAValue:
    """a where mask, else b (NumPy broadcasting)."""
    rank = max(len(shape_of(v)) for v in (a, b, mask))
    return e.op(SelectOp, [e.to_rank(v, rank) for v in (a, b, mask)])


def clamp(e: Emitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    dt = tensor_type(x).dt
    return e.binary("min", e.binary("max", x, e.scalar(lo, dt)), e.scalar(hi, dt))


def affine(e: Emitter, x: SSAValue, scale: float, shift: float) -> SSAValue:
    """x * scale + shift."""
    dt = tensor_type(x).dt
    return e.binary("add", e.binary("multiply", x, e.scalar(scale, dt)), e.scalar(shift, dt))


def outside(e: Emitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    """x < lo or x > hi."""
    dt = tensor_type(x).dt
    below = e.binary("lessThan", x, e.scalar(lo, dt))
    return e.binary("or", below, e.binary("greaterThan", x, e.scalar(hi, dt)))


def reflect(e: Emitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    """x reflected at lo and hi until it lies between them (onnx's `_gs_reflect`, a
    triangle wave of period 2 (hi - lo)): lo + r - |((x - lo) mod 2r) - r|, r = hi - lo."""
    dt = tensor_type(x).dt
    span = hi - lo
    if span <= 0:
        return e.splat(lo, shape_of(x), dt)
    shifted = e.binary("subtract", x, e.scalar(lo, dt))
    turns = e.unary("floor", e.binary("divide", shifted, e.scalar(2 * span, dt)))
    phase = e.binary("subtract", shifted, e.binary("multiply", turns, e.scalar(2 * span, dt)))
    offset = e.binary("subtract", phase, e.scalar(span, dt))
    magnitude = e.binary("max", offset, e.unary("negate", offset))
    reflected = e.binary("subtract", e.scalar(lo + span, dt), magnitude)
    return select(e, reflected, x, outside(e, x, lo, hi))


# ---- one spatial axis ---------------------------------------------------------------


def borders(size: int, align_corners: bool) -> tuple[float, float]:
    """The coordinate range the input covers (onnx's `_prepare_border`)."""
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


def denormalize(e: Emitter, g: SSAValue, size: int, align_corners: bool) -> SSAValue:
    """Grid values in [-1, 1] to input coordinates (onnx's `_gs_denormalize`)."""
    if align_corners:
        return affine(e, g, (size - 1) / 2, (size - 1) / 2)
    return affine(e, g, size / 2, (size - 1) / 2)


def adjust(e: Emitter, x: SSAValue, size: int, align_corners: bool, padding: str) -> SSAValue:
    """A coordinate outside the borders clamped (border) or reflected (reflection); with
    zeros, far-away coordinates are clamped where every candidate is outside anyway
    (no index overflows)."""
    lo, hi = borders(size, align_corners)
    if padding == "border":
        return select(e, clamp(e, x, 0, size - 1), x, outside(e, x, lo, hi))
    if padding == "reflection":
        return reflect(e, x, lo, hi)
    return clamp(e, x, -4.0, size + 3.0)


def cubic_weights(e: Emitter, t: SSAValue) -> list[SSAValue]:
    """Keys' cubic weights of the four neighbours at x0-1 .. x0+2 for t = x - x0."""
    dt = tensor_type(t).dt
    a = CUBIC_A

    def near(s: SSAValue) -> SSAValue:  # ((a + 2) s - (a + 3)) s² + 1, for |s| <= 1
        inner = affine(e, s, a + 2, -(a + 3))
        return e.binary("add", e.binary("multiply", inner, e.unary("square", s)), e.scalar(1, dt))

    def far(s: SSAValue) -> SSAValue:  # ((a s - 5a) s + 8a) s - 4a, for 1 <= |s| <= 2
        inner = affine(e, s, a, -5 * a)
        inner = e.binary("add", e.binary("multiply", inner, s), e.scalar(8 * a, dt))
        return e.binary("subtract", e.binary("multiply", inner, s), e.scalar(4 * a, dt))

    one_minus = affine(e, t, -1, 1)
    return [far(affine(e, t, 1, 1)), near(t), near(one_minus), far(affine(e, t, -1, 2))]


def candidates(e: Emitter, x: SSAValue, mode: str) -> tuple[SSAValue, SSAValue | None]:
    """The source positions (as floats) of the neighbours of coordinate x (…, 1) along
    a new last axis, and their weights (None for nearest)."""
    if mode == "nearest":
        return x, None
    base = e.unary("floor", x)
    t = e.binary("subtract", x, base)
    if mode == "linear":
        offsets, weights = [0.0, 1.0], [affine(e, t, -1, 1), t]
    else:
        offsets, weights = [-1.0, 0.0, 1.0, 2.0], cubic_weights(e, t)
    dt = tensor_type(x).dt
    ramp = e.constant(np.asarray(offsets, dtype=NP_FLOAT[dt]))
    positions = e.binary("add", base, ramp)
    return positions, e.concatenate(weights, len(shape_of(x)) - 1)


def source_indices(
    e: Emitter, positions: SSAValue, size: int, align_corners: bool, padding: str
) -> tuple[SSAValue, SSAValue | None]:
    """Integer positions into [0, size) (onnx's `_pixel_at_array`): with zeros, also
    the mask of the positions inside the input."""
    lo, hi = borders(size, align_corners)
    valid = None
    if padding == "zeros":
        dt = tensor_type(positions).dt
        valid = e.binary(
            "and",
            e.binary("greaterThanOrEqual", positions, e.scalar(0, dt)),
            e.binary("lessThanOrEqual", positions, e.scalar(size - 1, dt)),
        )
    elif padding == "reflection":
        positions = reflect(e, positions, lo, hi)
    index = cast(e, clamp(e, positions, 0, size - 1), "i64")
    return index, valid


# ---- the gather ---------------------------------------------------------------------


def combine(
    e: Emitter, axes: Sequence[tuple[SSAValue, SSAValue | None, SSAValue | None]],
    sizes: Sequence[int],
) -> tuple[SSAValue, SSAValue | None, SSAValue | None]:  # fmt: skip
    """Per-axis (index, weight, valid) of shape (*M, k_i) -> the flat row-major index,
    the weight product and the conjunction of the masks over all corners, (*M, K)."""
    lead = shape_of(axes[0][0])[:-1]
    counts = [shape_of(index)[-1] for index, _, _ in axes]
    flat: SSAValue | None = None
    weight: SSAValue | None = None
    valid: SSAValue | None = None
    stride = int(np.prod(sizes))
    for i, (index, w, ok) in enumerate(axes):
        stride //= sizes[i]
        shape = (*lead, *(c if j == i else 1 for j, c in enumerate(counts)))
        term = e.binary("multiply", e.reshape(index, shape), e.scalar(stride, "i64"))
        flat = term if flat is None else e.binary("add", flat, term)
        if w is not None:
            w = e.reshape(w, shape)
            weight = w if weight is None else e.binary("multiply", weight, w)
        if ok is not None:
            ok = e.reshape(ok, shape)
            valid = ok if valid is None else e.binary("and", valid, ok)
    total = (*lead, int(np.prod(counts)))
    assert flat is not None
    flat = e.reshape(e.broadcast_to(flat, (*lead, *counts)), total)
    if weight is not None:
        weight = e.reshape(e.broadcast_to(weight, (*lead, *counts)), total)
    if valid is not None:
        everywhere = e.splat(True, (*lead, *counts), "bool")
        valid = e.reshape(e.binary("and", valid, everywhere), total)
    return flat, weight, valid


def gather_planes(e: Emitter, x: SSAValue, batch: SSAValue, flat: SSAValue) -> SSAValue:
    """out[b, c, q…] = x[batch[b], c, flat[b, q…]] for x (N, C, *spatial), batch (B,)
    and flat (B, q…) indices into the spatial axes, as one `gather` from the flattened
    x at (batch[b] · C + c) · spatial size + flat[b, q…]. The index is a broadcast sum
    (fused into the gather, never stored) and the result comes in the shape it is
    consumed in: reshaping a large gathered tensor would cost divisions per element."""
    dims, idims = shape_of(x), shape_of(flat)
    channels, space = dims[1], int(np.prod(dims[2:]))
    ones = (1,) * (len(idims) - 1)
    start = e.reshape(batch, (idims[0], 1, *ones))
    start = e.binary("multiply", start, e.scalar(channels, "i64"))
    ramp = e.constant(np.arange(channels, dtype=np.int64).reshape(1, channels, *ones))
    plane = e.binary("multiply", e.binary("add", start, ramp), e.scalar(space, "i64"))
    index = e.binary("add", plane, e.reshape(flat, (idims[0], 1, *idims[1:])))
    table = e.reshape(x, (int(np.prod(dims)),))
    return e.op(gg.GatherOp, [table, index], axis=IntAttr(0))


# ---- the operator -------------------------------------------------------------------


def _mode(node: Node, rank: int) -> str:
    opset = 20 if node.opset >= 20 else 16
    names = MODES[opset]
    mode = node.require("mode", names, names[0])
    if opset == 16 and rank != 4:
        raise ImportProblem(f"GridSample before opset 20 needs a 4-D input, got rank {rank}")
    return {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)


def _check(x: SSAValue, grid: SSAValue) -> None:
    dims, gdims = shape_of(x), shape_of(grid)
    for name, value in (("X", x), ("grid", grid)):
        if tensor_type(value).dt not in FLOATS:
            raise ImportProblem(f"{name} of type {tensor_type(value).dt} is not supported")
    spatial = len(dims) - 2
    if spatial < 1 or len(gdims) != len(dims) or gdims[0] != dims[0] or gdims[-1] != spatial:
        raise ImportProblem(
            f"grid of shape {list(gdims)} does not fit X of shape {list(dims)} "
            f"(expected (N, *output, {spatial}))"
        )


def grid_sample(node: Node) -> list[Result]:
    """Y[n, c, o] = sum over the corners of grid[n, o]'s cell of weight * X[n, c, corner]."""
    e, x, grid = node.emit, node.input(0), node.input(1)
    _check(x, grid)
    dims, gdims = shape_of(x), shape_of(grid)
    mode = _mode(node, len(dims))
    padding = node.require("padding_mode", PADDING, "zeros")
    align = bool(node.attr("align_corners", 0))
    ct = compute_type(x)
    n, space, spatial = dims[0], dims[2:], len(dims) - 2
    points = int(np.prod(gdims[1:-1]))
    coords = cast(e, e.reshape(grid, (n, points, spatial)), ct)
    axes = []
    for i, size in enumerate(space):  # grid's last axis lists the spatial axes reversed
        g = slice_axis(e, coords, 2, spatial - 1 - i, spatial - i)
        v = denormalize(e, g, size, align)
        if mode == "nearest":
            v = e.unary("rint", v)
        positions, weight = candidates(e, adjust(e, v, size, align, padding), mode)
        index, valid = source_indices(e, positions, size, align, padding)
        axes.append((index, weight, valid))
    flat, weight, valid = combine(e, axes, space)
    y = _sampled(e, x, flat, weight, valid, gdims[1:-1], ct)
    return [cast(e, y, tensor_type(x).dt)]


def _sampled(
    e: Emitter, x: SSAValue, flat: SSAValue, weight: SSAValue | None, valid: SSAValue | None,
    out: tuple[int, ...], ct: str,
) -> SSAValue:  # fmt: skip
    """(N, C, *out): the K corners (N, P, K) of each of the P = |out| samples gathered,
    invalid ones read as 0, weighed and summed (nearest: one corner, no weight)."""
    n, _, corners = shape_of(flat)
    batch = e.constant(np.arange(n, dtype=np.int64))
    shape = (n, *out, corners) if weight is not None else (n, *out)
    values = gather_planes(e, x, batch, e.reshape(flat, shape))
    if weight is not None:
        values = cast(e, values, ct)
    zero = e.scalar(0, tensor_type(values).dt)
    if valid is not None:
        values = select(e, values, zero, e.reshape(valid, (n, 1, *shape[1:])))
    if weight is None:
        return values
    values = e.binary("multiply", values, e.reshape(weight, (n, 1, *shape[1:])))
    return e.reduce(values, "add", 0.0, [len(shape)], keepdims=False)


CONVERTERS: dict[str, Converter] = {"GridSample": grid_sample}
