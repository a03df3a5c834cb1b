"""Reverse-mode rules of the `differentiate` pass: which graph op has which adjoint rule.

A rule receives the op, the adjoint `d` of its result and the indices of the operands
whose adjoints are wanted, and returns {operand index: adjoint}. Adjoints of tensors
are SSA values of exactly the operand's type (broadcasts are undone by `unbroadcast`);
adjoints of tuples are sparse dicts {element index: adjoint}; `None` means zero.

The rules are DLVM's intent (docs/guide/differentiation.md) with its bugs fixed: the seed
multiplies every rule, unbroadcasting reduces every stretched axis, `slice`/`extract`
embed into zeros, `power` differentiates the exponent with f·ln x, aggregates pass
gradients through, min/max/select route the gradient through the chosen values, and
`reduce … by multiply` is safe where the reduced elements contain zeros. The rules live
by op family in adjoint_rules_elementwise.py and adjoint_rules_tensor.py; the op
builder they share is adjoint_emitter.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.ir import Operation

from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_gather as gg
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph import LiteralOp
from dlc.dialects.graph_types import dtype_is_float
from dlc.passes.graph.autodiff import adjoint_rules_composite as composite
from dlc.passes.graph.autodiff import adjoint_rules_convolve as convolve
from dlc.passes.graph.autodiff.adjoint_emitter import Adj, Emitter, tensor_of
from dlc.passes.graph.autodiff.adjoint_rules_elementwise import (
    DIFFERENTIABLE_BINARY,
    UNARY_RULES,
    binary_rule,
    cast_rule,
    select_rule,
    unary_rule,
)
from dlc.passes.graph.autodiff.adjoint_rules_gather import RULES as GATHER_RULES
from dlc.passes.graph.autodiff.adjoint_rules_gather import has_rule
from dlc.passes.graph.autodiff.adjoint_rules_tensor import (
    concatenate_rule,
    dot_rule,
    extract_is_differentiable,
    extract_rule,
    literal_rule,
    reduce_rule,
    shape_rule,
    slice_rule,
)

__all__ = ["Adj", "Emitter", "Rule", "differentiable_operands", "rule_for"]

Rule = Callable[[Emitter, Any, Any, set[int]], dict[int, Adj]]

RULES: dict[type[Operation], Rule] = {
    ge.SelectOp: select_rule,
    ge.DataTypeCastOp: cast_rule,
    gt.DotOp: dot_rule,
    gt.ReduceOp: reduce_rule,
    gt.ConcatenateOp: concatenate_rule,
    gt.SliceOp: slice_rule,
    gt.TransposeOp: shape_rule,
    gt.ReverseOp: shape_rule,
    gt.ShapeCastOp: shape_rule,
    gt.PadShapeOp: shape_rule,
    gt.SqueezeShapeOp: shape_rule,
    LiteralOp: literal_rule,
    gm.ExtractOp: extract_rule,
    **GATHER_RULES,
    **composite.RULES,
    gt.ConvolveOp: convolve.convolve_rule,
}

DIFFERENTIABLE_REDUCTIONS = ("add", "multiply", "max", "min")


def rule_for(op: Operation) -> Rule | None:
    """The adjoint rule of `op` (calls are handled by the pass), None if it has none."""
    if isinstance(op, ge.UnaryOp):
        return unary_rule if op.OPCODE in UNARY_RULES else None
    if isinstance(op, ge.BinaryOp):
        return binary_rule if op.OPCODE in DIFFERENTIABLE_BINARY else None
    if isinstance(op, gm.ExtractOp) and not extract_is_differentiable(op):
        return None
    if isinstance(op, ge.DataTypeCastOp) and not (
        dtype_is_float(tensor_of(op.operand).dt) and dtype_is_float(tensor_of(op.result).dt)
    ):
        return None
    if type(op) in GATHER_RULES and not has_rule(op):
        return None
    if type(op) in composite.RULES and not composite.has_rule(op):
        return None
    if isinstance(op, gt.ConvolveOp) and not convolve.has_rule(op):
        return None
    return RULES.get(type(op))


def differentiable_operands(op: Operation) -> set[int] | None:
    """Operand positions gradients flow through; None when `op` has no rule."""
    if isinstance(op, gm.ApplyOp):
        return set(range(len(op.operands)))
    if rule_for(op) is None:
        return None
    if isinstance(op, ge.SelectOp):
        return {0, 1}
    if isinstance(op, gt.ReduceOp):
        if op.combinator is None or op.combinator.data not in DIFFERENTIABLE_REDUCTIONS:
            return set()
        return {0, 1} if op.combinator.data == "add" else {0}
    if isinstance(op, gm.ExtractOp | gg.GatherOp | gg.GatherElementsOp | gg.GatherNDOp):
        return {0}
    if isinstance(op, gg.ScatterElementsOp | gg.ScatterNDOp):
        return {0, 1}
    return set(range(len(op.operands)))
