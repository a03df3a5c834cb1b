"""ONNX Slice, Split, Expand, Tile and Pad with constant parameters, from `slice`
(rows of dimension 0, so other axes are moved to the front and back), `reverse`,
`gather` (strided slices), `concatenate` and broadcasting. A result with a dimension
of size 0 is a literal without elements (the graph dialect has empty tensors)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntAttr
from xdsl.ir import SSAValue

from dlc.dialects import graph_dims
from dlc.dialects.graph_elementwise import SelectOp
from dlc.dialects.graph_gather import GatherOp
from dlc.dialects.graph_tensor import ReverseOp, SliceOp
from dlc.onnx.emitter import Emitter, ImportProblem, ints_attr, shape_of, tensor_type
from dlc.onnx.limits import check_elements, check_parts
from dlc.onnx.node import Converter, Node, Result


def slice_axis(e: Emitter, x: SSAValue, axis: int, lo: int, hi: int) -> SSAValue:
    """x[..., lo:hi, ...] along `axis` (0 <= lo < hi <= its size)."""
    dims = shape_of(x)
    if lo == 0 and hi == dims[axis]:
        return x
    perm = [axis, *(i for i in range(len(dims)) if i != axis)]
    front = e.transpose(x, perm)
    sliced = e.op(SliceOp, [front], lower=IntAttr(lo), upper=IntAttr(hi - 1))
    return e.transpose(sliced, [int(i) for i in np.argsort(perm)])


def static_extent(dims: Sequence[int | str], axis: int, op_type: str) -> int:
    """The extent of `dims[axis]`; an ImportProblem when it is symbolic (slices of the
    other dimensions keep theirs)."""
    d = dims[axis]
    if isinstance(d, str):
        raise ImportProblem(
            f"{op_type} along symbolic dimension {graph_dims.text(d)}: not supported yet"
        )
    return d


def _ints(node: Node, i: int, what: str) -> list[int] | None:
    value = node.constant(i, what)
    return None if value is None else [int(v) for v in value.reshape(-1)]


def slice_(node: Node) -> list[Result]:
    """starts/ends/axes/steps as attributes (opset < 10) or constant inputs; an empty
    result is a literal without elements."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    if node.opset < 10:
        starts, ends, axes = node.attr("starts"), node.attr("ends"), node.attr("axes")
        steps = None
    else:
        starts, ends = _ints(node, 1, "starts"), _ints(node, 2, "ends")
        axes, steps = _ints(node, 3, "axes"), _ints(node, 4, "steps")
    if starts is None or ends is None or len(starts) != len(ends):
        raise ImportProblem("starts and ends must be given, of equal length")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    picks: dict[int, range] = {}
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if step == 0:
            raise ImportProblem("a step of 0 is not valid")
        axis = node.axis(axis, len(dims))
        picks[axis] = range(*slice(start, end, step).indices(static_extent(dims, axis, "Slice")))
    shape = [len(picks[a]) if a in picks else d for a, d in enumerate(dims)]
    if 0 in shape:
        return [empty(e, shape, tensor_type(x).dt)]
    for axis, rows in picks.items():
        x = rows_of(e, x, axis, rows)
    return [x]


def rows_of(e: Emitter, x: SSAValue, axis: int, rows: range) -> SSAValue:
    """x's `rows` (a non-empty range) along `axis`: a slice, reversed for step -1,
    or a gather of constant indices for other steps."""
    if len(rows) > 1 and abs(rows.step) != 1:
        indices = e.constant(np.asarray(rows, np.int64))
        return e.op(GatherOp, [x, indices], axis=IntAttr(axis))
    x = slice_axis(e, x, axis, min(rows), max(rows) + 1)
    if rows.step < 0 and len(rows) > 1:
        x = e.op(ReverseOp, [x], dims=ints_attr([axis]))
    return x


def empty(e: Emitter, shape: Sequence[int], dt: str) -> SSAValue:
    """A tensor of `shape`, which has a dimension of size 0: a splat with no elements."""
    return e.splat(False if dt == "bool" else 0, shape, dt)


def split(node: Node) -> list[Result]:
    """Sizes from `split` (attribute before opset 13, input after), else equal parts
    (`num_outputs` from opset 18, the last part smaller)."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    axis = node.axis(node.attr("axis", 0), len(dims))
    static_extent(dims, axis, "Split")
    sizes = node.attr("split") if node.opset < 13 else _ints(node, 1, "split")
    wanted = node.attr("num_outputs")
    if wanted is not None and wanted != len(node.proto.output):
        raise ImportProblem(
            f"num_outputs={wanted} but the node has {len(node.proto.output)} outputs"
        )
    count = wanted or len(node.proto.output)
    check_parts(len(sizes) if sizes else count, "the number of parts", node.limits)
    if not sizes:
        part = -(-dims[axis] // count)
        sizes = [min(part, dims[axis] - k * part) for k in range(count)]
    if sum(sizes) != dims[axis] or min(sizes) < 0:
        raise ImportProblem(f"split sizes {sizes} do not partition dimension {dims[axis]}")
    offsets = np.cumsum([0, *sizes])
    parts: list[Result] = []
    for lo, hi in zip(offsets, offsets[1:]):
        shape = [int(hi - lo) if a == axis else d for a, d in enumerate(dims)]
        if 0 in shape:
            parts.append(empty(e, shape, tensor_type(x).dt))
        else:
            parts.append(slice_axis(e, x, axis, int(lo), int(hi)))
    return parts


def broadcast(e: Emitter, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    """`x` broadcast to `shape` (bool by a select, whose operands broadcast too)."""
    if tensor_type(x).dt != "bool":
        return e.broadcast_to(e.to_rank(x, len(shape)), shape)
    mask = e.splat(True, shape, "bool")
    x = e.to_rank(x, len(shape))
    return e.op(SelectOp, [x, x, mask]) if shape_of(x) != tuple(shape) else x


def expand(node: Node) -> list[Result]:
    """x broadcast with the shape input (both ways, as NumPy)."""
    x, target = node.input(0), _ints(node, 1, "shape")
    if target is None:
        raise ImportProblem("the shape input is missing")
    if min(target, default=0) < 0:
        raise ImportProblem(f"shape {target} has a negative dimension")
    try:
        shape = np.broadcast_shapes(shape_of(x), tuple(target))
    except ValueError:
        raise ImportProblem(f"{list(shape_of(x))} does not broadcast to {target}") from None
    check_elements(shape, "the output", node.limits)
    return [broadcast(node.emit, x, shape)]


def tile(node: Node) -> list[Result]:
    e, x = node.emit, node.input(0)
    repeats = _ints(node, 1, "repeats")
    if repeats is None or len(repeats) != len(shape_of(x)) or min(repeats, default=1) < 1:
        raise ImportProblem(f"repeats {repeats} must be positive, one per dimension")
    dims = shape_of(x)
    check_elements([d * r for d, r in zip(dims, repeats, strict=True)], "the output", node.limits)
    for axis, count in enumerate(repeats):
        x = tile_axis(e, x, axis, count)
    return [x]


def tile_axis(e: Emitter, x: SSAValue, axis: int, count: int) -> SSAValue:
    """x repeated `count` times along `axis` in three ops, whatever the count: x as
    [..., 1, n, ...] broadcast to [..., count, n, ...], reshaped to [..., count·n, ...]."""
    dims = list(shape_of(x))
    if count == 1:
        return x
    split = dims[:axis] + [1] + dims[axis:]
    wide = dims[:axis] + [count] + dims[axis:]
    tiled = broadcast(e, e.reshape(x, split), wide)
    return e.reshape(tiled, dims[:axis] + [count * dims[axis]] + dims[axis + 1 :])


def pad(node: Node) -> list[Result]:
    """Non-negative pads (attribute before opset 11, input after, on `axes` from
    opset 18) of a constant, or (modes "reflect", "edge", "wrap") of x's own rows."""
    e, x = node.emit, node.input(0)
    rank = len(shape_of(x))
    mode = node.require("mode", ("constant", "reflect", "edge", "wrap"), "constant")
    if node.opset < 11:
        pads, value, axes = node.attr("pads"), node.attr("value", 0.0), None
    else:
        pads, axes = _ints(node, 1, "pads"), _ints(node, 3, "axes")
        value = _constant_value(node)
    axes = list(range(rank)) if axes is None else [node.axis(a, rank) for a in axes]
    if pads is None or len(pads) != 2 * len(axes) or min(pads, default=0) < 0:
        raise ImportProblem(f"pads {pads} must be {2 * len(axes)} non-negative integers")
    widths = [(0, 0)] * rank
    for k, axis in enumerate(axes):
        widths[axis] = (pads[k], pads[len(axes) + k])
    padded = [d + lo + hi for d, (lo, hi) in zip(shape_of(x), widths, strict=True)]
    check_elements(padded, "the output", node.limits)
    if mode == "constant":
        return [e.pad(x, widths, value)]
    for axis, (lo, hi) in enumerate(widths):
        x = (
            _wrap_pad(e, x, axis, lo, hi)
            if mode == "wrap"
            else _border_pad(e, x, axis, lo, hi, mode)
        )
    return [x]


def _wrap_pad(e: Emitter, x: SSAValue, axis: int, lo: int, hi: int) -> SSAValue:
    """Rows -lo .. n+hi-1 of x along `axis`, row i being x's row i mod n (NumPy's
    "wrap"; pads longer than n repeat x)."""
    n = shape_of(x)[axis]
    if not lo and not hi:
        return x
    if n == 0:
        raise ImportProblem("wrap pads of an empty dimension are not defined")
    start = -lo % n  # the row of x the output starts with
    copies = -(-(start + lo + n + hi) // n)
    return slice_axis(e, tile_axis(e, x, axis, copies), axis, start, start + lo + n + hi)


def _border_pad(e: Emitter, x: SSAValue, axis: int, lo: int, hi: int, mode: str) -> SSAValue:
    """`lo` and `hi` rows along `axis`: x's rows mirrored about its first and last
    (reflect: x[lo..1], x[n-2..n-1-hi]) or its first and last row repeated (edge)."""
    n = shape_of(x)[axis]
    if not lo and not hi:
        return x
    if mode == "reflect" and max(lo, hi) > n - 1:
        raise ImportProblem(f"reflect pads ({lo}, {hi}) need at most {n - 1} (size {n} - 1)")
    parts = []
    if lo:
        if mode == "reflect":
            rows = slice_axis(e, x, axis, 1, lo + 1)
            parts.append(e.op(ReverseOp, [rows], dims=ints_attr([axis])) if lo > 1 else rows)
        else:
            parts.append(tile_axis(e, slice_axis(e, x, axis, 0, 1), axis, lo))
    parts.append(x)
    if hi:
        if mode == "reflect":
            rows = slice_axis(e, x, axis, n - 1 - hi, n - 1)
            parts.append(e.op(ReverseOp, [rows], dims=ints_attr([axis])) if hi > 1 else rows)
        else:
            parts.append(tile_axis(e, slice_axis(e, x, axis, n - 1, n), axis, hi))
    return e.concatenate(parts, axis)


def _constant_value(node: Node) -> float | SSAValue:
    """Pad's constant_value input: a number when constant, else a one-element tensor."""
    if len(node.names) < 3 or not node.names[2]:
        return 0.0
    constant = node.constants[2]
    if constant is not None:
        return constant.reshape(-1)[0].item()
    value = node.input(2)
    if int(np.prod(shape_of(value))) != 1 or tensor_type(value).dt == "bool":
        raise ImportProblem("constant_value must be one number")
    return value


CONVERTERS: dict[str, Converter] = {
    "Slice": slice_,
    "Split": split,
    "Expand": expand,
    "Tile": tile,
    "Pad": pad,
}
