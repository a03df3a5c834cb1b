"""Element-wise fusion for `lower-graph-to-loop{optimize=true}`: which element-wise
results are computed where their one user reads them instead of in a nest and a buffer
of their own, and which nests can run as one flat loop.

A result is fused into its user when it has exactly one use, the user is an element-wise
op or the reduced operand of a `reduce` in the same block, and the result has the
dimensions of the user's iteration space (no broadcast: each element is read once, so
nothing is computed twice). Chains are at most `MAX_CHAIN` deep (the reads recurse).
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects.graph_elementwise import BinaryOp, DataTypeCastOp, NotOp, SelectOp, UnaryOp
from dlc.dialects.graph_reduction import ReduceOp
from dlc.dialects.graph_types import TensorType

ELEMENTWISE = (UnaryOp, BinaryOp, NotOp, SelectOp, DataTypeCastOp)

MAX_CHAIN = 16
"""The longest chain of fused producers read through one element."""


def _space(user: Operation, value: SSAValue) -> tuple[int | str, ...] | None:
    """The iteration space in which `user` reads `value`, or None when it cannot read a
    fused value there."""
    if isinstance(user, ELEMENTWISE):
        t = user.results[0].type
    elif isinstance(user, ReduceOp) and user.operand is value:
        t = value.type
    else:
        return None
    assert isinstance(t, TensorType)
    return t.dims


def fused_producers(block: Block) -> dict[SSAValue, Operation]:
    """The element-wise results of `block` computed at their user's reads, and the ops
    that compute them (module docstring)."""
    fused: dict[SSAValue, Operation] = {}
    depth: dict[SSAValue, int] = {}
    for op in block.ops:
        if not isinstance(op, ELEMENTWISE):
            continue
        result = op.results[0]
        chain = 1 + max((depth.get(v, 0) for v in op.operands), default=0)
        uses = list(result.uses)
        if len(uses) != 1 or chain > MAX_CHAIN:
            continue
        user = uses[0].operation
        t = result.type
        assert isinstance(t, TensorType)
        if user.parent_block() is block and _space(user, result) == t.dims:
            fused[result] = op
            depth[result] = chain
    return fused


def flat_leaves(value: SSAValue, fused: dict[SSAValue, Operation]) -> list[SSAValue]:
    """The values read from memory or constants when `value` is computed: `value` itself
    unless fused, else its producer's operands' leaves (iteratively)."""
    leaves: list[SSAValue] = []
    stack = [value]
    while stack:
        v = stack.pop()
        producer = fused.get(v)
        if producer is None:
            leaves.append(v)
        else:
            stack.extend(producer.operands)
    return leaves


def is_flat(op: Operation, fused: dict[SSAValue, Operation]) -> bool:
    """Whether element-wise `op` (with its fused producers) reads every tensor at its own
    row-major position: every leaf is a scalar or has the result's dimensions. Such a
    nest is one loop over the element count."""
    t = op.results[0].type
    assert isinstance(t, TensorType)
    for operand in op.operands:
        for leaf in flat_leaves(operand, fused):
            lt = leaf.type
            if isinstance(lt, TensorType) and not lt.is_scalar and lt.dims != t.dims:
                return False
    return True
