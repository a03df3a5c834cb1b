"""ONNX Gather, GatherElements, ArgMax, ArgMin and Trilu, from comparisons with an
index ramp, `select` and reductions.

dlc's graph dialect has no gather with tensor indices yet (issue 12), so a gather is a
one-hot selection: element c of the gathered axis is kept where the index equals c and
the kept elements are summed (one per output element, the others are exact zeros). It
costs (indices × axis size) work; indices out of range give 0 (ONNX makes them an
error). Negative indices count from the end.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import SelectOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result

NP_INDEX = {"i32": np.int32, "i64": np.int64}


def _select(e: Emitter, a: SSAValue, b: SSAValue, mask: SSAValue) -> SSAValue:
    rank = max(len(shape_of(v)) for v in (a, b, mask))
    return e.op(SelectOp, [e.to_rank(v, rank) for v in (a, b, mask)])


def _ramp(e: Emitter, size: int, dt: str, rank: int, axis: int) -> SSAValue:
    """0, 1, ..., size-1 along `axis` of a rank-`rank` tensor of 1s elsewhere."""
    shape = [1] * rank
    shape[axis] = size
    return e.constant(np.arange(size, dtype=NP_INDEX[dt]).reshape(shape))


def _indices(node: Node, size: int) -> SSAValue:
    """Input 1 as indices, negative ones counted from the end of a `size` axis."""
    e, idx = node.emit, node.input(1)
    dt = tensor_type(idx).dt
    if dt not in NP_INDEX:
        raise ImportProblem(f"indices of type {dt} are not supported (i32, i64)")
    negative = e.binary("lessThan", idx, e.scalar(0, dt))
    return _select(e, e.binary("add", idx, e.scalar(size, dt)), idx, negative)


def _pick(e: Emitter, data: SSAValue, mask: SSAValue, axis: int) -> SSAValue:
    """sum over `axis` of select(data, 0 by mask): the one element the mask keeps."""
    dt = tensor_type(data).dt
    if dt == "bool":
        raise ImportProblem("gathering bool tensors is not supported")
    kept = _select(e, data, e.scalar(0, dt), mask)
    return e.reduce(kept, "add", 0.0, [axis], keepdims=False)


def gather(node: Node) -> list[Result]:
    """out[a, i, b] = data[a, indices[i], b] on data reshaped to (A, 1, C, B)."""
    e, data = node.emit, node.input(0)
    dims = shape_of(data)
    axis = node.axis(node.attr("axis", 0), len(dims))
    idx = _indices(node, dims[axis])
    idx_dims, dt = shape_of(idx), tensor_type(idx).dt
    before, after = int(np.prod(dims[:axis])), int(np.prod(dims[axis + 1 :]))
    data4 = e.reshape(data, (before, 1, dims[axis], after))
    idx4 = e.reshape(idx, (1, int(np.prod(idx_dims)), 1, 1))
    mask = e.binary("equal", idx4, _ramp(e, dims[axis], dt, 4, 2))
    y = _pick(e, data4, mask, 2)
    return [e.reshape(y, (*dims[:axis], *idx_dims, *dims[axis + 1 :]))]


def gather_elements(node: Node) -> list[Result]:
    """out[.., j, ..] = data[.., indices[.., j, ..], ..] along `axis`."""
    from dlc.onnx.ops_slice import slice_axis

    e, data = node.emit, node.input(0)
    dims = shape_of(data)
    rank = len(dims)
    axis = node.axis(node.attr("axis", 0), rank)
    idx = _indices(node, dims[axis])
    idx_dims, dt = shape_of(idx), tensor_type(idx).dt
    if len(idx_dims) != rank or any(i > d for i, d in zip(idx_dims, dims, strict=True)):
        raise ImportProblem(f"indices {list(idx_dims)} do not fit data {list(dims)}")
    for k in range(rank):
        if k != axis:
            data = slice_axis(e, data, k, 0, idx_dims[k])
    perm = [*(k for k in range(rank) if k != axis), axis]
    data_t = e.transpose(data, perm)  # (..., C)
    idx_t = e.transpose(idx, perm)  # (..., K)
    data5 = e.reshape(data_t, (*shape_of(data_t)[:-1], 1, dims[axis]))
    idx5 = e.reshape(idx_t, (*shape_of(idx_t), 1))
    mask = e.binary("equal", idx5, _ramp(e, dims[axis], dt, rank + 1, rank))
    y = _pick(e, data5, mask, rank)
    return [e.transpose(y, [int(i) for i in np.argsort(perm)])]


def arg_reduce(node: Node) -> list[Result]:
    """The first (or with select_last_index the last) index of the max / min along
    `axis`, as NumPy's argmax: a NaN counts as the extreme, its first index wins."""
    x = node.input(0)
    dims = shape_of(x)
    axis = node.axis(node.attr("axis", 0), max(len(dims), 1))
    keepdims, last = bool(node.attr("keepdims", 1)), bool(node.attr("select_last_index", 0))
    found = _arg_index(node, x, axis, "max" if node.op_type == "ArgMax" else "min", last)
    if not keepdims:
        found = node.emit.reshape(found, [d for k, d in enumerate(dims) if k != axis])
    return [found]


def _arg_index(node: Node, x: SSAValue, axis: int, combinator: str, last: bool) -> SSAValue:
    """The index of the extreme along `axis` (kept as a size-1 dimension)."""
    e, dims = node.emit, shape_of(x)
    dt, n = tensor_type(x).dt, dims[axis]
    if dt not in ("f16", "f32", "f64", "i8", "i16", "i32", "i64"):
        raise ImportProblem(f"{node.op_type} on {dt} is not supported")
    init = -math.inf if combinator == "max" else math.inf
    if dt.startswith("i"):
        info = np.iinfo(dt.replace("i", "int"))
        init = info.min if combinator == "max" else info.max
    extreme = e.reduce(x, combinator, init, [axis], keepdims=True)
    ramp = _ramp(e, n, "i64", len(dims), axis)
    first_of = _first_index(e, ramp, n, axis, last)
    found = first_of(e.binary("equal", x, extreme))
    if dt.startswith("f"):
        nan = first_of(e.binary("notEqual", x, x))
        has_nan = e.binary("notEqual", nan, e.scalar(-1 if last else n, "i64"))
        found = _select(e, nan, found, has_nan)
    return found


def hardmax(node: Node) -> list[Result]:
    """1 at the first index of the max along `axis` (NumPy's argmax), 0 elsewhere;
    before opset 13 over the 2-D coercion at `axis`."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    axis = node.axis(node.attr("axis", -1 if node.opset >= 13 else 1), max(len(dims), 1))
    if node.opset < 13:
        x, axis = e.reshape(x, (int(np.prod(dims[:axis])), int(np.prod(dims[axis:])))), 1
    found = _arg_index(node, x, axis, "max", False)
    ramp = _ramp(e, shape_of(x)[axis], "i64", len(shape_of(x)), axis)
    dt = tensor_type(x).dt
    y = _select(e, e.scalar(1, dt), e.scalar(0, dt), e.binary("equal", ramp, found))
    return [e.reshape(y, dims)]


def _first_index(e: Emitter, ramp: SSAValue, n: int, axis: int, last: bool):  # noqa: ANN202
    """mask -> the first (last) index along `axis` where mask holds (n, or -1)."""

    def first(mask: SSAValue) -> SSAValue:
        none = e.scalar(-1 if last else n, "i64")
        candidates = _select(e, ramp, none, mask)
        return e.reduce(candidates, "max" if last else "min", -1 if last else n, [axis], True)

    return first


def trilu(node: Node) -> list[Result]:
    """x where the (constant) diagonal offset k keeps it (upper: j - i >= k, lower:
    j - i <= k), else 0, over the last two axes."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    if len(dims) < 2:
        raise ImportProblem("Trilu needs rank ≥ 2")
    k_value = node.constant(1, "k")
    k = 0 if k_value is None else int(k_value.reshape(-1)[0])
    rows, cols = np.indices(dims[-2:])
    upper = node.attr("upper", 1)
    keep = (cols - rows >= k) if upper else (cols - rows <= k)
    zero = e.scalar(0, tensor_type(x).dt)
    return [_select(e, x, zero, e.constant(keep))]


CONVERTERS: dict[str, Converter] = {
    "Gather": gather,
    "GatherElements": gather_elements,
    "ArgMax": arg_reduce,
    "ArgMin": arg_reduce,
    "Hardmax": hardmax,
    "Trilu": trilu,
}
