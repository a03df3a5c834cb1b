"""Adjoint rules of the gathers and scatters (dlc/dialects/graph_gather.py).

- A gather's adjoint is a scatter-add of D into zeros of the data's shape: every
  gathered element sends its gradient back to where it was read (repeated indices
  add up). `gather … along a` goes through `scatterElements` on the (before, axis,
  after) view; `gatherND` with batch dimensions has no rule (a located "cannot
  differentiate" error).
- `scatter… by add`: D flows to the data unchanged and, gathered at the indices, to
  the updates.
- A replacing scatter: the data gets D where no update landed (zero elsewhere); an
  update gets D at its target only if it is the one that won (the last of duplicate
  indices), found by scattering the update positions and gathering them back.
- `by multiply|max|min` have no rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph_gather as gg
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph_props import int_array
from dlc.dialects.graph_types import TensorType
from dlc.passes.graph.autodiff.adjoint_emitter import Adj, Emitter, tensor_of

Scatter = gg.ScatterElementsOp | gg.ScatterNDOp

ADD = {"reduction": StringAttr("add")}


def gather_rule(e: Emitter, op: gg.GatherOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    """dx[p, c, q] = Σ_{i: indices[i] = c} D[p, i, q]"""
    data = tensor_of(op.data)
    axis, n = op.axis.data, tensor_of(op.data).dims[op.axis.data]
    before, after = math.prod(data.dims[:axis]), math.prod(data.dims[axis + 1 :])
    count = tensor_of(op.indices).num_elements
    d3 = e.reshape(d, (before, count, after))
    flat = e.reshape(op.indices, (1, count, 1))
    idx = e.broadcast_to(flat, tensor_of(flat).with_shape((before, count, after)))
    zeros = e.splat(0, data.with_shape((before, n, after)))
    dx = e.emit(gg.ScatterElementsOp, [d3, zeros, idx], axis=IntAttr(1), **ADD)
    return {0: e.reshape(dx, data.dims)}


def gather_elements_rule(
    e: Emitter, op: gg.GatherElementsOp, d: SSAValue, want: set[int]
) -> dict[int, Adj]:
    zeros = e.splat(0, tensor_of(op.data))
    return {0: e.emit(gg.ScatterElementsOp, [d, zeros, op.indices], axis=op.axis, **ADD)}


def gather_nd_rule(e: Emitter, op: gg.GatherNDOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    zeros = e.splat(0, tensor_of(op.data))
    return {0: e.emit(gg.ScatterNDOp, [d, zeros, op.indices], **ADD)}


def _gather_back(e: Emitter, op: Scatter, x: SSAValue) -> SSAValue:
    """x read where each update of the scatter `op` landed (the updates' shape)."""
    if isinstance(op, gg.ScatterElementsOp):
        return e.emit(gg.GatherElementsOp, [x, op.indices], axis=op.axis)
    return e.emit(gg.GatherNDOp, [x, op.indices], batch_dims=IntAttr(0))


def _positions(e: Emitter, op: Scatter) -> SSAValue:
    """Which update is which among those that can land on one element (i64, the
    updates' shape): the index along the axis (elements), the flat position of the
    index tuple (ND)."""
    updates = tensor_of(op.updates)
    if isinstance(op, gg.ScatterElementsOp):
        axis = op.axis.data
        ones = e.splat(1, updates.with_dtype("i64"))
        ramp = e.emit(gt.ScanOp, [ones], combinator=StringAttr("add"), dims=int_array([axis]))
        return e.sub(ramp, e.const(1, "i64"))
    lead = tensor_of(op.indices).dims[:-1]
    count = math.prod(lead)
    ones = e.splat(1, TensorType((count,), "i64"))
    ramp = e.emit(gt.ScanOp, [ones], combinator=StringAttr("add"), dims=int_array([0]))
    ramp = e.reshape(e.sub(ramp, e.const(1, "i64")), (*lead, *[1] * (updates.rank - len(lead))))
    return e.broadcast_to(ramp, updates.with_dtype("i64"))


def _scatter(e: Emitter, op: Scatter, operands: list[SSAValue], **props: Attribute) -> SSAValue:
    if isinstance(op, gg.ScatterElementsOp):
        return e.emit(gg.ScatterElementsOp, operands, axis=op.axis, **props)
    return e.emit(gg.ScatterNDOp, operands, **props)


def scatter_rule(e: Emitter, op: Operation, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    """updates (0) and data (1) of `scatterElements` / `scatterND` (module docstring)."""
    assert isinstance(op, gg.ScatterElementsOp | gg.ScatterNDOp), op.name
    updates, data = op.operands[0], op.operands[1]
    out: dict[int, Adj] = {}
    if op.reduction is not None:  # add (rule_for)
        if 0 in want:
            out[0] = _gather_back(e, op, d)
        if 1 in want:
            out[1] = d
        return out
    if 1 in want:
        out[1] = _scatter(e, op, [e.splat(0, tensor_of(updates)), d, op.operands[2]])
    if 0 in want:
        mine = _positions(e, op)
        nobody = e.splat(-1, tensor_of(data).with_dtype("i64"))
        winners = _gather_back(e, op, _scatter(e, op, [mine, nobody, op.operands[2]]))
        won = e.binary("equal", winners, mine)
        out[0] = e.select(_gather_back(e, op, d), e.splat(0, tensor_of(updates)), won)
    return out


def has_rule(op: Operation) -> bool:
    """Whether the gather or scatter `op` has an adjoint rule."""
    if isinstance(op, gg.GatherNDOp):
        return op.batch_dims.data == 0
    if isinstance(op, gg.ScatterElementsOp | gg.ScatterNDOp):
        return op.reduction is None or op.reduction.data == "add"
    return True


RULES: dict[type[Operation], Callable[[Emitter, Any, Any, set[int]], dict[int, Adj]]] = {
    gg.GatherOp: gather_rule,
    gg.GatherElementsOp: gather_elements_rule,
    gg.GatherNDOp: gather_nd_rule,
    gg.ScatterElementsOp: scatter_rule,
    gg.ScatterNDOp: scatter_rule,
}
