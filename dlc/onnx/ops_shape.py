"""ONNX shape ops (Reshape, Flatten, Transpose, Concat, Squeeze, Unsqueeze,
DepthToSpace, SpaceToDepth), ConstantOfShape and Identity (Dropout: ops_training.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import helper, numpy_helper
from xdsl.ir import SSAValue

from dlc.onnx.emitter import ELEMENT_TYPES, ImportProblem, shape_of
from dlc.onnx.limits import check_elements
from dlc.onnx.node import Converter, Node


def reshape(node: Node) -> list[SSAValue]:
    """0 copies the input's dimension (unless allowzero), -1 takes the rest."""
    x = node.input(0)
    dims = shape_of(x)
    if node.opset < 5:
        target = node.attr("shape")
    else:
        value = node.constant(1, "shape")
        if value is None:
            raise ImportProblem("the shape input is missing")
        target = [int(d) for d in value.reshape(-1)]
    allowzero = node.attr("allowzero", 0)
    out = [dims[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    if any(isinstance(d, str) for d in dims):
        return [node.emit.reshape(x, symbolic_target(dims, out, target))]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ImportProblem(f"shape {target} is not a valid target shape")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        size = int(np.prod(dims))
        if known == 0 or size % known:
            raise ImportProblem(f"cannot reshape {list(dims)} to {target}")
        out[out.index(-1)] = size // known
    if int(np.prod(out)) != int(np.prod(dims)):
        raise ImportProblem(f"cannot reshape {list(dims)} to {target}")
    return [node.emit.reshape(x, out)]


def symbolic_target(
    dims: Sequence[int | str], out: list[int | str], target: list[int]
) -> list[int | str]:
    """The shape `out` of a Reshape of an input of shape `dims` with symbolic dimensions,
    its -1 resolved: the input's symbols the target lacks (at most one, at -1) times
    the ratio of the static extents. Each symbol must stay whole (a dimension `%n`
    cannot be split or merged with another yet)."""
    static = [int(np.prod([d for d in ds if isinstance(d, int)])) for ds in (dims, out)]
    left = [d for d in dims if isinstance(d, str)]
    for d in out:
        if isinstance(d, str) and d in left:
            left.remove(d)
    rest: int | str | None = None
    if out.count(-1) == 1 and len(left) <= 1 and static[1] != 0 and static[0] % -static[1] == 0:
        ratio = static[0] // -static[1]
        rest = left[0] if left and ratio == 1 else None if left else ratio
    resolved = [rest if d == -1 else d for d in out]
    stays = sorted(d for d in dims if isinstance(d, str))
    if rest is None and -1 in out or sorted(d for d in resolved if isinstance(d, str)) != stays:
        raise ImportProblem(
            f"cannot reshape {list(dims)} to {target}: symbolic dimensions stay whole"
        )
    if int(np.prod([d for d in resolved if isinstance(d, int)])) != static[0]:
        raise ImportProblem(f"cannot reshape {list(dims)} to {target}")
    return [d for d in resolved if d is not None]


def flatten(node: Node) -> list[SSAValue]:
    x = node.input(0)
    dims = shape_of(x)
    axis = node.attr("axis", 1)
    if not -len(dims) <= axis <= len(dims):
        raise ImportProblem(f"axis {axis} is out of range for rank {len(dims)}")
    if axis < 0:
        axis += len(dims)
    shape = (int(np.prod(dims[:axis])), int(np.prod(dims[axis:])))
    return [node.emit.reshape(x, shape)]


def transpose(node: Node) -> list[SSAValue]:
    x = node.input(0)
    rank = len(shape_of(x))
    perm = node.attr("perm") or list(range(rank))[::-1]
    if sorted(perm) != list(range(rank)):
        raise ImportProblem(f"perm {perm} is not a permutation of {rank} axes")
    return [node.emit.transpose(x, perm)]


def _blocks(node: Node, x: SSAValue) -> tuple[list[int], int]:
    """The NCHW dimensions of a DepthToSpace/SpaceToDepth input and its block size."""
    dims, b = list(shape_of(x)), int(node.attr("blocksize", 0))
    if len(dims) != 4:
        raise ImportProblem(f"the input has rank {len(dims)}, expected 4 (N, C, H, W)")
    if b < 1:
        raise ImportProblem(f"blocksize {b} must be positive")
    return dims, b


def depth_to_space(node: Node) -> list[SSAValue]:
    """Channels to b x b spatial blocks: reshape, transpose, reshape (the spec's
    formula); DCR takes the block offset from the channel's high part, CRD from its
    low part."""
    e, x = node.emit, node.input(0)
    (n, c, h, w), b = _blocks(node, x)
    mode = node.require("mode", ("DCR", "CRD"), "DCR")
    if c % (b * b):
        raise ImportProblem(f"{c} channels are not a multiple of blocksize^2 = {b * b}")
    if mode == "DCR":
        y = e.transpose(e.reshape(x, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
    else:
        y = e.transpose(e.reshape(x, [n, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
    return [e.reshape(y, [n, c // (b * b), h * b, w * b])]


def space_to_depth(node: Node) -> list[SSAValue]:
    """b x b spatial blocks to channels (DepthToSpace's inverse; the `mode` onnx's
    reference and node tests give it, though its schema has none: DCR by default)."""
    e, x = node.emit, node.input(0)
    (n, c, h, w), b = _blocks(node, x)
    mode = node.require("mode", ("DCR", "CRD"), "DCR")
    if h % b or w % b:
        raise ImportProblem(f"the spatial size {h} x {w} is not a multiple of blocksize {b}")
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    y = e.transpose(e.reshape(x, [n, c, h // b, b, w // b, b]), perm)
    return [e.reshape(y, [n, c * b * b, h // b, w // b])]


def concat(node: Node) -> list[SSAValue]:
    values = [node.input(i) for i in range(len(node.names))]
    axis = node.axis(node.attr("axis", 1 if node.opset < 4 else 0), len(shape_of(values[0])))
    return [node.emit.concatenate(values, axis)]


def _axes(node: Node, rank: int) -> list[int] | None:
    if node.opset >= 13:
        value = node.constant(1, "axes")
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    else:
        axes = node.attr("axes")
    return None if axes is None else sorted({node.axis(a, rank) for a in axes})


def squeeze(node: Node) -> list[SSAValue]:
    x = node.input(0)
    dims = shape_of(x)
    axes = _axes(node, len(dims))
    if axes is None:
        axes = [i for i, d in enumerate(dims) if d == 1]
    if any(dims[a] != 1 for a in axes):
        raise ImportProblem(f"cannot squeeze axes {axes} of {list(dims)}")
    return [node.emit.reshape(x, [d for i, d in enumerate(dims) if i not in axes])]


def unsqueeze(node: Node) -> list[SSAValue]:
    x = node.input(0)
    dims = list(shape_of(x))
    count = len(node.attr("axes") or []) if node.opset < 13 else None
    if count is None:
        value = node.constant(1, "axes")
        count = 0 if value is None else value.size
    axes = _axes(node, len(dims) + count) or []
    for a in axes:
        dims.insert(a, 1)
    return [node.emit.reshape(x, dims)]


def identity(node: Node) -> list[SSAValue]:
    return [node.input(0)]


def constant_of_shape(node: Node) -> list[SSAValue]:
    """A splat of `value` (one element, default f32 0); small ones fold at import time
    (fold.py), large ones (the weights of onnx's light models) stay one scalar."""
    value = node.attr("value")
    array = np.zeros(1, np.float32) if value is None else numpy_helper.to_array(value)
    if array.size != 1:
        raise ImportProblem(f"value must have one element, got {array.size}")
    shape = node.constant(0, "shape")
    if shape is None:
        raise ImportProblem("the shape input is missing")
    dims = [int(d) for d in shape.reshape(-1)]
    if min(dims, default=0) < 0:
        raise ImportProblem(f"shape {dims} has a negative dimension")
    check_elements(dims, "the output", node.limits)
    dt = ELEMENT_TYPES.get(helper.np_dtype_to_tensor_dtype(array.dtype))
    if dt is None:
        raise ImportProblem(f"element type {array.dtype} is not supported")
    return [node.emit.splat(array.reshape(()).item(), dims, dt)]


CONVERTERS: dict[str, Converter] = {
    "ConstantOfShape": constant_of_shape,
    "Reshape": reshape,
    "Flatten": flatten,
    "Transpose": transpose,
    "Concat": concat,
    "Squeeze": squeeze,
    "Unsqueeze": unsqueeze,
    "Identity": identity,
    "DepthToSpace": depth_to_space,
    "SpaceToDepth": space_to_depth,
}
