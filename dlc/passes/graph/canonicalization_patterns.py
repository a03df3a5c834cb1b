"""Canonical rewrites of graph ops, one rule a function, its law in the docstring.

`PATTERNS[op class]` are exact under IEEE 754 arithmetic (same bits for every input,
NaN payloads aside) and are attached to their ops by the `GraphCanonicalization` trait.
`FAST_MATH_PATTERNS` hold the rules that are not exact (x*0 -> 0, x-x -> 0, e^x/e^y ->
e^(x-y), reassociation, log(exp x) -> x, ...): `canonicalize{fast-math=true}` adds them.

Decisions on signed zeros (a literal `0` matches `0`, `0.0`, `-0.0`, `zero`, inline or
splat of any shape; `-0` means a float -0.0 or an integer 0):
  x + (-0) -> x   exact: x + -0.0 == x for every x, also x = -0.0.
  x + (+0) -> x   NOT exact for x = -0.0 (-0.0 + 0.0 = +0.0): fast-math only (ints: exact).
  x - (+0) -> x   exact (-0.0 - 0.0 = -0.0).    (-0) - x -> -x   exact.
sinh/cosh recognition replaces a formula by the library function, which is within an
ulp of it and overflows later: kept in the default set because DLVM's intent is to use
the function (documented deviation from bit-exactness).
Every rule keeps the result type: a rule whose replacement would have another type
(x + 0 where the 0 has a larger shape than x) does not apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from dlc.diagnostics import copy_loc
from dlc.dialects.graph import InferenceError
from dlc.dialects.graph_canonicalization import register_patterns
from dlc.dialects.graph_elementwise import BINARY_OPS, UNARY_OPS, DataTypeCastOp, SelectOp
from dlc.dialects.graph_tensor import (
    DotOp,
    PadShapeOp,
    ReverseOp,
    ShapeCastOp,
    SqueezeShapeOp,
    TransposeOp,
    int_array,
    ints,
)
from dlc.dialects.graph_types import TensorType
from dlc.passes.graph.pass_support import (
    is_float,
    is_minus_zero,
    is_plus_zero,
    is_splat,
    splat,
    splat_value,
    tensor_of,
)
from dlc.semantics.interpreter import numpy_dtype

Add, Sub, Mul, Div, Pow, Mod = (
    BINARY_OPS[k] for k in "add subtract multiply divide power modulo".split()
)
Neg, Exp, Log = UNARY_OPS["negate"], UNARY_OPS["exp"], UNARY_OPS["log"]
Rewrite = SSAValue | list[Operation] | None
Rule = Callable[[Any], Rewrite]
RESHAPES = (ShapeCastOp, PadShapeOp, SqueezeShapeOp)


@dataclass(frozen=True)
class RulePattern(RewritePattern):
    """Apply `rule` to ops of `op_class` when its replacement keeps the result type."""

    op_class: type[Operation]
    rule: Rule

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.op_class):
            return
        try:
            out = self.rule(op)
        except InferenceError:
            return  # a rebuilt op would not type-check (broadcasting): not a match
        if out is None:
            return
        new = out if isinstance(out, SSAValue) else out[-1].results[0]
        if new.type != op.results[0].type:
            return
        if not isinstance(out, SSAValue):
            copy_loc(op, *out)  # diagnostics and trap messages keep naming the source line
        rewriter.replace(op, [] if isinstance(out, SSAValue) else out, [new])
        for helper in [] if isinstance(out, SSAValue) else out[:-1]:
            for r in helper.results:
                r._name = None  # DLVM names are unique per function


def of(value: SSAValue, cls: type[Operation]) -> Any:
    """The op defining `value` when it is a `cls`, else None."""
    return value.owner if isinstance(value.owner, cls) else None


def const(c: float, like: SSAValue) -> list[Operation]:
    assert isinstance(like.type, TensorType)
    return [splat(c, like.type)]


# -- exact rules ------------------------------------------------------------------


def add_minus_zero(op: Any) -> Rewrite:  # x + (-0) -> x ; (-0) + x -> x
    return op.lhs if is_minus_zero(op.rhs) else op.rhs if is_minus_zero(op.lhs) else None


def add_negated(op: Any) -> Rewrite:  # x + (-y) -> x - y ; (-x) + y -> y - x
    if n := of(op.rhs, Neg):
        return [Sub(op.lhs, n.operand)]
    return [Sub(op.rhs, n.operand)] if (n := of(op.lhs, Neg)) else None


def sub_plus_zero(op: Any) -> Rewrite:  # x - (+0) -> x
    return op.lhs if is_plus_zero(op.rhs) else None


def sub_from_minus_zero(op: Any) -> Rewrite:  # (-0) - x -> -x
    return [Neg(op.rhs)] if is_minus_zero(op.lhs) else None


def sub_negated(op: Any) -> Rewrite:  # x - (-y) -> x + y
    return [Add(op.lhs, n.operand)] if (n := of(op.rhs, Neg)) else None


def int_sub_self(op: Any) -> Rewrite:  # x - x -> 0 (integers)
    return const(0, op.result) if op.lhs == op.rhs and not is_float(op.lhs) else None


def mul_one(op: Any) -> Rewrite:  # x * 1 -> x ; 1 * x -> x
    return op.lhs if is_splat(op.rhs, 1) else op.rhs if is_splat(op.lhs, 1) else None


def mul_minus_one(op: Any) -> Rewrite:  # x * -1 -> -x ; -1 * x -> -x
    return (
        [Neg(op.lhs)] if is_splat(op.rhs, -1) else [Neg(op.rhs)] if is_splat(op.lhs, -1) else None
    )


def mul_negated_pair(op: Any) -> Rewrite:  # (-x) * (-y) -> x * y
    a, b = of(op.lhs, Neg), of(op.rhs, Neg)
    return [Mul(a.operand, b.operand)] if a and b else None


def int_mul_zero(op: Any) -> Rewrite:  # x * 0 -> 0 ; 0 * x -> 0 (integers)
    zero = is_splat(op.lhs, 0) or is_splat(op.rhs, 0)
    return const(0, op.result) if zero and not is_float(op.result) else None


def div_one(op: Any) -> Rewrite:  # x / 1 -> x
    return op.lhs if is_splat(op.rhs, 1) else None


def div_minus_one(op: Any) -> Rewrite:  # x / -1 -> -x (floats; ints overflow at MIN)
    return [Neg(op.lhs)] if is_splat(op.rhs, -1) and is_float(op.lhs) else None


def div_negated_pair(op: Any) -> Rewrite:  # (-x) / (-y) -> x / y
    a, b = of(op.lhs, Neg), of(op.rhs, Neg)
    return [Div(a.operand, b.operand)] if a and b else None


def hyperbolic(op: Any) -> Rewrite:  # (e^x - e^-x) / 2 -> sinh x ; (e^x + e^-x) / 2 -> cosh x
    if not is_splat(op.rhs, 2) or not isinstance(op.lhs.owner, Sub | Add):
        return None
    inner = op.lhs.owner
    pos, neg = of(inner.lhs, Exp), of(inner.rhs, Exp)
    if isinstance(inner, Add) and pos and of(pos.operand, Neg):
        pos, neg = neg, pos  # e^-x + e^x
    negated = of(neg.operand, Neg) if pos and neg else None
    if not negated or negated.operand != pos.operand:
        return None
    return [UNARY_OPS["sinh" if isinstance(inner, Sub) else "cosh"](pos.operand)]


def pow_one(op: Any) -> Rewrite:  # x ^ 1 -> x
    return op.lhs if is_splat(op.rhs, 1) else None


def pow_zero(op: Any) -> Rewrite:  # x ^ 0 -> 1 (also for NaN)
    return const(1, op.result) if is_splat(op.rhs, 0) else None


def pow_two(op: Any) -> Rewrite:  # x ^ 2 -> x * x
    return [Mul(op.lhs, op.lhs)] if is_splat(op.rhs, 2) else None


def pow_minus_one(op: Any) -> Rewrite:  # x ^ -1 -> 1 / x
    if not is_splat(op.rhs, -1):
        return None
    one = splat(1, op.lhs.type.with_shape(()))
    return [one, Div(one.result, op.lhs)]


def int_mod_self(op: Any) -> Rewrite:  # x mod x -> 0 (integers; x mod 0 is 0)
    return const(0, op.result) if op.lhs == op.rhs and not is_float(op.lhs) else None


def neg_neg(op: Any) -> Rewrite:  # -(-x) -> x
    return n.operand if (n := of(op.operand, Neg)) else None


def unary_at_zero(op: Any) -> Rewrite:  # sin 0 -> 0, cos 0 -> 1, ..., log 1 -> 0 (splat of T)
    c = splat_value(op.operand)
    if c is None or isinstance(c, bool) or c != (1 if op.OPCODE == "log" else 0):
        return None
    x = np.asarray(c, dtype=numpy_dtype(op.operand.type.dt))
    from dlc.semantics.ops import unary

    return const(unary(op.OPCODE, x).item(), op.result)


AT_ZERO = "sin sinh tan tanh asin atan sqrt erf cos cosh exp log floor ceil round rint".split()


def transpose_transpose(op: Any) -> Rewrite:  # (x^T)^T -> x
    return t.operand if (t := of(op.operand, TransposeOp)) else None


def transpose_vector(op: Any) -> Rewrite:  # x^T -> x for rank <= 1
    return op.operand if op.operand.type.rank <= 1 else None


def reshape_same(op: Any) -> Rewrite:  # shapeCast x to shape(x) -> x
    return op.operand


def reshape_reshape(op: Any) -> Rewrite:  # reshape(reshape x) -> shapeCast x (or x)
    inner = op.operand.owner
    if not isinstance(inner, RESHAPES):
        return None
    x = inner.operands[0]
    if x.type == op.result.type:
        return x
    shape = int_array(op.result.type.dims)
    return [
        ShapeCastOp.create(operands=[x], result_types=[op.result.type], properties={"shape": shape})
    ]


def dot_unit_batch(op: Any) -> Rewrite:  # dot(a, b), batch dims all 1 -> reshape(dot(a', b'))
    """A batched product whose batch dimensions are all 1 as the matrix product of its
    operands reshaped to rank 2 (same products in the same order, same bits): the
    matrix product's schedules (packed constant B, its epilogue) apply, and a
    reshaped weight (`shapeCast w to 1 x K x N`) folds back into `w`."""
    out = op.result.type
    if out.rank < 3 or any(d != 1 for d in out.dims[:-2]):
        return None
    ops = [_reshaped(x, x.type.dims[-2:]) for x in (op.lhs, op.rhs)]
    product = TensorType(out.dims[-2:], out.dt)
    ops.append(DotOp.create(operands=[o.results[0] for o in ops], result_types=[product]))
    return [*ops, _reshaped(ops[-1].results[0], out.dims)]


def _reshaped(x: SSAValue, dims: tuple[int, ...]) -> Operation:
    t = TensorType(dims, tensor_of(x).dt)
    return ShapeCastOp.create(operands=[x], result_types=[t], properties={"shape": int_array(dims)})


def reverse_reverse(op: Any) -> Rewrite:  # reverse(reverse x along D) along D -> x
    r = of(op.operand, ReverseOp)
    return r.operand if r and sorted(ints(r.dims)) == sorted(ints(op.dims)) else None


def cast_same(op: Any) -> Rewrite:  # dataTypeCast x to dt(x) -> x
    return op.operand


def select_same(op: Any) -> Rewrite:  # select x, x by m -> x
    return op.lhs if op.lhs == op.rhs else None


# -- fast-math rules (not exact in IEEE) --------------------------------------------


def fm_add_zero(op: Any) -> Rewrite:  # x + 0 -> x ; 0 + x -> x
    return op.lhs if is_splat(op.rhs, 0) else op.rhs if is_splat(op.lhs, 0) else None


def fm_sub_self(op: Any) -> Rewrite:  # x - x -> 0
    return const(0, op.result) if op.lhs == op.rhs else None


def fm_sub_from_zero(op: Any) -> Rewrite:  # 0 - x -> -x
    return [Neg(op.rhs)] if is_splat(op.lhs, 0) else None


def fm_mul_zero(op: Any) -> Rewrite:  # x * 0 -> 0 ; 0 * x -> 0
    return const(0, op.result) if is_splat(op.lhs, 0) or is_splat(op.rhs, 0) else None


def fm_div_self(op: Any) -> Rewrite:  # x / x -> 1
    return const(1, op.result) if op.lhs == op.rhs and is_float(op.lhs) else None


def fm_mod_self(op: Any) -> Rewrite:  # x mod x -> 0
    return const(0, op.result) if op.lhs == op.rhs else None


def fm_div_exp_exp(op: Any) -> Rewrite:  # e^x / e^y -> e^(x - y)
    a, b = of(op.lhs, Exp), of(op.rhs, Exp)
    return [d := Sub(a.operand, b.operand), Exp(d.result)] if a and b else None


def fm_div_exp(op: Any) -> Rewrite:  # x / e^y -> x * e^(-y)
    b = of(op.rhs, Exp)
    return [n := Neg(b.operand), e := Exp(n.result), Mul(op.lhs, e.result)] if b else None


def fm_div_pow(op: Any) -> Rewrite:  # x / y^z -> x * y^(-z)
    b = of(op.rhs, Pow)
    return (
        [n := Neg(b.rhs), p := Pow(b.lhs, n.result), Mul(op.lhs, p.result)]
        if b and is_float(op.lhs)
        else None
    )


def fm_div_quotients(op: Any) -> Rewrite:  # (x/y) / (z/a) -> (x*a) / (y*z)
    a, b = of(op.lhs, Div), of(op.rhs, Div)
    if not a or not b or not is_float(op.lhs):
        return None
    return [n := Mul(a.lhs, b.rhs), d := Mul(a.rhs, b.lhs), Div(n.result, d.result)]


def fm_div_quotient_lhs(op: Any) -> Rewrite:  # (x/y) / z -> x / (y*z)
    a = of(op.lhs, Div)
    return [d := Mul(a.rhs, op.rhs), Div(a.lhs, d.result)] if a and is_float(op.lhs) else None


def fm_div_quotient_rhs(op: Any) -> Rewrite:  # x / (y/z) -> (x*z) / y
    b = of(op.rhs, Div)
    return [n := Mul(op.lhs, b.rhs), Div(n.result, b.lhs)] if b and is_float(op.lhs) else None


def fm_pow_exp(op: Any) -> Rewrite:  # (e^x)^y -> e^(x*y)
    a = of(op.lhs, Exp)
    return [m := Mul(a.operand, op.rhs), Exp(m.result)] if a else None


def fm_log_exp(op: Any) -> Rewrite:  # log(e^x) -> x
    return e.operand if (e := of(op.operand, Exp)) else None


def fm_exp_log(op: Any) -> Rewrite:  # e^(log x) -> x (fast-math assumes no NaN: x > 0)
    return g.operand if (g := of(op.operand, Log)) else None


def _table(
    rules: dict[type[Operation], list[Rule]],
) -> dict[type[Operation], tuple[RewritePattern, ...]]:
    return {cls: tuple(RulePattern(cls, r) for r in rs) for cls, rs in rules.items()}


_EXACT: dict[type[Operation], list[Rule]] = {
    Add: [add_minus_zero, add_negated],
    Sub: [sub_plus_zero, sub_from_minus_zero, sub_negated, int_sub_self],
    Mul: [mul_one, int_mul_zero, mul_minus_one, mul_negated_pair],
    Div: [div_one, div_minus_one, div_negated_pair, hyperbolic],
    Pow: [pow_one, pow_zero, pow_two, pow_minus_one],
    Mod: [int_mod_self],
    Neg: [neg_neg],
    TransposeOp: [transpose_transpose, transpose_vector],
    DotOp: [dot_unit_batch],
    ShapeCastOp: [reshape_same, reshape_reshape],
    PadShapeOp: [reshape_reshape],
    SqueezeShapeOp: [reshape_reshape],
    ReverseOp: [reverse_reverse],
    DataTypeCastOp: [cast_same],
    SelectOp: [select_same],
}
for _opcode in AT_ZERO:
    _EXACT[UNARY_OPS[_opcode]] = [unary_at_zero]

PATTERNS = _table(_EXACT)
"""op class -> its exact canonicalization patterns (attached to the ops below)."""
register_patterns(PATTERNS)

FAST_MATH_PATTERNS = _table(
    {
        Add: [fm_add_zero],
        Sub: [fm_sub_self, fm_sub_from_zero],
        Mul: [fm_mul_zero],
        Div: [
            fm_div_self,
            fm_div_exp_exp,
            fm_div_exp,
            fm_div_pow,
            fm_div_quotients,
            fm_div_quotient_lhs,
            fm_div_quotient_rhs,
        ],
        Pow: [fm_pow_exp],
        Mod: [fm_mod_self],
        Log: [fm_log_exp],
        Exp: [fm_exp_log],
    }
)
"""op class -> rules that are not exact in IEEE arithmetic (`fast-math=true`)."""
