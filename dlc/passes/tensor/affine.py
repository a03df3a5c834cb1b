"""Affine forms of the i64 index values of a `tensor.compute` body.

A form maps each variable (an index argument, or any value treated as one) to its
coefficient, and `CONST` to the constant term: Σ aᵢ·xᵢ + b. `combine` steps a form
through `addi`, `subi` and `muli`; `conv2d.py` recognizes convolutions by the forms of
their reads, `simplify_indices.py` takes index divisions out of bodies with them.
"""

from __future__ import annotations

from collections.abc import Hashable

from xdsl.dialects import arith

CONST = -1
"""The key of a form's constant term (no variable is -1: index arguments are keyed by
their number or by their value)."""

Form = dict[Hashable, int]


def combine(op: arith.AddiOp | arith.SubiOp | arith.MuliOp, lhs: Form, rhs: Form) -> Form | None:
    """The affine form of `op` on operands of forms `lhs`, `rhs` (None: not affine)."""
    if isinstance(op, arith.MuliOp):
        if set(lhs) == {CONST}:
            return {k: v * lhs[CONST] for k, v in rhs.items()}
        if set(rhs) == {CONST}:
            return {k: v * rhs[CONST] for k, v in lhs.items()}
        return None  # a product of two index variables
    sign = -1 if isinstance(op, arith.SubiOp) else 1
    out = dict(lhs)
    for k, v in rhs.items():
        out[k] = out.get(k, 0) + sign * v
    return out
