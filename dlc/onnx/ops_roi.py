"""ONNX RoiAlign (opsets 10, 16 and 22): `avg` and `max` pooling, both coordinate
transformation modes, a fixed `sampling_ratio`, or the adaptive one (0) when the rois
are constants.

Each output bin of a roi is pooled from a grid of sample points, each bilinearly
interpolated from its four neighbours, with the formulas of onnx's reference
`op_roi_align.py` (ONNX Runtime's): samples beyond one pixel outside the map count 0,
positions are clamped at the border, and `max` takes the largest weighted neighbour
(w · x, not the interpolated value) over the bin. The neighbours of every sample of
every roi are read by one `gather` (the helpers of `ops_sample.py`), the weights and
positions are computed from the rois at run time. With `sampling_ratio` 0 the number
of samples per bin depends on the roi's size (ceil(roi size / bins)): it is taken from
constant rois at import time, samples beyond a roi's own count are masked out.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_sample import (
    FLOATS,
    NP_FLOAT,
    cast,
    clamp,
    combine,
    compute_type,
    gather_planes,
    select,
)
from dlc.onnx.ops_slice import slice_axis


def _samples(
    e: Emitter, start: SSAValue, extent: SSAValue, bins: int, grid: np.ndarray, size: int
) -> tuple[SSAValue, SSAValue, SSAValue]:
    """One axis of every roi: sample positions start + p · bin + (i + 0.5) · bin / g_r
    (bin = extent / bins; p < bins, i < max g), each sample's two neighbours (R, S, 2)
    as indices and weights, and whether it lies within a pixel of the map (R, S)."""
    rois, most = shape_of(start)[0], max(int(grid.max()), 1)
    dt = tensor_type(start).dt
    p, i = np.divmod(np.arange(bins * most), most)
    per_roi = grid.astype(np.float64)[:, None]
    offsets = p[None, :] + (i[None, :] + 0.5) / np.maximum(per_roi, 1)
    step = e.binary("divide", extent, e.scalar(bins, dt))
    ramp = e.constant(offsets.astype(NP_FLOAT[dt]))
    pos = e.binary("add", start, e.binary("multiply", ramp, step))
    inside = e.binary(
        "and",
        e.binary("greaterThanOrEqual", pos, e.scalar(-1.0, dt)),
        e.binary("lessThanOrEqual", pos, e.scalar(float(size), dt)),
    )
    y = clamp(e, pos, 0.0, float(size))
    low = e.unary("floor", y)
    edge = e.binary("greaterThanOrEqual", low, e.scalar(size - 1, dt))
    last = e.scalar(size - 1, dt)
    low = select(e, last, low, edge)
    high = select(e, last, e.binary("add", low, e.scalar(1, dt)), edge)
    frac = select(e, e.scalar(0, dt), e.binary("subtract", y, low), edge)
    shape = (rois, bins * most, 1)
    index = e.concatenate([e.reshape(low, shape), e.reshape(high, shape)], 2)
    weight = e.concatenate([e.reshape(e.binary("subtract", e.scalar(1, dt), frac), shape),
                            e.reshape(frac, shape)], 2)  # fmt: skip
    return cast(e, index, "i64"), weight, inside


def _spread(e: Emitter, value: SSAValue, axis: int, other: int) -> SSAValue:
    """(R, S, k) of one axis broadcast over the other axis's S' samples:
    (R, S, S', k) for axis 0, (R, S', S, k) for axis 1."""
    rois, count, k = shape_of(value)
    if axis == 0:
        return e.broadcast_to(e.reshape(value, (rois, count, 1, k)), (rois, count, other, k))
    return e.broadcast_to(e.reshape(value, (rois, 1, count, k)), (rois, other, count, k))


def _bin_major(e: Emitter, t: SSAValue, bins: tuple[int, int]) -> SSAValue:
    """(R, bins_y · g_y, bins_x · g_x, k) -> (R, bins_y, bins_x, g_y, g_x, k): the
    samples of one bin next to each other, so that pooling reduces the last axes."""
    rois, sy, sx, k = shape_of(t)
    gy, gx = sy // bins[0], sx // bins[1]
    split = e.reshape(t, (rois, bins[0], gy, bins[1], gx, k))
    return e.transpose(split, (0, 1, 3, 2, 4, 5))


def _grids(
    node: Node, rois: int, bins: tuple[int, int], extents: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Sample counts per roi along y and x: the fixed sampling_ratio or, with 0,
    ceil(extent / bins) from the constant rois."""
    ratio = int(node.attr("sampling_ratio", 0))
    if ratio > 0:
        return np.full(rois, ratio), np.full(rois, ratio)
    if extents is None:
        raise ImportProblem(
            "sampling_ratio=0 needs the rois as a constant: the number of samples per bin "
            "depends on each roi's size"
        )
    counts = [np.ceil(extents[:, k] / np.float32(bins[k])).astype(np.int64) for k in (0, 1)]
    return np.maximum(counts[0], 0), np.maximum(counts[1], 0)


Pair = tuple[SSAValue, SSAValue]


def _corners(node: Node, rois: SSAValue, half_pixel: bool, ct: str) -> tuple[Pair, Pair]:
    """Each roi's start (y, x) and extent (height, width) as (R, 1) tensors."""
    e = node.emit
    scale, offset = float(node.attr("spatial_scale", 1.0)), 0.5 if half_pixel else 0.0
    cols = [cast(e, slice_axis(e, rois, 1, k, k + 1), ct) for k in range(4)]
    x0, y0, x1, y1 = [e.binary("subtract", e.binary("multiply", c, e.scalar(scale, ct)),
                               e.scalar(offset, ct)) for c in cols]  # fmt: skip
    height, width = e.binary("subtract", y1, y0), e.binary("subtract", x1, x0)
    if not half_pixel:  # malformed rois are forced to 1 × 1
        height = e.binary("max", height, e.scalar(1.0, ct))
        width = e.binary("max", width, e.scalar(1.0, ct))
    return (y0, x0), (height, width)


def _extents(node: Node, half_pixel: bool) -> np.ndarray | None:
    """Constant rois' (height, width) in the reference's float32 arithmetic."""
    value = node.constants[1]
    if value is None:
        return None
    scale = np.float32(node.attr("spatial_scale", 1.0))
    boxes = value.astype(np.float32) * scale - np.float32(0.5 if half_pixel else 0.0)
    extents = np.stack([boxes[:, 3] - boxes[:, 1], boxes[:, 2] - boxes[:, 0]], axis=1)
    return extents if half_pixel else np.maximum(extents, np.float32(1.0))


def _check(x: SSAValue, rois: SSAValue, batch: SSAValue) -> None:
    dims, rdims, bdims = shape_of(x), shape_of(rois), shape_of(batch)
    if tensor_type(x).dt not in FLOATS or len(dims) != 4:
        raise ImportProblem(f"X must be a 4-D float tensor, got {list(dims)}")
    if len(rdims) != 2 or rdims[1] != 4 or bdims != rdims[:1]:
        raise ImportProblem(
            f"rois {list(rdims)} and batch_indices {list(bdims)} must be (R, 4) and (R,)"
        )
    if tensor_type(batch).dt not in ("i32", "i64"):
        raise ImportProblem(f"batch_indices of type {tensor_type(batch).dt} are not supported")


def _half_pixel(node: Node) -> bool:
    """RoiAlign-10 has no coordinate_transformation_mode: it is output_half_pixel."""
    if node.opset < 16:
        return False
    modes = ("half_pixel", "output_half_pixel")
    return node.require("coordinate_transformation_mode", modes, "half_pixel") == "half_pixel"


def roi_align(node: Node) -> list[Result]:
    """Y[r, c, ph, pw] pooled over the samples of bin (ph, pw) of roi r in image
    batch_indices[r]."""
    e, x, rois, batch = node.emit, node.input(0), node.input(1), node.input(2)
    _check(x, rois, batch)
    dims, rdims = shape_of(x), shape_of(rois)
    mode = node.require("mode", ("avg", "max"), "avg")
    half_pixel = _half_pixel(node)
    bins = (int(node.attr("output_height", 1)), int(node.attr("output_width", 1)))
    if min(bins) < 1:
        raise ImportProblem(f"output size {list(bins)} must be positive")
    grids = _grids(node, rdims[0], bins, _extents(node, half_pixel))
    ct = compute_type(x)
    starts, extents = _corners(node, rois, half_pixel, ct)
    axes = [_samples(e, starts[k], extents[k], bins[k], grids[k], dims[2 + k]) for k in (0, 1)]
    counts = [shape_of(axes[k][2])[1] for k in (0, 1)]
    spread = [
        (_spread(e, i, k, counts[1 - k]), _spread(e, w, k, counts[1 - k]), None)
        for k, (i, w, _) in enumerate(axes)
    ]
    flat, weight, _ = combine(e, spread, dims[2:])
    assert weight is not None
    inside = e.binary(
        "and",
        e.reshape(axes[0][2], (rdims[0], counts[0], 1, 1)),
        e.reshape(axes[1][2], (rdims[0], 1, counts[1], 1)),
    )
    flat, weight, inside = [_bin_major(e, t, bins) for t in (flat, weight, inside)]
    values = gather_planes(e, x, cast(e, batch, "i64"), flat)
    y = _pool(e, values, weight, inside, mode, grids, ct)
    return [cast(e, y, tensor_type(x).dt)]


def _pool(
    e: Emitter, values: SSAValue, weight: SSAValue, inside: SSAValue, mode: str,
    grids: tuple[np.ndarray, np.ndarray], ct: str,
) -> SSAValue:  # fmt: skip
    """The neighbours (R, C, bins_y, bins_x, g_y, g_x, 4) times their weights (R, bins_y,
    bins_x, g_y, g_x, 4), pooled per bin: their sum over the roi's sample count, or
    their max (0 for a bin without samples). A sample outside the map weighs 0; one
    beyond its roi's own count takes no part."""
    rois, _, _, _, gy, gx, _ = shape_of(values)
    spread = (rois, 1, *shape_of(weight)[1:])
    products = e.binary("multiply", cast(e, values, ct), e.reshape(weight, spread))
    mask = e.reshape(inside, (rois, 1, *shape_of(inside)[1:]))
    products = select(e, products, e.scalar(0, ct), mask)
    counted = (np.arange(gy)[None, :] < grids[0][:, None])[:, None, None, None, :, None, None] & (
        np.arange(gx)[None, :] < grids[1][:, None]
    )[:, None, None, None, None, :, None]
    if mode == "avg":
        if not counted.all():
            products = select(e, products, e.scalar(0, ct), e.constant(counted))
        total = e.reduce(products, "add", 0.0, [4, 5, 6], keepdims=False)
        count_of = np.maximum(grids[0] * grids[1], 1).astype(NP_FLOAT[ct])
        return e.binary("divide", total, e.constant(count_of.reshape(rois, 1, 1, 1)))
    if counted.all():
        return e.reduce(products, "max", -math.inf, [4, 5, 6], keepdims=False)
    products = select(e, products, e.scalar(-math.inf, ct), e.constant(counted))
    best = e.reduce(products, "max", -math.inf, [4, 5, 6], keepdims=False)
    empty = e.constant((grids[0] * grids[1] == 0).reshape(rois, 1, 1, 1))
    return select(e, e.scalar(0, ct), best, empty)


CONVERTERS: dict[str, Converter] = {"RoiAlign": roi_align}
