"""ONNX Resize (opset 11 and later) and Upsample with constant scales or sizes, as
products with constant interpolation matrices.

Resize is separable: resizing an N-D tensor resizes one axis at a time, and resizing
one axis from n to m elements multiplies that axis by an m × n matrix whose row i holds
the weights output i gives each input (nearest: a single 1; linear: two weights; cubic:
four; antialias: the filter's footprint). The matrices are built at import time in
NumPy with the formulas of onnx's reference implementation (`onnx.reference.ops.
op_resize`, Apache-2.0), in float64, and rounded once to the tensor's data type; each
axis becomes one `dot`. `tf_crop_and_resize` adds `extrapolation_value` where the
source coordinate falls outside the input (those matrix rows are zero).

Caveat: a `dot` multiplies every input of a row by its weight, zeros included, so an
infinite or NaN input makes its whole output row NaN, where ONNX only spreads it to the
outputs that read it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.ir import SSAValue

from dlc.dialects.graph_tensor import DotOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.limits import check_elements
from dlc.onnx.node import Converter, Node, Result

Coeffs = Callable[[float, float], np.ndarray]

TRANSFORMS = (
    "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
    "asymmetric", "tf_crop_and_resize",
)  # fmt: skip
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
POLICIES = ("stretch", "not_larger", "not_smaller")
NP_FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


# ---- interpolation coefficients (onnx's reference formulas) -------------------------


def nearest_coeffs(mode: str) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        up = {
            "round_prefer_floor": ratio > 0.5,
            "round_prefer_ceil": ratio >= 0.5,
            "floor": False,
            "ceil": True,
        }[mode]
        return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])

    return coeffs


def linear_coeffs(antialias: bool) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        weights = np.clip(1 - np.abs(args), 0, 1)
        return weights / weights.sum()

    return coeffs


def _cubic(x: float, a: float) -> float:
    x = abs(x)
    if x <= 1:
        return (a + 2) * x**3 - (a + 3) * x**2 + 1
    if x < 2:
        return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return 0.0


def cubic_coeffs(a: float, antialias: bool) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([_cubic(ratio + 1, a), _cubic(ratio, a), _cubic(1 - ratio, a),
                             _cubic(2 - ratio, a)])  # fmt: skip
        scale = min(scale, 1.0)
        start = int(np.floor(-2 / scale) + 1)
        weights = np.array([_cubic(scale * (i - ratio), a) for i in range(start, 2 - start)])
        return weights / weights.sum()

    return coeffs


# ---- one axis -----------------------------------------------------------------------


def source_coordinates(
    transform: str, size: int, out: int, scale: float, roi: tuple[float, float]
) -> np.ndarray:
    """Where each output position samples the input (onnx's `_compute_x_ori`)."""
    y = np.arange(out, dtype=np.float64)
    width = scale * size
    if transform == "align_corners":
        return np.zeros(out) if width == 1 else y * (size - 1) / (width - 1)
    if transform == "asymmetric":
        return y / scale
    if transform == "tf_crop_and_resize":
        lo, hi = roi
        if width == 1:
            x = np.full(out, (hi - lo) * (size - 1) / 2)
        else:
            x = y * (hi - lo) * (size - 1) / (width - 1)
        return x + lo * (size - 1)
    if transform == "pytorch_half_pixel" and width == 1:
        return np.full(out, -0.5)
    if transform == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5


def axis_matrix(
    coeffs: Coeffs, transform: str, size: int, out: int, scale: float,
    roi: tuple[float, float], exclude_outside: bool,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The out × size interpolation matrix of one axis, and the mask of output
    positions that are extrapolated (tf_crop_and_resize) with their rows zeroed."""
    x = source_coordinates(transform, size, out, scale, roi)
    matrix = np.zeros((out, size))
    for i, xi in enumerate(x):
        base = math.floor(xi)
        ratio = 1.0 if xi == base else xi - base
        weights = np.asarray(coeffs(ratio, scale), dtype=np.float64)
        idx = _neighbours(xi, len(weights))
        if exclude_outside:
            weights = np.where((idx < 0) | (idx >= size), 0.0, weights)
            total = weights.sum()
            weights = weights / (total if total != 0 else 1.0)
        np.add.at(matrix[i], np.clip(idx, 0, size - 1), weights)
    outside = (x < 0) | (x > size - 1) if transform == "tf_crop_and_resize" else x != x
    matrix[outside] = 0.0
    return matrix, outside


def _neighbours(x: float, n: int) -> np.ndarray:
    """The n indices nearest x, ties to the smaller (onnx's `_get_neighbor_idxes`, edge
    padding left to the caller's clamp)."""
    pad = math.ceil(n / 2)
    padded = x + pad
    p = math.floor(padded)
    frac = padded - p
    if n % 2 == 0:
        start = p - n // 2 + (0 if frac == 0 else 1)
    else:
        start = p - (n - 1) // 2 + (0 if frac <= 0.5 else 1)
    return np.arange(start, start + n) - pad


def resize_axis(
    e: Emitter, x: SSAValue, axis: int, matrix: np.ndarray, outside: np.ndarray, fill: float
) -> SSAValue:
    """x with `axis` multiplied by `matrix` (out × size), `fill` where `outside`."""
    dims = shape_of(x)
    dt = tensor_type(x).dt
    rank = len(dims)
    perm = [*(i for i in range(rank) if i != axis), axis]
    front = e.transpose(x, perm)
    rows = int(np.prod(dims)) // dims[axis]
    flat = e.reshape(front, (rows, dims[axis]))
    weights = e.constant(np.ascontiguousarray(matrix.T).astype(NP_FLOAT[dt]))
    y = e.op(DotOp, [flat, weights])
    if outside.any() and fill != 0.0:
        y = e.binary("add", y, e.constant((outside * fill).astype(NP_FLOAT[dt])[None, :]))
    out_dims = [dims[i] for i in perm[:-1]] + [matrix.shape[0]]
    y = e.reshape(y, out_dims)
    return e.transpose(y, [int(i) for i in np.argsort(perm)])


# ---- the operator -------------------------------------------------------------------


def _floats(node: Node, i: int, what: str) -> list[float] | None:
    value = node.constant(i, what)
    if value is None or value.size == 0:
        return None
    return [float(v) for v in value.reshape(-1)]


def target_shape(
    node: Node, dims: Sequence[int], axes: list[int], scales: list[float] | None,
    sizes: list[float] | None,
) -> tuple[list[float], list[int]]:  # fmt: skip
    """Per-axis scales and output sizes (onnx's `_interpolate_nd`)."""
    rank = len(dims)
    scale_of, size_of = [1.0] * rank, list(dims)
    if sizes is not None:
        if len(sizes) != len(axes):
            raise ImportProblem(f"sizes has {len(sizes)} values for {len(axes)} axes")
        for a, s in zip(axes, sizes, strict=True):
            size_of[a] = int(s)
            scale_of[a] = int(s) / dims[a]
        policy = node.require("keep_aspect_ratio_policy", POLICIES, "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            scale = pick(scale_of[a] for a in axes)
            for a in axes:
                scale_of[a] = scale
                size_of[a] = int(scale * dims[a] + 0.5)
    elif scales is not None:
        node.ignore("keep_aspect_ratio_policy")  # it applies to sizes only
        if len(scales) != len(axes):
            raise ImportProblem(f"scales has {len(scales)} values for {len(axes)} axes")
        for a, s in zip(axes, scales, strict=True):
            if s <= 0:
                raise ImportProblem(f"scale {s} must be positive")
            scale_of[a] = s
            size_of[a] = int(s * dims[a])
    else:
        raise ImportProblem("one of scales and sizes must be given")
    if min(size_of) <= 0:
        raise ImportProblem(f"the output shape {size_of} has an empty dimension")
    check_sizes(node, dims, size_of)
    return scale_of, size_of


def check_sizes(node: Node, dims: Sequence[int], size_of: Sequence[int]) -> None:
    """The output and each axis's interpolation matrix (out x in) within the element
    limit, checked before either is built."""
    check_elements(size_of, "the output", node.limits)
    for a, (n, out) in enumerate(zip(dims, size_of, strict=True)):
        if n != out:
            check_elements([out, n], f"the interpolation matrix of axis {a}", node.limits)


def _coefficients(node: Node, mode: str) -> Coeffs:
    antialias = bool(node.attr("antialias", 0))
    node.ignore(*{"nearest": ["cubic_coeff_a"], "linear": ["cubic_coeff_a", "nearest_mode"],
                  "cubic": ["nearest_mode"]}[mode])  # fmt: skip
    if mode == "nearest":
        if antialias:
            raise ImportProblem("antialias=1 is not supported with mode='nearest'")
        return nearest_coeffs(node.require("nearest_mode", NEAREST_MODES, "round_prefer_floor"))
    if mode == "linear":
        return linear_coeffs(antialias)
    return cubic_coeffs(float(node.attr("cubic_coeff_a", -0.75)), antialias)


def resize(node: Node) -> list[Result]:
    """Resize from opset 11: roi, scales and sizes constant inputs, every mode."""
    if node.opset < 11:
        raise ImportProblem("Resize before opset 11 is not supported")
    e, x = node.emit, node.input(0)
    dims, dt = shape_of(x), tensor_type(x).dt
    mode = node.require("mode", ("nearest", "linear", "cubic"), "nearest")
    if dt not in NP_FLOAT:
        raise ImportProblem(f"Resize of {dt} tensors is not supported (only f16, f32, f64)")
    transform = node.require("coordinate_transformation_mode", TRANSFORMS, "half_pixel")
    rank = len(dims)
    axes_attr = node.attr("axes")
    axes = list(range(rank)) if axes_attr is None else [node.axis(a, rank) for a in axes_attr]
    roi = _floats(node, 1, "roi") if transform == "tf_crop_and_resize" else None
    if transform == "tf_crop_and_resize" and (roi is None or len(roi) != 2 * len(axes)):
        raise ImportProblem("tf_crop_and_resize needs a roi of two values per axis")
    scales, sizes = _floats(node, 2, "scales"), _floats(node, 3, "sizes")
    scale_of, size_of = target_shape(node, dims, axes, scales, sizes)
    coeffs = _coefficients(node, mode)
    exclude = bool(node.attr("exclude_outside", 0))
    fill = float(node.attr("extrapolation_value", 0.0))
    for k, a in enumerate(axes):
        window = (0.0, 1.0) if roi is None else (roi[k], roi[len(axes) + k])
        if math.isclose(scale_of[a], 1.0) and size_of[a] == dims[a] and window == (0.0, 1.0):
            continue
        m, outside = axis_matrix(coeffs, transform, dims[a], size_of[a], scale_of[a], window,
                                 exclude)  # fmt: skip
        x = resize_axis(e, x, a, m, outside, fill)
    return [x]


def upsample(node: Node) -> list[Result]:
    """Upsample (opsets 7 to 9, deprecated since 10): scales as an attribute (7) or a
    constant input (9); nearest copies floor(y / scale), linear is asymmetric."""
    e, x = node.emit, node.input(0)
    dims, dt = shape_of(x), tensor_type(x).dt
    mode = node.require("mode", ("nearest", "linear"), "nearest")
    if dt not in NP_FLOAT:
        raise ImportProblem(f"Upsample of {dt} tensors is not supported (only f16, f32, f64)")
    scales = node.attr("scales") if node.opset < 9 else _floats(node, 1, "scales")
    if scales is None or len(scales) != len(dims) or min(scales) < 1:
        raise ImportProblem(f"scales {scales} must be one number >= 1 per dimension")
    coeffs = nearest_coeffs("floor") if mode == "nearest" else linear_coeffs(False)
    check_sizes(node, dims, [int(size * scale) for size, scale in zip(dims, scales, strict=True)])
    for a, (size, scale) in enumerate(zip(dims, scales, strict=True)):
        out = int(size * scale)
        if out != size:
            m, outside = axis_matrix(coeffs, "asymmetric", size, out, scale, (0.0, 1.0), False)
            x = resize_axis(e, x, a, m, outside, 0.0)
    return [x]


CONVERTERS: dict[str, Converter] = {"Resize": resize, "Upsample": upsample}
