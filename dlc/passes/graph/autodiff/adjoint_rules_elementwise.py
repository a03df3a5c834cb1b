"""Adjoint rules of the element-wise ops: unary math, binary arithmetic, select, casts.

Each rule receives the op, the adjoint `d` of its result and the wanted operand
indices, and returns {operand index: adjoint}; binary results are unbroadcast to each
operand's shape.

Ties of `max`/`min` (x == y) split the gradient evenly, D/2 to each operand, the same
policy as `reduce … by max|min` (see adjoint_rules_tensor.py): the sum of the parts is
always D, and the result is the mean of the one-sided derivatives.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue

from dlc.dialects import graph_elementwise as ge
from dlc.passes.graph.autodiff.adjoint_emitter import Adj, Emitter, tensor_of

# ---------------------------------------------------------------------------------------
# Unary ops: d(op x) = D · f'(x), f the op's result
# ---------------------------------------------------------------------------------------

UnaryRule = Callable[[Emitter, SSAValue, SSAValue, SSAValue], SSAValue | None]
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

UNARY_RULES: dict[str, UnaryRule] = {
    "negate": lambda e, d, x, f: e.neg(d),  # -D
    "square": lambda e, d, x, f: e.mul(d, e.add(x, x)),  # D·2x
    "sqrt": lambda e, d, x, f: e.div(d, e.add(f, f)),  # D/(2f)
    "rsqrt": lambda e, d, x, f: e.mul(d, e.div(e.mul(f, e.c(-0.5, x)), x)),  # D·(-f/2x)
    "exp": lambda e, d, x, f: e.mul(d, f),  # D·eˣ
    "log": lambda e, d, x, f: e.div(d, x),  # D/x
    "sin": lambda e, d, x, f: e.mul(d, e.unary("cos", x)),  # D·cos x
    "cos": lambda e, d, x, f: e.mul(d, e.neg(e.unary("sin", x))),  # -D·sin x
    "tan": lambda e, d, x, f: e.mul(d, e.add(e.mul(f, f), e.c(1, x))),  # D·(1+tan²x)
    "sinh": lambda e, d, x, f: e.mul(d, e.unary("cosh", x)),  # D·cosh x
    "cosh": lambda e, d, x, f: e.mul(d, e.unary("sinh", x)),  # D·sinh x
    "tanh": lambda e, d, x, f: e.mul(d, e.sub(e.c(1, x), e.mul(f, f))),  # D·(1-f²)
    "asin": lambda e, d, x, f: e.div(d, e.unary("sqrt", e.sub(e.c(1, x), e.mul(x, x)))),
    "acos": lambda e, d, x, f: e.neg(e.div(d, e.unary("sqrt", e.sub(e.c(1, x), e.mul(x, x))))),
    "atan": lambda e, d, x, f: e.div(d, e.add(e.mul(x, x), e.c(1, x))),  # D/(1+x²)
    "erf": lambda e, d, x, f: e.mul(
        d, e.mul(e.unary("exp", e.neg(e.mul(x, x))), e.c(TWO_OVER_SQRT_PI, x))
    ),
    "erfc": lambda e, d, x, f: e.mul(
        d, e.mul(e.unary("exp", e.neg(e.mul(x, x))), e.c(-TWO_OVER_SQRT_PI, x))
    ),
    "lgamma": lambda e, d, x, f: e.mul(d, e.unary("digamma", x)),  # D·ψ(x)
    # piecewise constant: the derivative is 0 wherever it exists
    "sign": lambda e, d, x, f: None,
    "round": lambda e, d, x, f: None,
    "rint": lambda e, d, x, f: None,
    "ceil": lambda e, d, x, f: None,
    "floor": lambda e, d, x, f: None,
}


def unary_rule(e: Emitter, op: ge.UnaryOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    return {0: UNARY_RULES[op.OPCODE](e, d, op.operand, op.result)}


# ---------------------------------------------------------------------------------------
# Binary ops
# ---------------------------------------------------------------------------------------

DIFFERENTIABLE_BINARY = ("add", "subtract", "multiply", "divide", "power", "min", "max")


def binary_rule(e: Emitter, op: ge.BinaryOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    """The operand adjoints at the result's shape, then unbroadcast to each operand."""
    if op.OPCODE in ("max", "min"):
        gx, gy = extremum_parts(e, op, d, want)
    else:
        gx, gy = arithmetic_parts(e, op, d, want)
    out: dict[int, Adj] = {}
    if gx is not None and 0 in want:
        out[0] = e.unbroadcast(gx, tensor_of(op.lhs))
    if gy is not None and 1 in want:
        out[1] = e.unbroadcast(gy, tensor_of(op.rhs))
    return out


Parts = tuple[SSAValue | None, SSAValue | None]


def arithmetic_parts(e: Emitter, op: ge.BinaryOp, d: SSAValue, want: set[int]) -> Parts:
    x, y, f = op.lhs, op.rhs, op.result
    wx, wy = 0 in want, 1 in want
    match op.OPCODE:
        case "add":
            return d, d
        case "subtract":
            return d, (e.neg(d) if wy else None)
        case "multiply":
            return (e.mul(d, y) if wx else None), (e.mul(d, x) if wy else None)  # D·y, D·x
        case "divide":  # D/y, -D·f/y
            return (e.div(d, y) if wx else None), (e.neg(e.div(e.mul(d, f), y)) if wy else None)
    assert op.OPCODE == "power"
    gx = e.mul(d, e.mul(y, e.binary("power", x, e.sub(y, e.c(1, y))))) if wx else None
    gy = e.mul(d, e.mul(f, e.unary("log", x))) if wy else None  # D·y·x^(y-1), D·f·ln x
    return gx, gy


def extremum_parts(e: Emitter, op: ge.BinaryOp, d: SSAValue, want: set[int]) -> Parts:
    """D to the strictly chosen operand; D/2 to each on a tie (x == y)."""
    x, y = op.lhs, op.rhs
    x_wins = e.binary("greaterThan" if op.OPCODE == "max" else "lessThan", x, y)
    tie = e.binary("equal", x, y)
    half = e.mul(d, e.c(0.5, d))
    zero = e.c(0, d)
    gx = e.select(d, e.select(half, zero, tie), x_wins) if 0 in want else None
    gy = e.select(zero, e.select(half, d, tie), x_wins) if 1 in want else None
    return gx, gy


# ---------------------------------------------------------------------------------------
# select and casts
# ---------------------------------------------------------------------------------------


def select_rule(e: Emitter, op: ge.SelectOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    out: dict[int, Adj] = {}
    if 0 in want:  # the gradient flows to a where the mask is true
        out[0] = e.unbroadcast(e.select(d, e.c(0, d), op.mask), tensor_of(op.lhs))
    if 1 in want:
        out[1] = e.unbroadcast(e.select(e.c(0, d), d, op.mask), tensor_of(op.rhs))
    return out


def cast_rule(e: Emitter, op: ge.DataTypeCastOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    source = tensor_of(op.operand).dt
    if source == tensor_of(d).dt:
        return {0: d}
    return {0: e.emit(ge.DataTypeCastOp, [d], dtype=StringAttr(source))}
