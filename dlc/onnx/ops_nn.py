"""ONNX convolution, pooling, batch normalization and local response normalization
as graph ops."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_tensor import ConvolveOp, ReduceWindowOp
from dlc.onnx.emitter import Emitter, ImportProblem, ints_attr, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_pool_index import max_indices
from dlc.onnx.ops_slice import slice_axis
from dlc.onnx.ops_training import batch_norm_training

Pads = list[tuple[int, int]]


def _window_attrs(node: Node, spatial: int) -> tuple[list[int], list[int]]:
    strides = node.attr("strides") or [1] * spatial
    dilations = node.attr("dilations") or [1] * spatial
    if len(strides) != spatial or len(dilations) != spatial:
        raise ImportProblem(f"strides and dilations need {spatial} entries")
    return strides, dilations


def _pads(
    node: Node, dims: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
    dilations: Sequence[int],
) -> Pads:  # fmt: skip
    """(lo, hi) per spatial dimension from `auto_pad` and `pads`."""
    spatial = len(kernel)
    auto_pad = node.require("auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), "NOTSET")
    pads = node.attr("pads")
    if auto_pad == "NOTSET":
        pads = pads or [0] * (2 * spatial)
        if len(pads) != 2 * spatial or min(pads) < 0:
            raise ImportProblem(f"pads must be {2 * spatial} non-negative integers")
        return [(pads[i], pads[spatial + i]) for i in range(spatial)]
    if auto_pad == "VALID":
        return [(0, 0)] * spatial
    out: Pads = []
    for n, k, s, d in zip(dims, kernel, strides, dilations, strict=True):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        small = total // 2
        out.append((small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small))
    return out


def conv(node: Node) -> list[SSAValue]:
    e, w = node.emit, node.input(1)
    y = convolution(node, node.input(0), w)
    bias = node.optional(2)
    if bias is not None:
        spatial = len(shape_of(w)) - 2
        bias = e.reshape(bias, (1, shape_of(w)[0]) + (1,) * spatial)
        y = e.binary("add", y, bias)
    return [y]


def convolution(node: Node, x: SSAValue, w: SSAValue) -> SSAValue:
    """`convolve x kernel w` with Conv's attributes (also ConvInteger's, QLinearConv's)."""
    xs, ws = shape_of(x), shape_of(w)
    if len(xs) < 3 or len(ws) != len(xs):
        raise ImportProblem(f"input {xs} and weight {ws} need equal rank ≥ 3")
    spatial = len(xs) - 2
    kernel = node.attr("kernel_shape") or list(ws[2:])
    if list(kernel) != list(ws[2:]):
        raise ImportProblem(f"kernel_shape {kernel} differs from the weight's {list(ws[2:])}")
    group = node.attr("group", 1)
    if isinstance(group, int) and group >= 1 and xs[1] % group and xs[1] // group == ws[1]:
        # DLVM's convolve ignores the channels beyond group · weight channels; ONNX has none
        raise ImportProblem(f"input channels {xs[1]} are not group={group} times {ws[1]}")
    strides, dilations = _window_attrs(node, spatial)
    pads = _pads(node, xs[2:], kernel, strides, dilations)
    props = {
        "strides": ints_attr(strides),
        "padding": ints_attr([p for pair in pads for p in pair]),
        "right_dilation": ints_attr(dilations),
        "groups": IntAttr(node.attr("group", 1)),
    }
    return node.emit.op(ConvolveOp, [x, w], **props)


def _pool_pads(
    node: Node, dims: Sequence[int], kernel: Sequence[int], strides: Sequence[int]
) -> Pads:
    """Explicit pads, widened on the high side for `ceil_mode=1`: the last window must
    start inside the input or its low padding (ONNX's and PyTorch's rule)."""
    pads = _pads(node, dims, kernel, strides, [1] * len(kernel))
    if not node.attr("ceil_mode", 0):
        return pads
    out: Pads = []
    for n, k, s, (lo, hi) in zip(dims, kernel, strides, pads, strict=True):
        count = math.ceil((n + lo + hi - k) / s) + 1
        if (count - 1) * s >= n + lo:
            count -= 1
        out.append((lo, max(hi, (count - 1) * s + k - n - lo)))
    return out


def pool(node: Node) -> list[SSAValue]:
    """Max, average or Lp norm over windows: explicit padding (-inf or 0), the
    windows' max or sum (`_windows`), and for averages a division by each window's
    element count; LpPool sums |x|^p (zero padding adds nothing) and takes the p-th
    root."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    if len(dims) < 3:
        raise ImportProblem(f"input {dims} needs rank ≥ 3")
    kernel = node.attr("kernel_shape")
    if not kernel or len(kernel) != len(dims) - 2:
        raise ImportProblem(f"kernel_shape needs {len(dims) - 2} entries")
    strides, dilations = _window_attrs(node, len(kernel))
    is_max, is_lp = node.op_type == "MaxPool", node.op_type == "LpPool"
    if any(d != 1 for d in dilations) and node.attr("auto_pad", "NOTSET").startswith("SAME"):
        # onnxruntime and onnx's reference implementation disagree on these pads
        raise ImportProblem(f"auto_pad={node.attr('auto_pad')} with dilations is not supported")
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    pads = _pool_pads(node, dims[2:], spans, strides)
    dt = tensor_type(x).dt
    if is_lp:
        x = _lp_powers(node, x)
    padded = e.pad(x, [(0, 0), (0, 0), *pads], -math.inf if is_max else 0.0)
    y = _windows(e, padded, kernel, strides, dilations, "max" if is_max else "add")
    if is_max:
        return [y, *max_indices(node, padded, y, pads, (kernel, strides, dilations))]
    if is_lp:
        return [e.binary("power", y, e.scalar(1.0 / node.attr("p", 2), dt))]
    counts = _window_counts(node, dims[2:], kernel, strides, dilations, pads, shape_of(y)[2:])
    divisor = e.constant(counts.astype(np.float64 if dt == "f64" else np.float32))
    return [e.binary("divide", y, divisor)]


def _lp_powers(node: Node, x: SSAValue) -> SSAValue:
    """|x|^p (x² for p = 2) of LpPool, whose padding then adds zeros."""
    p = node.attr("p", 2)
    if not isinstance(p, int | float) or p <= 0:
        raise ImportProblem(f"p must be a positive number, got {p!r}")
    if p == 2:
        return node.emit.unary("square", x)
    magnitude = node.emit.binary("max", x, node.emit.unary("negate", x))
    return node.emit.binary("power", magnitude, node.emit.scalar(float(p), tensor_type(x).dt))


def _windows(
    e: Emitter, x: SSAValue, kernel: Sequence[int], strides: Sequence[int],
    dilations: Sequence[int], combinator: str,
) -> SSAValue:  # fmt: skip
    """Max or sum pooling of the padded `x`: a `reduceWindow`, or with dilated windows
    for a sum a convolution of each channel with a kernel of ones (rightDilation d), for
    a max one spatial axis at a time (the max over a box is the max over each axis in
    turn): per axis, when the stride is a multiple m of the dilation d, an undilated
    window of k with stride m over the grid x[::d] (every tap and window start lies on
    it); else the max of the `k` strided slices x[a·d :: s] (a < k), each of the
    output's length."""
    if all(d == 1 for d in dilations):
        props = {
            "window": ints_attr([1, 1, *kernel]),
            "strides": ints_attr([1, 1, *strides]),
            "padding": StringAttr("none"),
            "combinator": StringAttr(combinator),
        }
        init = e.scalar(-math.inf if combinator == "max" else 0.0, tensor_type(x).dt)
        return e.op(ReduceWindowOp, [x, init], **props)
    if combinator == "add":
        dims = shape_of(x)
        planes = e.reshape(x, (dims[0] * dims[1], 1, *dims[2:]))
        ones = e.splat(1.0, (1, 1, *kernel), tensor_type(x).dt)
        props = {"strides": ints_attr(strides), "right_dilation": ints_attr(dilations)}
        y = e.op(ConvolveOp, [planes, ones], **props)
        return e.reshape(y, (*dims[:2], *shape_of(y)[2:]))
    for axis, (k, s, d) in enumerate(zip(kernel, strides, dilations, strict=True), start=2):
        length = shape_of(x)[axis]
        out = (length - (k - 1) * d - 1) // s + 1
        if s % d == 0:  # taps and window starts on the grid x[d·q]: an undilated window
            grid = (k - 1) + (s // d) * (out - 1) + 1
            x = _axis_max(e, _strided(e, x, axis, 0, grid, d) if d > 1 else x, axis, k, s // d)
            continue
        slices = [_strided(e, x, axis, a * d, out, s) for a in range(k)]
        x = slices[0]
        for other in slices[1:]:
            x = e.binary("max", x, other)
    return x


def _axis_max(e: Emitter, x: SSAValue, axis: int, k: int, s: int) -> SSAValue:
    """The max over windows of `k` with stride `s` along `axis` only (a `reduceWindow`)."""
    window, strides = [1] * len(shape_of(x)), [1] * len(shape_of(x))
    window[axis], strides[axis] = k, s
    props = {
        "window": ints_attr(window),
        "strides": ints_attr(strides),
        "padding": StringAttr("none"),
        "combinator": StringAttr("max"),
    }
    return e.op(ReduceWindowOp, [x, e.scalar(-math.inf, tensor_type(x).dt)], **props)


def _strided(e: Emitter, x: SSAValue, axis: int, start: int, count: int, step: int) -> SSAValue:
    """x[..., start : start + count·step : step, ...] along `axis`: a contiguous slice
    (padded at the end to count·step), split into (count, step), column 0 kept."""
    dims = list(shape_of(x))
    end = min(dims[axis], start + count * step)
    x = slice_axis(e, x, axis, start, end)
    if end - start < count * step:
        pads = [(0, 0)] * len(dims)
        pads[axis] = (0, count * step - (end - start))
        x = e.pad(x, pads, -math.inf)
    if step == 1:
        return x
    split = dims[:axis] + [count, step] + dims[axis + 1 :]
    column = slice_axis(e, e.reshape(x, split), axis + 1, 0, 1)
    return e.reshape(column, dims[:axis] + [count] + dims[axis + 1 :])


def _window_counts(
    node: Node, dims: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
    dilations: Sequence[int], pads: Pads, out: Sequence[int],
) -> np.ndarray:  # fmt: skip
    """Elements each window averages: those of the input, or with count_include_pad
    those of the input and its explicit pads (never the ceil_mode overhang)."""
    include = node.attr("count_include_pad", 0)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    explicit = _pads(node, dims, spans, strides, [1] * len(kernel))
    counts = np.ones((), np.int64)
    for n, k, s, d, (lo, _), (elo, ehi), m in zip(
        dims, kernel, strides, dilations, pads, explicit, out, strict=True
    ):
        taps = (np.arange(m) * s - lo)[:, None] + np.arange(k) * d
        low, high = (-elo, n + ehi) if include else (0, n)
        per_axis = ((taps >= low) & (taps < high)).sum(axis=1)
        counts = np.multiply.outer(counts, per_axis)
    return counts.reshape((1, 1, *out))


def global_pool(node: Node) -> list[SSAValue]:
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    axes = list(range(2, len(dims)))
    if node.op_type == "GlobalMaxPool":
        return [e.reduce(x, "max", -math.inf, axes, keepdims=True)]
    total = e.reduce(x, "add", 0.0, axes, keepdims=True)
    count = float(np.prod(dims[2:]))
    return [e.binary("divide", total, e.scalar(count, tensor_type(x).dt))]


def batch_norm(node: Node) -> list[Result]:
    """Inference form: y = x · scale' + shift' with scale' = scale / sqrt(var + ε) and
    shift' = bias - mean · scale', folded at import time when the parameters are
    constants."""
    e, x = node.emit, node.input(0)
    if node.attr("training_mode", 0) or len([o for o in node.proto.output if o]) > 1:
        return batch_norm_training(node)
    node.require("spatial", (1,), 1)
    node.attr("momentum")
    node.attr("is_test")
    node.attr("consumed_inputs")
    eps = node.attr("epsilon", 1e-5)
    dims = shape_of(x)
    channel = (1, dims[1]) + (1,) * (len(dims) - 2)
    params = [node.constants[i] if i < len(node.constants) else None for i in range(1, 5)]
    dt = tensor_type(x).dt
    if all(p is not None for p in params):
        scale, bias, mean, var = (np.asarray(p, np.float64) for p in params)
        factor = scale / np.sqrt(var + eps)
        shift = bias - mean * factor
        np_dt = np.float64 if dt == "f64" else np.float32
        y = e.binary("multiply", x, e.constant(factor.reshape(channel).astype(np_dt)))
        return [e.binary("add", y, e.constant(shift.reshape(channel).astype(np_dt)))]
    gamma, beta, mu, sigma2 = (e.reshape(node.input(i), channel) for i in range(1, 5))
    std = e.unary("sqrt", e.binary("add", sigma2, e.scalar(eps, dt)))
    y = e.binary("divide", e.binary("subtract", x, mu), std)
    return [e.binary("add", e.binary("multiply", y, gamma), beta)]


def lrn(node: Node) -> list[SSAValue]:
    """y = x · (bias + alpha/size · Σ x²)^-beta, the sum over the `size` channels
    around each channel (floor((size-1)/2) below, ceil((size-1)/2) above): a zero-padded
    `reduceWindow` over the channel axis."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    if len(dims) < 3:
        raise ImportProblem(f"input {dims} needs rank ≥ 3")
    size = node.attr("size")
    if not isinstance(size, int) or size < 1:
        raise ImportProblem(f"size must be a positive integer, got {size!r}")
    alpha, beta = node.attr("alpha", 1e-4), node.attr("beta", 0.75)
    bias, dt = node.attr("bias", 1.0), tensor_type(x).dt
    below = (size - 1) // 2
    pads = [(0, 0), (below, size - 1 - below)] + [(0, 0)] * (len(dims) - 2)
    squares = e.pad(e.unary("square", x), pads, 0.0)
    props = {
        "window": ints_attr([1, size] + [1] * (len(dims) - 2)),
        "strides": ints_attr([1] * len(dims)),
        "padding": StringAttr("none"),
        "combinator": StringAttr("add"),
    }
    total = e.op(ReduceWindowOp, [squares, e.scalar(0.0, dt)], **props)
    base = e.binary(
        "add", e.binary("multiply", total, e.scalar(alpha / size, dt)), e.scalar(bias, dt)
    )
    return [e.binary("multiply", x, e.binary("power", base, e.scalar(-beta, dt)))]


def instance_norm(node: Node) -> list[SSAValue]:
    """y = scale · (x - mean) / sqrt(var + ε) + B, mean and (biased) variance over the
    spatial dimensions of each sample and channel."""
    e, x = node.emit, node.input(0)
    dims, dt = shape_of(x), tensor_type(x).dt
    if len(dims) < 3:
        raise ImportProblem(f"input {dims} needs rank ≥ 3")
    node.attr("consumed_inputs")
    eps, axes = node.attr("epsilon", 1e-5), list(range(2, len(dims)))
    count = e.scalar(float(np.prod(dims[2:])), dt)
    mean = e.binary("divide", e.reduce(x, "add", 0.0, axes, keepdims=True), count)
    centered = e.binary("subtract", x, mean)
    squares = e.reduce(e.unary("square", centered), "add", 0.0, axes, keepdims=True)
    std = e.unary("sqrt", e.binary("add", e.binary("divide", squares, count), e.scalar(eps, dt)))
    channel = (1, dims[1]) + (1,) * (len(dims) - 2)
    scale, bias = (e.reshape(node.input(i), channel) for i in (1, 2))
    return [e.binary("add", e.binary("multiply", e.binary("divide", centered, std), scale), bias)]


CONVERTERS: dict[str, Converter] = {
    "InstanceNormalization": instance_norm,
    "LRN": lrn,
    "Conv": conv,
    "MaxPool": pool,
    "AveragePool": pool,
    "LpPool": pool,
    "GlobalAveragePool": global_pool,
    "GlobalMaxPool": global_pool,
    "BatchNormalization": batch_norm,
}
