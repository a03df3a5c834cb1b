"""Adjoint rules of the tensor ops: dot, reduce, concatenate, slice, the shape ops, and
of aggregates (literals and `extract`).

Policies:
- `reduce … by multiply` is zero-safe: ∂f/∂xᵢ = init·∏_{j≠i} xⱼ is computed from the
  product p of the non-zero elements (times init) and the number z of zeros along the
  reduced axes: p/xᵢ where z = 0, p at the zero where z = 1, and 0 otherwise. Nothing is
  divided by zero and no 0·∞ appears.
- `reduce … by max|min` splits D evenly among the tied positions (every element equal
  to the result); with k ties each gets D/k, so the parts sum to D, the same policy as
  element-wise `max`/`min` (adjoint_rules_elementwise.py). `init` gets no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph import LiteralOp
from dlc.dialects.graph_types import TensorType, TupleType
from dlc.passes.graph.autodiff.adjoint_emitter import Adj, Emitter, tensor_of


def dot_rule(e: Emitter, op: gt.DotOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    x, y = op.lhs, op.rhs
    r = tensor_of(x).rank
    out: dict[int, Adj] = {}
    if r == 1:  # x·y is a scalar
        if 0 in want:
            out[0] = e.mul(d, y)
        if 1 in want:
            out[1] = e.mul(d, x)
        return out
    if r == 2:
        if 0 in want:
            out[0] = e.emit(gt.DotOp, [d, e.transpose(y)])  # D·yᵀ
        if 1 in want:
            out[1] = e.emit(gt.DotOp, [e.transpose(x), d])  # xᵀ·D
        return out
    # batched: transpose reverses batch dimensions too, so contract explicitly
    if 0 in want:  # dx[b,m,k] = Σn D[b,m,n]·y[b,k,n]
        out[0] = e.reduce_add(e.mul(e.pad(d, r - 1), e.pad(y, r - 2)), [r])
    if 1 in want:  # dy[b,k,n] = Σm x[b,m,k]·D[b,m,n]
        out[1] = e.reduce_add(e.mul(e.pad(x, r), e.pad(d, r - 1)), [r - 2])
    return out


# ---------------------------------------------------------------------------------------
# reduce
# ---------------------------------------------------------------------------------------


def reduce_rule(e: Emitter, op: gt.ReduceOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    dims = [a.data for a in op.dims.data]
    comb = op.combinator.data if op.combinator is not None else ""
    out: dict[int, Adj] = {}
    if 0 in want:
        dp = e.pad_dims(d, dims)
        if comb == "add":
            out[0] = e.broadcast_to(dp, tensor_of(op.operand))
        elif comb == "multiply":
            out[0] = e.mul(dp, product_of_others(e, op.operand, op.init, dims))
        else:
            out[0] = split_among_ties(e, dp, op.operand, op.result, dims)
    if 1 in want:  # add only: init is added once to every result element
        out[1] = e.reduce_add(d, range(tensor_of(d).rank))
    return out


def product_of_others(e: Emitter, x: SSAValue, init: SSAValue, dims: Sequence[int]) -> SSAValue:
    """init·∏_{j≠i} xⱼ over the reduced axes, without dividing by zero."""
    zero, one = e.c(0, x), e.c(1, x)
    nonzero = e.binary("notEqual", x, zero)
    safe = e.select(x, one, nonzero)  # zeros replaced by 1
    product = e.pad_dims(e.reduce(safe, dims, "multiply", init), dims)
    zeros = e.pad_dims(e.reduce_add(e.select(zero, one, nonzero), dims), dims)
    at_nonzero = e.select(e.div(product, safe), zero, e.binary("equal", zeros, zero))
    at_zero = e.select(product, zero, e.binary("equal", zeros, one))
    return e.select(at_nonzero, at_zero, nonzero)


def split_among_ties(
    e: Emitter, dp: SSAValue, x: SSAValue, f: SSAValue, dims: Sequence[int]
) -> SSAValue:
    """D/k at each of the k positions equal to the extremum f, 0 elsewhere."""
    zero, one = e.c(0, x), e.c(1, x)
    tie = e.binary("equal", x, e.pad_dims(f, dims))
    count = e.pad_dims(e.reduce_add(e.select(one, zero, tie), dims), dims)
    return e.select(e.div(dp, count), zero, tie)  # count ≥ 1 wherever tie holds


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------


def concatenate_rule(
    e: Emitter, op: gt.ConcatenateOp, d: SSAValue, want: set[int]
) -> dict[int, Adj]:
    axis = op.axis.data
    out: dict[int, Adj] = {}
    offset = 0
    for i, part in enumerate(op.inputs):
        n = tensor_of(part).dims[axis]
        if i in want:
            out[i] = e.slice_axis(d, axis, offset, offset + n - 1)
        offset += n
    return out


def slice_rule(e: Emitter, op: gt.SliceOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    return {0: e.embed_rows(d, op.lower.data, tensor_of(op.operand).dims[0])}


def shape_rule(e: Emitter, op: Operation, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    """transpose, reverse, shapeCast, padShape, squeezeShape: the inverse reshuffle."""
    x = op.operands[0]
    if isinstance(op, gt.TransposeOp):
        return {0: e.transpose(d)}
    if isinstance(op, gt.ReverseOp):
        return {0: e.emit(gt.ReverseOp, [d], dims=op.dims)}
    if isinstance(op, gt.PadShapeOp):
        return {0: e.emit(gt.SqueezeShapeOp, [d], index=op.index)}
    if isinstance(op, gt.SqueezeShapeOp):
        return {0: e.pad(d, op.index.data)}
    return {0: e.reshape(d, tensor_of(x).dims)}


# ---------------------------------------------------------------------------------------
# Aggregates
# ---------------------------------------------------------------------------------------


def literal_rule(e: Emitter, op: LiteralOp, d: Adj, want: set[int]) -> dict[int, Adj]:
    """Aggregate literals pass each element's part of D to the element's operand."""
    out: dict[int, Adj] = {}
    stack: list[tuple[Any, tuple[int, ...]]] = [(op.value.data, ())]
    while stack:
        node, path = stack.pop()
        if node[0] == "operand" and node[1] in want:
            out[node[1]] = component(e, d, path)
        elif node[0] in ("tuple", "tensor"):
            stack.extend((sub, (*path, k)) for k, sub in enumerate(node[1]))
    return out


def component(e: Emitter, d: Adj, path: Sequence[int]) -> Adj:
    """The part of adjoint d at element path `path`."""
    for i, key in enumerate(path):
        if d is None:
            return None
        if isinstance(d, dict):
            d = d.get(key)
            continue
        return e.extract(d, path[i:])
    return d


def extract_rule(e: Emitter, op: gm.ExtractOp, d: Adj, want: set[int]) -> dict[int, Adj]:
    """Put D at the extracted place of a zero aggregate."""
    keys = [k.data for k in op.keys.data]
    containers: list[Attribute] = [op.operand.type]
    for k in keys[:-1]:
        t = containers[-1]
        containers.append(t.types[k] if isinstance(t, TupleType) else element_type(t))
    for key, t in zip(reversed(keys), reversed(containers), strict=False):
        if isinstance(t, TupleType):
            d = {key: d}
        else:
            assert isinstance(d, SSAValue) and isinstance(t, TensorType)
            d = e.embed_rows(e.pad(d, 0), key, t.dims[0])
    return {0: d}


def element_type(t: Attribute) -> TensorType:
    assert isinstance(t, TensorType)
    return t.with_shape(t.dims[1:])


def extract_is_differentiable(op: gm.ExtractOp) -> bool:
    """Integer keys through tuples and tensors only."""
    if op.key_values:
        return False
    t: Attribute = op.operand.type
    for k in op.keys.data:
        if not isinstance(k, IntAttr):
            return False
        if isinstance(t, TupleType):
            t = t.types[k.data]
        elif isinstance(t, TensorType) and t.rank >= 1:
            t = t.with_shape(t.dims[1:])
        else:
            return False
    return True
