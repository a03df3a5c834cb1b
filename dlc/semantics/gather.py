"""Reference semantics of the gather and scatter ops (dlc/dialects/graph_gather.py).

Indices count from the end when negative; one outside [-n, n) raises IndexError with
the message compiled code gives ("FILE:LINE:COL: out-of-bounds gather index 7 into
axis 0 of <5 x 4 x f32>"): the largest index is checked first, then the smallest.
Scatters apply their updates in row-major order of the indices, so the last of
duplicate indices wins a replacing scatter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import Operation

from dlc.diagnostics import location_prefix
from dlc.dialects import graph_gather as gg
from dlc.dialects.graph_types import TensorType, format_type

Handler = Callable[[Any, Any, list[Any]], object]
GATHER_HANDLERS: dict[type[Operation], Handler] = {}

COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}


def index_message(opcode: str, index: int, axis: int, data: TensorType) -> str:
    """The text of an out-of-range index (shared with the lowering's checks)."""
    return f"out-of-bounds {opcode} index {index} into axis {axis} of {format_type(data)}"


def normalized(op: Operation, idx: np.ndarray, n: int, axis: int) -> np.ndarray:
    """`idx` as i64 with negative entries counted from the end of an `n` axis."""
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size:
        data = op.operands[1 if isinstance(op, gg.ScatterElementsOp | gg.ScatterNDOp) else 0]
        assert isinstance(data.type, TensorType)
        for bad in (int(idx.max()), int(idx.min())):
            if not -n <= bad < n:
                message = index_message(op.OPCODE, bad, axis, data.type)  # type: ignore[attr-defined]
                raise IndexError(location_prefix(op) + message)
    return np.where(idx < 0, idx + n, idx)


def _handles(cls: type[Operation]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        GATHER_HANDLERS[cls] = fn
        return fn

    return register


@_handles(gg.GatherOp)
def _gather(interp: Any, op: gg.GatherOp, args: list[Any]) -> object:
    data, axis = args[0], op.axis.data
    return np.take(data, normalized(op, args[1], data.shape[axis], axis), axis=axis)


def _off_axis_view(data: np.ndarray, idx_shape: tuple[int, ...], axis: int) -> np.ndarray:
    """data cut to the index shape off `axis`."""
    return data[tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(idx_shape))]


@_handles(gg.GatherElementsOp)
def _gather_elements(interp: Any, op: gg.GatherElementsOp, args: list[Any]) -> object:
    data, axis = args[0], op.axis.data
    idx = normalized(op, args[1], data.shape[axis], axis)
    return np.take_along_axis(_off_axis_view(data, idx.shape, axis), idx, axis=axis)


def nd_components(op: Operation, data: np.ndarray, idx: np.ndarray, batch: int) -> np.ndarray:
    """The index tuples of gatherND / scatterND, each component normalized."""
    idx = np.asarray(idx, dtype=np.int64).copy()
    for t in range(idx.shape[-1]):
        axis = batch + t
        idx[..., t] = normalized(op, idx[..., t], data.shape[axis], axis)
    return idx


@_handles(gg.GatherNDOp)
def _gather_nd(interp: Any, op: gg.GatherNDOp, args: list[Any]) -> object:
    data, batch = args[0], op.batch_dims.data
    idx = nd_components(op, data, args[1], batch)
    out = np.empty((*idx.shape[:-1], *data.shape[batch + idx.shape[-1] :]), data.dtype)
    for b in np.ndindex(*idx.shape[:batch]):
        ids = idx[b]
        out[b] = data[b][tuple(ids[..., t] for t in range(ids.shape[-1]))]
    return out


def _combine(op: gg.ScatterElementsOp | gg.ScatterNDOp, old: Any, new: Any) -> Any:
    if op.reduction is None:
        return new
    return COMBINE[op.reduction.data](old, new)


@_handles(gg.ScatterElementsOp)
def _scatter_elements(interp: Any, op: gg.ScatterElementsOp, args: list[Any]) -> object:
    updates, data, axis = args[0], args[1], op.axis.data
    idx = normalized(op, args[2], data.shape[axis], axis)
    out = np.array(data, copy=True)
    for j in np.ndindex(*idx.shape):
        at = (*j[:axis], idx[j], *j[axis + 1 :])
        out[at] = _combine(op, out[at], updates[j])
    return out


@_handles(gg.ScatterNDOp)
def _scatter_nd(interp: Any, op: gg.ScatterNDOp, args: list[Any]) -> object:
    updates, data = args[0], args[1]
    idx = nd_components(op, data, args[2], 0)
    out = np.array(data, copy=True)
    for r in np.ndindex(*idx.shape[:-1]):
        at = tuple(int(v) for v in idx[r])
        out[at] = _combine(op, out[at], updates[r])
    return out
