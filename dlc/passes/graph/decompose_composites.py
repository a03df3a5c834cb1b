"""`decompose-composites`: einsum and top-k -> DLVM ops the code generator knows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntAttr, ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dlc.analysis.levels import require_level
from dlc.diagnostics import error_at
from dlc.dialects import graph_composite as gc
from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_gather as gg
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph_types import TensorType, dtype_is_float
from dlc.passes.graph.autodiff.adjoint_emitter import Emitter, tensor_of
from dlc.passes.graph.fold_constants import literal_of
from dlc.passes.graph.pass_support import rewrite_once
from dlc.passes.graph.permutations import permute
from dlc.passes.statistics import PassStatistics

MAX_RANK = 6
"""Operands are permuted by searched block reversals (`permutations.py`), up to this rank."""

Term = tuple[str, SSAValue]  # an operand and the letters of its dimensions


def constant(e: Emitter, value: np.ndarray, dt: str) -> SSAValue:
    return e.insert(literal_of(value, TensorType(value.shape, dt))).results[0]


def arrange(e: Emitter, term: Term, letters: str) -> SSAValue:
    """The operand with its dimensions in the order of `letters` (a permutation)."""
    return permute(e, term[1], [term[0].index(c) for c in letters])


def sum_out(e: Emitter, term: Term, keep: set[str]) -> Term:
    """Sum over the dimensions whose letter is not kept."""
    letters, x = term
    gone = [i for i, c in enumerate(letters) if c not in keep]
    return "".join(c for c in letters if c in keep), e.reduce_add(x, gone)


def diagonal(e: Emitter, term: Term) -> Term:
    """A term without repeated letters: each repeat takes the diagonal of its two
    dimensions (moved last and merged, then a gather of every (n+1)-th element)."""
    letters, x = term
    while (c := next((c for c in letters if letters.count(c) > 1), None)) is not None:
        p = letters.index(c)
        q = letters.index(c, p + 1)
        others = "".join(letters[i] for i in range(len(letters)) if i not in (p, q))
        x = permute(e, x, [i for i in range(len(letters)) if i not in (p, q)] + [p, q])
        dims = tensor_of(x).dims
        n = dims[-1]
        flat = e.reshape(x, [*dims[:-2], n * n])
        picks = constant(e, np.arange(n, dtype=np.int64) * (n + 1), "i64")
        x = e.emit(gg.GatherOp, [flat, picks], axis=IntAttr(len(dims) - 2))
        letters = others + c
    return letters, x


def contract(e: Emitter, a: Term, b: Term, keep: set[str]) -> Term:
    """a·b summed over their shared letters that are not kept: both arranged as
    (batch, free, shared) matrices and one (batched) `dot`."""
    a = sum_out(e, a, keep | set(b[0]))
    b = sum_out(e, b, keep | set(a[0]))
    shared = [c for c in a[0] if c in b[0]]
    batch = "".join(c for c in shared if c in keep)
    inner = "".join(c for c in shared if c not in keep)
    a_free = "".join(c for c in a[0] if c not in b[0])
    b_free = "".join(c for c in b[0] if c not in a[0])
    size = {c: d for t in (a, b) for c, d in zip(t[0], tensor_of(t[1]).dims, strict=True)}
    count = lambda letters: int(np.prod([size[c] for c in letters]))  # noqa: E731
    lead = [count(batch)] if batch else []
    lhs = e.reshape(arrange(e, a, batch + a_free + inner), [*lead, count(a_free), count(inner)])
    rhs = e.reshape(arrange(e, b, batch + inner + b_free), [*lead, count(inner), count(b_free)])
    y = e.emit(gt.DotOp, [lhs, rhs])
    letters = batch + a_free + b_free
    return letters, e.reshape(y, [size[c] for c in letters])


def einsum(e: Emitter, op: gc.EinsumOp) -> SSAValue:
    """Left to right: each operand's diagonals, then pairwise contractions keeping the
    letters that the result or a later operand needs, then the result's order."""
    terms, output = gc.parse_equation(op.equation.data)
    parts = [diagonal(e, t) for t in zip(terms, op.inputs, strict=True)]
    acc = parts[0]
    for k, part in enumerate(parts[1:], start=2):
        keep = set(output).union(*(t for t, _ in parts[k:]))
        acc = contract(e, acc, part, keep)
    acc = sum_out(e, acc, set(output))
    return arrange(e, acc, output)


def beats(e: Emitter, xj: SSAValue, xi: SSAValue, smallest: bool) -> SSAValue:
    """Whether x_j comes before x_i in top-k order (ties left to the caller): larger
    (smaller) or, for floats, NaN before (after) every number."""
    before = e.binary("lessThan" if smallest else "greaterThan", xj, xi)
    if not dtype_is_float(tensor_of(xj).dt):
        return before
    nan_j, nan_i = (e.binary("notEqual", v, v) for v in (xj, xi))
    first, second = (nan_i, nan_j) if smallest else (nan_j, nan_i)
    return e.binary("or", before, e.binary("and", first, e.emit(ge.NotOp, [second])))


def same(e: Emitter, xj: SSAValue, xi: SSAValue) -> SSAValue:
    """x_j == x_i, NaN equal to NaN."""
    equal = e.binary("equal", xj, xi)
    if not dtype_is_float(tensor_of(xj).dt):
        return equal
    both = e.binary("and", e.binary("notEqual", xj, xj), e.binary("notEqual", xi, xi))
    return e.binary("or", equal, both)


def top_k_indices(e: Emitter, x: SSAValue, count: int, smallest: bool) -> SSAValue:
    """Positions along the last axis of the `count` first elements in top-k order: the
    rank of x_i is how many x_j come before it (ties by position), and output r is the
    position whose rank is r. n² comparisons per row of n."""
    dims = tensor_of(x).dims
    n = dims[-1]
    xj, xi = e.reshape(x, [*dims[:-1], 1, n]), e.reshape(x, [*dims[:-1], n, 1])
    ones = [1] * (len(dims) - 1)
    positions = constant(e, np.arange(n, dtype=np.int64).reshape(*ones, 1, n), "i64")
    lower = e.binary("lessThan", positions, e.reshape(positions, [*ones, n, 1]))  # j < i
    tie = e.binary("and", same(e, xj, xi), lower)
    ahead = e.binary("or", beats(e, xj, xi, smallest), tie)
    one, zero = e.const(1, "i64"), e.const(0, "i64")
    rank = e.reduce_add(e.select(one, zero, ahead), [len(dims)])
    spread = e.reshape(rank, [*dims[:-1], 1, n])
    slots = constant(e, np.arange(count, dtype=np.int64).reshape(*ones, count, 1), "i64")
    hit = e.binary("equal", spread, slots)
    return e.reduce_add(e.select(positions, zero, hit), [len(dims)])


def top_k(e: Emitter, op: gc.TopKOp | gc.TopKIndicesOp) -> SSAValue:
    """top-k along the op's axis, moved last and back."""
    x, axis = op.operand, op.axis.data
    rank = tensor_of(x).rank
    perm = [i for i in range(rank) if i != axis] + [axis]
    back = [int(i) for i in np.argsort(perm)]
    last = permute(e, x, perm)
    idx = top_k_indices(e, last, op.count.data, op.smallest is not None)
    if isinstance(op, gc.TopKIndicesOp):
        return permute(e, idx, back)
    values = e.emit(gg.GatherElementsOp, [last, idx], axis=IntAttr(rank - 1))
    return permute(e, values, back)


Composite = gc.EinsumOp | gc.TopKOp | gc.TopKIndicesOp


def decomposed(op: Composite) -> SSAValue:
    """The value of `op` computed by ops inserted before it; a located error for
    operands (or an einsum result) of rank above `MAX_RANK`."""
    ranks: Sequence[int] = [tensor_of(v).rank for v in op.operands]
    if isinstance(op, gc.EinsumOp):
        ranks = [*ranks, tensor_of(op.result).rank]
    if max(ranks) > MAX_RANK:
        raise error_at(op, f"{op.OPCODE}: operands of rank > {MAX_RANK} are not supported")
    block = op.parent_block()
    assert block is not None
    e = Emitter(block, op, op, None)
    return einsum(e, op) if isinstance(op, gc.EinsumOp) else top_k(e, op)


class DecomposePattern(RewritePattern):
    """einsum(x...) -> dots of arranged operands; topK(x) -> ranks by comparison."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: Composite, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, (), [decomposed(op)])


@dataclass(frozen=True)
class DecomposeCompositesPass(PassStatistics, ModulePass):
    """Rewrite einsum and top-k into ops the code generator knows.

    Input: a graph-level module. Every `einsum` becomes, per operand, gathers of its
    diagonals and sums over letters no one else needs, then a `dot` per further
    operand (both sides arranged as (batch, free, summed) matrices by transposes and
    reshapes), then the result's order: it runs through the contraction kernels.
    Every `topK` / `topKIndices` becomes ranks by comparison (n² per row of n: how
    many elements come before each, ties by position, NaN largest) and the positions
    of ranks 0..k-1, then a `gatherElements` of the values. Afterwards no composite
    op is left; results are unchanged (einsum: up to the order of the sums).
    Statistics: "ops decomposed".
    """

    name = "decompose-composites"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        # one sweep: a decomposition holds no composite op
        self.count("ops decomposed", rewrite_once(op, DecomposePattern()))
