"""ONNX ConvTranspose as a `convolve` (DLVM's leftDilation is the input dilation).

A transposed convolution scatters each input element, times the kernel, to the
outputs o = i·s + k·d - pad_lo. Equivalently, it is the correlation of the input
dilated by the strides s with the spatially flipped kernel whose input and output
channels are swapped (per group), with (K-1)·d - pad_lo zeros before and (K-1)·d -
pad_hi + output_padding after each spatial axis. A negative count (pads larger than the
kernel's span) crops the convolution's result instead. The weight's reordering is a
reshape, a transpose and a `reverse`, folded at compile time for constant weights, so
the operator runs through the convolution kernels and differentiates like them.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_tensor import ConvolveOp, ReverseOp
from dlc.onnx.emitter import Emitter, ImportProblem, ints_attr, shape_of
from dlc.onnx.node import Converter, Node
from dlc.onnx.ops_slice import slice_axis

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _spatial_attr(node: Node, name: str, spatial: int, default: int) -> list[int]:
    values = node.attr(name) or [default] * spatial
    if len(values) != spatial:
        raise ImportProblem(f"{name} needs {spatial} entries, got {values}")
    return [int(v) for v in values]


def transpose_pads(
    node: Node, dims: Sequence[int], natural: Sequence[int]
) -> list[tuple[int, int]]:
    """(lo, hi) crop of each spatial axis of the uncropped output (`natural` long)
    from `pads`, `auto_pad` and `output_shape` (the spec's rules; where onnx's
    reference implementation computes something else the case is refused)."""
    spatial = len(dims)
    auto_pad = node.require("auto_pad", AUTO_PADS, "NOTSET")
    output_shape = node.attr("output_shape")
    pads = node.attr("pads")
    if output_shape is not None:
        output_shape = [int(v) for v in output_shape[-spatial:]]
        if len(output_shape) != spatial:
            raise ImportProblem(f"output_shape needs {spatial} entries")
    elif auto_pad.startswith("SAME"):
        strides = _spatial_attr(node, "strides", spatial, 1)
        output_shape = [n * s for n, s in zip(dims, strides, strict=True)]
    if auto_pad == "VALID" or (output_shape is None and pads is None):
        pads = [0] * (2 * spatial)
    if output_shape is None:
        if len(pads) != 2 * spatial:
            raise ImportProblem(f"pads must be {2 * spatial} integers")
        return [(pads[i], pads[spatial + i]) for i in range(spatial)]
    out: list[tuple[int, int]] = []
    for n, want in zip(natural, output_shape, strict=True):
        total = n - want
        small = total // 2
        lo, hi = (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)
        if auto_pad in ("NOTSET", "VALID") and (pads is not None or lo != 0):
            # the reference pads (or crops) at the end only, ignoring the spec's split
            raise ImportProblem(
                f"output_shape {output_shape} with auto_pad={auto_pad} is not supported "
                "(onnx's reference and the operator's spec disagree)"
            )
        out.append((lo, hi))
    return out


def flipped_kernel(e: Emitter, w: SSAValue, group: int) -> SSAValue:
    """(C, M/g, K…) -> (M, C/g, K…) per group, each spatial axis reversed."""
    ws = shape_of(w)
    cig, cog, kernel = ws[0] // group, ws[1], ws[2:]
    spatial = list(range(len(kernel)))
    if group == 1:
        w = e.transpose(w, [1, 0, *(2 + i for i in spatial)])
    else:
        w = e.reshape(w, (group, cig, cog, *kernel))
        w = e.transpose(w, [0, 2, 1, *(3 + i for i in spatial)])
        w = e.reshape(w, (group * cog, cig, *kernel))
    return e.op(ReverseOp, [w], dims=ints_attr([2 + i for i in spatial]))


def conv_transpose(node: Node) -> list[SSAValue]:
    e, x, w = node.emit, node.input(0), node.input(1)
    xs, ws = shape_of(x), shape_of(w)
    if len(xs) < 3 or len(ws) != len(xs):
        raise ImportProblem(f"input {xs} and weight {ws} need equal rank ≥ 3")
    spatial, group = len(xs) - 2, int(node.attr("group", 1))
    if group < 1 or xs[1] != ws[0] or xs[1] % group:
        raise ImportProblem(f"input {xs} and weight {ws} do not fit group={group}")
    kernel = node.attr("kernel_shape") or list(ws[2:])
    if list(kernel) != list(ws[2:]):
        raise ImportProblem(f"kernel_shape {kernel} differs from the weight's {list(ws[2:])}")
    strides = _spatial_attr(node, "strides", spatial, 1)
    dilations = _spatial_attr(node, "dilations", spatial, 1)
    extra = _spatial_attr(node, "output_padding", spatial, 0)
    spans = [(k - 1) * d for k, d in zip(kernel, dilations, strict=True)]
    natural = [
        (n - 1) * s + span + 1 + p
        for n, s, span, p in zip(xs[2:], strides, spans, extra, strict=True)
    ]
    crops = transpose_pads(node, xs[2:], natural)
    if any(n - lo - hi <= 0 for n, (lo, hi) in zip(natural, crops, strict=True)):
        raise ImportProblem(f"pads {crops} leave an empty output of the {natural} computed")
    padding = [
        (span - lo, span - hi + p) for span, (lo, hi), p in zip(spans, crops, extra, strict=True)
    ]
    props = {
        "padding": ints_attr([max(v, 0) for pair in padding for v in pair]),
        "left_dilation": ints_attr(strides),
        "right_dilation": ints_attr(dilations),
        "groups": IntAttr(group),
    }
    y = e.op(ConvolveOp, [x, flipped_kernel(e, w, group)], **props)
    for axis, (lo, hi) in enumerate(padding, start=2):
        length = shape_of(y)[axis]
        if lo < 0 or hi < 0:
            y = slice_axis(e, y, axis, max(-lo, 0), length - max(-hi, 0))
    bias = node.optional(2)
    if bias is not None:
        y = e.binary("add", y, e.reshape(bias, (1, ws[1] * group) + (1,) * spatial))
    return [y]


CONVERTERS: dict[str, Converter] = {"ConvTranspose": conv_transpose}
