"""Reference semantics of einsum and top-k (dlc/dialects/graph_composite.py): NumPy's
`einsum`, and a stable sort with NaN largest (onnx's reference implementation of
TopK: `lexsort` by value, then by position)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import Operation

from dlc.dialects import graph_composite as gc

Handler = Callable[[Any, Any, list[Any]], object]


def _einsum(interp: Any, op: gc.EinsumOp, args: list[Any]) -> object:
    arrays = [np.asarray(a) for a in args]
    return np.asarray(np.einsum(op.equation.data, *arrays), dtype=arrays[0].dtype)


def top_k_order(x: np.ndarray, count: int, axis: int, smallest: bool) -> np.ndarray:
    """Positions along `axis` of the `count` first elements in order (largest first
    unless `smallest`); ties by the lower position; NaN above every number."""
    position = np.indices(x.shape)[axis]
    order = np.lexsort((position if smallest else -position, x), axis=axis)
    if not smallest:
        order = np.flip(order, axis=axis)
    return np.take(order, np.arange(count), axis=axis)


def _top_k(interp: Any, op: gc.TopKOp | gc.TopKIndicesOp, args: list[Any]) -> object:
    x = np.asarray(args[0])
    axis = op.axis.data
    order = top_k_order(x, op.count.data, axis, op.smallest is not None)
    if isinstance(op, gc.TopKIndicesOp):
        return order.astype(np.int64)
    return np.take_along_axis(x, order, axis=axis)


COMPOSITE_HANDLERS: dict[type[Operation], Handler] = {
    gc.EinsumOp: _einsum,
    gc.TopKOp: _top_k,
    gc.TopKIndicesOp: _top_k,
}
