"""Powers by a small constant as multiplications, for `math-approx`: pow(x, 2) -> x·x,
pow(x, 3) -> (x·x)·x, pow(x, 4) -> (x·x)·(x·x) when the exponent is a float constant
(or its broadcast to vector lanes), on every float type and on vectors. A libm call per
element, which keeps LLVM from vectorizing the loop around it (GPT-2's tanh GELU cubes
its input), becomes one or two multiplications; onnxruntime's Pow does the same. x·x
is pow(x, 2) correctly rounded; x³ and x⁴ round twice (within 2 ULP of pow)."""

from __future__ import annotations

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dlc.dialects import loop

POWERS = (2.0, 3.0, 4.0)
"""Constant exponents of `math.powf` computed by multiplications."""


def _constant_exponent(value: SSAValue) -> float | None:
    """The exponent when `value` is a float constant in `POWERS` (or its broadcast)."""
    owner = value.owner
    if isinstance(owner, loop.BroadcastOp):
        owner = owner.operands[0].owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, FloatAttr):
        return None
    exponent = owner.value.value.data
    return exponent if exponent in POWERS else None


class ExpandPowerPattern(RewritePattern):
    """pow(x, n) -> products of x, for a constant n in `POWERS` (module docstring)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.PowFOp, rewriter: PatternRewriter) -> None:
        exponent = _constant_exponent(op.operands[1])
        if exponent is None:
            return
        x = op.operands[0]
        products = [arith.MulfOp(x, x)]
        if exponent != 2.0:
            square = products[0].result
            products.append(arith.MulfOp(square, x if exponent == 3.0 else square))
        rewriter.replace(op, products, [products[-1].result])
