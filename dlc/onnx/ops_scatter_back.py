"""ONNX Col2Im and MaxUnpool: values put back into an image by `scatterElements`.

Col2Im sums each column entry into the image position its block and kernel offset
name (block · stride - pad_lo + offset · dilation): a scatter-add of the columns into
zeros at constant positions, with positions in the padding sent to one extra slot
that is cut off afterwards, so every sum is exactly the reference's and an infinite
or NaN entry reaches only its own position. MaxUnpool writes each value at its flat
index into zeros of the unpooled shape, one (batch, channel) plane at a time (a
replacing scatter: the last of equal indices wins; an index outside its own plane, as
MaxPool never makes, is a run-time IndexError) and pads the result with zeros up to
`output_shape`. A scatter costs (output elements × updates) per plane
(docs/reference/language.md, "Gathers and scatters").
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntAttr, StringAttr

from dlc.dialects.graph_elementwise import SelectOp
from dlc.dialects.graph_gather import ScatterElementsOp
from dlc.onnx.emitter import ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_slice import slice_axis


def _ints(node: Node, i: int, what: str) -> list[int]:
    value = node.constant(i, what)
    if value is None:
        raise ImportProblem(f"{what} (input {i}) must be given")
    return [int(v) for v in value.reshape(-1)]


def _spatial(node: Node, name: str, count: int, default: int) -> list[int]:
    values = node.attr(name) or [default] * count
    if len(values) != count:
        raise ImportProblem(f"{name} needs {count} entries, got {values}")
    return [int(v) for v in values]


def col2im_positions(
    image: Sequence[int], block: Sequence[int], strides: Sequence[int],
    dilations: Sequence[int], pads: Sequence[int],
) -> np.ndarray:  # fmt: skip
    """The flat image position of each (kernel offset, block) column entry, in the
    column order; prod(image) for entries that land in the padding."""
    n = len(image)
    counts = [
        (size + pads[i] + pads[n + i] - d * (k - 1) - 1) // s + 1
        for i, (size, k, s, d) in enumerate(zip(image, block, strides, dilations, strict=True))
    ]
    if min(counts) < 1:
        raise ImportProblem(f"the blocks {list(block)} do not fit the image {list(image)}")
    out = []
    for offset in itertools.product(*(range(k) for k in block)):
        for where in itertools.product(*(range(c) for c in counts)):
            at = [
                w * s - pads[i] + o * d
                for i, (w, s, o, d) in enumerate(
                    zip(where, strides, offset, dilations, strict=True)
                )
            ]
            inside = all(0 <= a < size for a, size in zip(at, image, strict=True))
            out.append(int(np.ravel_multi_index(at, image)) if inside else int(np.prod(image)))
    return np.asarray(out, np.int64).reshape(int(np.prod(block)), int(np.prod(counts)))


def col2im(node: Node) -> list[Result]:
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    image, block = _ints(node, 1, "image_shape"), _ints(node, 2, "block_shape")
    n = len(image)
    if len(dims) != 3 or len(block) != n or min(image + block) < 1:
        raise ImportProblem(f"input {dims}, image_shape {image} and block_shape {block} do not fit")
    strides, dilations = _spatial(node, "strides", n, 1), _spatial(node, "dilations", n, 1)
    pads = _spatial(node, "pads", 2 * n, 0)
    positions = col2im_positions(image, block, strides, dilations, pads)
    kernel, blocks = positions.shape
    if dims[1] % kernel or dims[2] != blocks:
        raise ImportProblem(f"input {dims} does not hold {kernel} offsets × {blocks} blocks")
    batch, channels = dims[0], dims[1] // kernel
    updates = e.reshape(x, (batch, channels, kernel * blocks))
    index = e.broadcast_to(e.constant(positions.reshape(1, 1, -1)), shape_of(updates))
    size = int(np.prod(image))
    zeros = e.splat(0.0, (batch, channels, size + 1), tensor_type(x).dt)
    sums = e.op(
        ScatterElementsOp, [updates, zeros, index], axis=IntAttr(2), reduction=StringAttr("add")
    )
    return [e.reshape(slice_axis(e, sums, 2, 0, size), (batch, channels, *image))]


def max_unpool(node: Node) -> list[Result]:
    e, x, idx = node.emit, node.input(0), node.input(1)
    dims = shape_of(x)
    if len(dims) < 3 or shape_of(idx) != dims:
        raise ImportProblem(f"input {dims} and indices {shape_of(idx)} must match, rank ≥ 3")
    kernel = node.attr("kernel_shape")
    if not kernel or len(kernel) != len(dims) - 2:
        raise ImportProblem(f"kernel_shape needs {len(dims) - 2} entries")
    n = len(kernel)
    strides, pads = _spatial(node, "strides", n, 1), _spatial(node, "pads", 2 * n, 0)
    inferred = [
        (size - 1) * s - pads[i] - pads[n + i] + k
        for i, (size, s, k) in enumerate(zip(dims[2:], strides, kernel, strict=True))
    ]
    full = [*dims[:2], *inferred]
    wanted = full if len(node.names) < 3 or not node.names[2] else _ints(node, 2, "output_shape")
    if len(wanted) != len(full) or any(w < f for w, f in zip(wanted, full, strict=True)):
        raise ImportProblem(f"output_shape {wanted} is smaller than the unpooled {full}")
    planes, size, area = dims[0] * dims[1], int(np.prod(dims[2:])), int(np.prod(inferred))
    base = np.arange(planes, dtype=np.int64).reshape(planes, 1) * area
    local = e.binary("subtract", e.reshape(idx, (planes, size)), e.constant(base))
    # an index of another plane stays out of range (an IndexError, never a wrap-around)
    local = e.op(
        SelectOp, [e.scalar(area, "i64"), local, e.binary("lessThan", local, e.scalar(0, "i64"))]
    )
    zeros = e.splat(0.0, (planes, area), tensor_type(x).dt)
    y = e.op(ScatterElementsOp, [e.reshape(x, (planes, size)), zeros, local], axis=IntAttr(1))
    y = e.reshape(y, full)
    return [e.pad(y, [(0, w - f) for w, f in zip(wanted, full, strict=True)], 0.0)]


CONVERTERS: dict[str, Converter] = {"Col2Im": col2im, "MaxUnpool": max_unpool}
