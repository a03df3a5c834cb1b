"""ONNX Gather, GatherElements, GatherND, ScatterElements, ScatterND, Scatter (the
graph dialect's gathers and scatters, dlc/dialects/graph_gather.py), and ArgMax,
ArgMin, Hardmax and Trilu from comparisons with an index ramp, `select` and reductions.

An index outside [-n, n) is an IndexError at run time naming the node's location,
as in every dlc build; a scatter's `reduction` (opset 16/18: none, add, mul, max,
min) becomes `by add|multiply|max|min`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute, SSAValue

from dlc.dialects import graph_gather as gg
from dlc.dialects.graph_elementwise import SelectOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result

NP_INDEX = {"i32": np.int32, "i64": np.int64}
REDUCTIONS = {"add": "add", "mul": "multiply", "max": "max", "min": "min"}


def _select(e: Emitter, a: SSAValue, b: SSAValue, mask: SSAValue) -> SSAValue:
    rank = max(len(shape_of(v)) for v in (a, b, mask))
    return e.op(SelectOp, [e.to_rank(v, rank) for v in (a, b, mask)])


def _ramp(e: Emitter, size: int, dt: str, rank: int, axis: int) -> SSAValue:
    """0, 1, ..., size-1 along `axis` of a rank-`rank` tensor of 1s elsewhere."""
    shape = [1] * rank
    shape[axis] = size
    return e.constant(np.arange(size, dtype=NP_INDEX[dt]).reshape(shape))


def _indices(node: Node, i: int) -> SSAValue:
    """Input i as indices (i32 or i64)."""
    idx = node.input(i)
    if tensor_type(idx).dt not in NP_INDEX:
        raise ImportProblem(f"indices of type {tensor_type(idx).dt} are not supported (i32, i64)")
    return idx


def gather(node: Node) -> list[Result]:
    """`gather data at indices along axis`."""
    data = node.input(0)
    axis = node.axis(node.attr("axis", 0), len(shape_of(data)))
    return [node.emit.op(gg.GatherOp, [data, _indices(node, 1)], axis=IntAttr(axis))]


def gather_elements(node: Node) -> list[Result]:
    """`gatherElements data at indices along axis`."""
    data = node.input(0)
    axis = node.axis(node.attr("axis", 0), len(shape_of(data)))
    return [node.emit.op(gg.GatherElementsOp, [data, _indices(node, 1)], axis=IntAttr(axis))]


def gather_nd(node: Node) -> list[Result]:
    """`gatherND data at indices batchDims b`."""
    batch = IntAttr(int(node.attr("batch_dims", 0)))
    return [node.emit.op(gg.GatherNDOp, [node.input(0), _indices(node, 1)], batch_dims=batch)]


def _reduction(node: Node) -> dict[str, Attribute]:
    reduction = node.attr("reduction", "none")
    if reduction == "none":
        return {}
    if reduction not in REDUCTIONS:
        raise ImportProblem(f"reduction={reduction!r} is not supported")
    return {"reduction": StringAttr(REDUCTIONS[reduction])}


def scatter_elements(node: Node) -> list[Result]:
    """`scatterElements updates to data at indices along axis [by r]` (also the
    deprecated Scatter, which is ScatterElements without `reduction`)."""
    data, updates = node.input(0), node.input(2)
    axis = node.axis(node.attr("axis", 0), len(shape_of(data)))
    props = _reduction(node)
    operands = [updates, data, _indices(node, 1)]
    return [node.emit.op(gg.ScatterElementsOp, operands, axis=IntAttr(axis), **props)]


def scatter_nd(node: Node) -> list[Result]:
    """`scatterND updates to data at indices [by r]`."""
    operands = [node.input(2), node.input(0), _indices(node, 1)]
    return [node.emit.op(gg.ScatterNDOp, operands, **_reduction(node))]


def tensor_scatter(node: Node) -> list[Result]:
    """TensorScatter (a KV-cache update): update[b, ..., s, ...] written at position
    write_indices[b] + s (mod the axis length when `mode` is circular) along `axis`,
    as `scatterElements` at those positions."""
    e, cache, update = node.emit, node.input(0), node.input(1)
    dims, up = shape_of(cache), shape_of(update)
    axis = node.axis(node.attr("axis", -2), len(dims))
    mode = node.require("mode", ("linear", "circular"), "linear")
    if axis == 0:
        raise ImportProblem("TensorScatter along the batch axis is not supported")
    start = node.optional(2)
    if start is None:
        start = e.constant(np.zeros(dims[0], np.int64))
    if tensor_type(start).dt != "i64":
        raise ImportProblem(f"write_indices of type {tensor_type(start).dt} are not supported")
    ramp = _ramp(e, up[axis], "i64", len(up), axis)
    at = e.binary("add", e.reshape(start, (dims[0], *[1] * (len(up) - 1))), ramp)
    if mode == "circular":
        at = e.binary("modulo", at, e.scalar(dims[axis], "i64"))
    at = e.broadcast_to(at, up)
    return [e.op(gg.ScatterElementsOp, [update, cache, at], axis=IntAttr(axis))]


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


def _first_index(
    e: Emitter, ramp: SSAValue, n: int, axis: int, last: bool
) -> Callable[[SSAValue], SSAValue]:
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
    "GatherND": gather_nd,
    "ScatterElements": scatter_elements,
    "Scatter": scatter_elements,
    "ScatterND": scatter_nd,
    "TensorScatter": tensor_scatter,
    "ArgMax": arg_reduce,
    "ArgMin": arg_reduce,
    "Hardmax": hardmax,
    "Trilu": trilu,
}
