"""Adjoint rules of einsum and top-k (dlc/dialects/graph_composite.py).

- einsum: the adjoint of operand i is the einsum of D with the other operands into
  operand i's letters (`ij,jk->ik`: dA = einsum("ik,jk->ij", D, B)); letters that only
  operand i has (summed away) broadcast the result back. An operand with a repeated
  letter (a diagonal) has no rule (a located "cannot differentiate" error).
- topK: D goes back to the positions the values came from (a scatter of D into
  zeros at `topKIndices`, whose positions are distinct); the indices carry none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph_composite as gc
from dlc.dialects import graph_gather as gg
from dlc.passes.graph.autodiff.adjoint_emitter import Adj, Emitter, tensor_of


def einsum_rule(e: Emitter, op: gc.EinsumOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    """dX_i = einsum(D, X_j (j ≠ i) -> term_i), broadcast over term_i's own letters."""
    terms, output = gc.parse_equation(op.equation.data)
    out: dict[int, Adj] = {}
    for i in sorted(want):
        others = [k for k in range(len(terms)) if k != i]
        seen = set(output).union(*(terms[k] for k in others))
        target = "".join(c for c in terms[i] if c in seen)
        equation = ",".join([output, *(terms[k] for k in others)]) + "->" + target
        operands = [d, *(op.inputs[k] for k in others)]
        g = e.emit(gc.EinsumOp, operands, equation=StringAttr(equation))
        t = tensor_of(op.inputs[i])
        if target != terms[i]:
            sizes = dict(zip(terms[i], t.dims, strict=True))
            g = e.reshape(g, [sizes[c] if c in target else 1 for c in terms[i]])
            g = e.broadcast_to(g, t)
        out[i] = g
    return out


def top_k_rule(e: Emitter, op: gc.TopKOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    """dx = D scattered to the positions of the top k (zero elsewhere)."""
    props: dict[str, Attribute] = {"count": op.count, "axis": op.axis}
    if op.smallest is not None:
        props["smallest"] = op.smallest
    idx = e.emit(gc.TopKIndicesOp, [op.operand], **props)
    zeros = e.splat(0, tensor_of(op.operand))
    return {0: e.emit(gg.ScatterElementsOp, [d, zeros, idx], axis=op.axis)}


def has_rule(op: Operation) -> bool:
    """Whether the composite `op` has an adjoint rule."""
    if isinstance(op, gc.EinsumOp):
        terms, _ = gc.parse_equation(op.equation.data)
        return all(len(set(t)) == len(t) for t in terms)
    return isinstance(op, gc.TopKOp)


RULES: dict[type[Operation], Callable[[Emitter, Any, Any, set[int]], dict[int, Adj]]] = {
    gc.EinsumOp: einsum_rule,
    gc.TopKOp: top_k_rule,
}
