"""math-approx: f32 `exp`, `log`, `tanh`, `erf` as branch-free polynomials (no libm calls).

A loop-level rewrite run before `lower-loop-to-llvm` unless exact libm calls are asked
for (`fast_math_functions=False`); f16 is computed in f32, f64 keeps libm. The expansions
use only `arith`, `math.fma` and bit casts, so they vectorize, and vector forms give each
lane the scalar bits. A power by a constant 2, 3 or 4 becomes multiplications (every
float type; onnxruntime's Pow does the same): x·x is exact as pow rounds it, x³ and x⁴
round twice (within 2 ULP). Worst-case errors (exp, log, erf 2 ULP; tanh 5 ULP) and methods:
docs/design/numerics.md, tested in test/unit/test_math_approx.py.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    VectorType,
    f32,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dlc.analysis.levels import require_level
from dlc.analysis.walk import walk_ops
from dlc.dialects import loop
from dlc.passes.loop.math_powers import ExpandPowerPattern

_EXP_TAYLOR = [1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 1 / 2]  # r^7 .. r^2
_LOG_CEPHES = [
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
]
_TANH_Q = [  # tanh(a) = a + a^3 (q0 + q1 a^2 + ...), highest first
    0.0021451821085065603,
    -0.008179816417396069,
    0.021701674908399582,
    -0.05394693836569786,
    0.13333207368850708,
    -0.3333333134651184,
]
_ERF_SMALL = [  # erf(x) / x as a polynomial in x^2 on |x| < _ERF_SPLIT, highest first
    8.370249270228669e-05,
    -0.0008142745937220752,
    0.00520103657618165,
    -0.026859400793910027,
    0.11283695697784424,
    -0.37612634897232056,
    1.128379225730896,
]
_ERF_LARGE = [  # log(erfc(x)) as a polynomial in x - 2.5 on [_ERF_SPLIT, 4], highest first
    3.33990293199804e-08,
    1.6606431927357335e-06,
    -1.3465233678289223e-05,
    7.718589768046513e-05,
    -0.00041991102625615895,
    0.0021654514130204916,
    -0.010858637280762196,
    -0.9438937902450562,
    -5.352680683135986,
    -7.806815147399902,
]
_ERF_SPLIT = 0.921875
_MAGIC = 12582912.0  # 1.5 * 2^23: adding it rounds to an integer in the low bits
_MAGIC_BITS = 0x4B400000


_BUILT: dict[tuple[object, ...], tuple[dict[str, Attribute], list[Attribute]]] = {}
"""(op class, its constructor's arguments but the operands, the operand types) -> the
properties and result types that constructor gives (`_F32.op`)."""
_FLOATS: dict[bytes, FloatAttr] = {}  # the constants' attributes, made once
_INTS: dict[int, IntegerAttr] = {}


class _F32:
    """Tiny f32 expression builder, on scalars or (`lanes`) on `vector<lanes x f32>`."""

    def __init__(self, b: Builder, lanes: int = 0):
        self.b = b
        self.lanes = lanes
        self._splats: dict[Attribute, SSAValue] = {}

    def emit(self, op: Operation) -> SSAValue:
        return self.b.insert(op).results[0]

    def op(self, kind: type[Operation], *operands: SSAValue, extra: object = None) -> SSAValue:
        """`kind(*operands, extra)` (no `extra` when None), built by the generic
        `Operation.create` once the constructor's properties are known: a fifth of the
        constructor's time, and the expansions build 45 ops per `exp`."""
        if self.lanes and isinstance(extra, Attribute):
            extra = VectorType(extra, [self.lanes])  # a cast's result type
        key = (kind, extra, *(v.type for v in operands))
        known = _BUILT.get(key)
        if known is None:
            op = kind(*operands) if extra is None else kind(*operands, extra)  # type: ignore[call-arg, arg-type]
            _BUILT[key] = (dict(op.properties), [r.type for r in op.results])
            return self.emit(op)
        properties, types = known
        return self.emit(
            kind.create(operands=operands, result_types=types, properties=dict(properties))
        )

    def c(self, value: float) -> SSAValue:
        bits = struct.pack("<d", value)  # 0.0 and -0.0 apart, NaN equal to itself
        attr = _FLOATS.get(bits)
        if attr is None:
            attr = _FLOATS[bits] = FloatAttr(value, f32)
        return self.constant(attr)

    def ci(self, value: int) -> SSAValue:
        attr = _INTS.get(value)
        if attr is None:
            attr = _INTS[value] = IntegerAttr(value, i32)
        return self.constant(attr)

    def constant(self, value: FloatAttr | IntegerAttr) -> SSAValue:
        if value in self._splats:
            return self._splats[value]
        op = arith.ConstantOp.create(properties={"value": value}, result_types=[value.type])
        scalar = self.emit(op)
        if self.lanes:
            scalar = self.emit(loop.BroadcastOp(scalar, self.lanes))
            self._splats[value] = scalar
        return scalar

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.AddfOp, a, b)

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.SubfOp, a, b)

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.MulfOp, a, b)

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        return self.op(math.FmaOp, a, b, c)

    def cmp(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        if self.lanes:
            return self.emit(loop.VCmpfOp(pred, a, b))
        return self.op(arith.CmpfOp, a, b, extra=pred)

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        if self.lanes:
            return self.emit(loop.VSelectOp(cond, a, b))
        return self.op(arith.SelectOp, cond, a, b)

    def to_int(self, x: SSAValue) -> SSAValue:
        return self.op(arith.BitcastOp, x, extra=i32)

    def to_float(self, x: SSAValue) -> SSAValue:
        return self.op(arith.BitcastOp, x, extra=f32)

    def horner(self, x: SSAValue, coefficients: list[float]) -> SSAValue:
        acc = self.c(coefficients[0])
        for c in coefficients[1:]:
            acc = self.fma(acc, x, self.c(c))
        return acc

    def pow2(self, n: SSAValue) -> SSAValue:
        """2^n for an i32 n in the normal exponent range."""
        biased = self.op(arith.AddiOp, n, self.ci(127))
        return self.to_float(self.op(arith.ShLIOp, biased, self.ci(23)))

    def exp(self, x: SSAValue) -> SSAValue:
        xc = self.op(arith.MinimumfOp, self.op(arith.MaximumfOp, x, self.c(-104.0)), self.c(89.0))
        k = self.fma(xc, self.c(1.4426950408889634), self.c(_MAGIC))
        kf = self.sub(k, self.c(_MAGIC))
        n = self.op(arith.SubiOp, self.to_int(k), self.ci(_MAGIC_BITS))
        r = self.fma(kf, self.c(-0.693145751953125), xc)
        r = self.fma(kf, self.c(-1.428606765330187e-06), r)
        q = self.horner(r, _EXP_TAYLOR)
        p = self.add(self.fma(self.mul(r, r), q, r), self.c(1.0))
        n1 = self.op(arith.ShRSIOp, n, self.ci(1))
        n2 = self.op(arith.SubiOp, n, n1)
        return self.mul(self.mul(p, self.pow2(n1)), self.pow2(n2))

    def log(self, x: SSAValue) -> SSAValue:
        denormal = self.cmp("olt", x, self.c(1.1754943508222875e-38))
        xs = self.select(denormal, self.mul(x, self.c(8388608.0)), x)
        adjust = self.select(denormal, self.c(-23.0), self.c(0.0))
        bits = self.to_int(xs)
        biased = self.op(arith.AndIOp, self.op(arith.ShRUIOp, bits, self.ci(23)), self.ci(255))
        mantissa = self.op(arith.AndIOp, bits, self.ci(0x007FFFFF))
        m = self.to_float(self.op(arith.OrIOp, mantissa, self.ci(0x3F800000)))
        big = self.cmp("ogt", m, self.c(1.4142135623730951))
        m = self.select(big, self.mul(m, self.c(0.5)), m)
        e = self.op(arith.SubiOp, biased, self.ci(127))
        e = self.op(arith.AddiOp, e, self.op(arith.ExtUIOp, big, extra=i32))
        ef = self.add(self.op(arith.SIToFPOp, e, extra=f32), adjust)
        f = self.sub(m, self.c(1.0))
        z = self.mul(f, f)
        y = self.mul(self.mul(f, z), self.horner(f, _LOG_CEPHES))
        y = self.fma(ef, self.c(-2.12194440e-4), y)
        y = self.fma(z, self.c(-0.5), y)
        r = self.fma(ef, self.c(0.693359375), self.add(f, y))
        inf = self.c(float("inf"))
        r = self.select(self.cmp("oeq", x, inf), inf, r)
        r = self.select(self.cmp("oeq", x, self.c(0.0)), self.c(float("-inf")), r)
        invalid = self.cmp("ult", x, self.c(0.0))  # x < 0 or nan
        return self.select(invalid, self.c(float("nan")), r)

    def tanh(self, x: SSAValue) -> SSAValue:
        a = self.op(math.AbsFOp, x)
        a2 = self.mul(a, a)
        small = self.fma(self.mul(a2, a), self.horner(a2, _TANH_Q), a)
        e = self.exp(self.add(a, a))
        large = self.sub(self.c(1.0), self.op(arith.DivfOp, self.c(2.0), self.add(e, self.c(1.0))))
        r = self.select(self.cmp("olt", a, self.c(0.625)), small, large)
        return self.op(math.CopySignOp, r, x)

    def erf(self, x: SSAValue) -> SSAValue:
        a = self.op(math.AbsFOp, x)
        small = self.mul(a, self.horner(self.mul(a, a), _ERF_SMALL))
        b = self.op(arith.MinimumfOp, a, self.c(4.0))
        e = self.exp(self.horner(self.sub(b, self.c(2.5)), _ERF_LARGE))
        r = self.select(self.cmp("olt", a, self.c(_ERF_SPLIT)), small, self.sub(self.c(1.0), e))
        return self.op(math.CopySignOp, r, x)


_EXPANSIONS: dict[type[Operation], Callable[[_F32, SSAValue], SSAValue]] = {
    math.ExpOp: _F32.exp,
    math.LogOp: _F32.log,
    math.TanhOp: _F32.tanh,
    math.ErfOp: _F32.erf,
}
VECTOR_EXPANSIONS = (math.ExpOp, math.TanhOp, math.ErfOp)
"""The functions expanded on `vector<W x f32>` too (log's uses integer-to-float casts
on vectors, which xDSL's arith does not take: vector log stays LLVM's `llvm.log`)."""


Expanded = math.ExpOp | math.LogOp | math.TanhOp | math.ErfOp


def expanded(op: Expanded, rewriter: PatternRewriter) -> SSAValue | None:
    """The polynomial of one f16/f32 exp/log/tanh/erf (or vector exp/tanh/erf), inserted
    before it; None if the op's type has none (f64, vector log)."""
    t = op.results[0].type
    lanes = 0
    if isinstance(t, VectorType) and isinstance(op, VECTOR_EXPANSIONS):
        lanes, t = t.get_shape()[0], t.element_type
    if not isinstance(t, Float32Type | Float16Type):
        return None
    s = _F32(rewriter, lanes)
    x = op.operands[0]
    if isinstance(t, Float16Type):
        x = s.emit(arith.ExtFOp(x, VectorType(f32, [lanes]) if lanes else f32))
    value = _EXPANSIONS[type(op)](s, x)
    if isinstance(t, Float16Type):
        value = s.emit(arith.TruncFOp(value, op.results[0].type))
    return value


class ExpandFunctionPattern(RewritePattern):
    """f(x) -> polynomial(x), f in exp, log, tanh, erf (f16 through f32)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: Expanded, rewriter: PatternRewriter) -> None:
        value = expanded(op, rewriter)
        if value is None:
            return
        rewriter.replace(op, (), [value])


class MathApproxPass(ModulePass):
    """Loop level: f32/f16 `math.exp`, `math.log`, `math.tanh`, `math.erf` -> polynomial
    arith code (exp, tanh, erf on f32/f16 vectors too); `math.powf` by a constant 2, 3
    or 4 -> multiplications.

    Input: verified loop level (or any level whose bodies use xDSL `math`). Output: the
    same code without those ops for f16/f32 (f64 untouched); the error bounds are in
    the module docstring. Everything else is unchanged.

    The rewrites are patterns (`ExpandFunctionPattern`, `ExpandPowerPattern`), but the
    walk is dlc's `walk_ops` with a type test, not xDSL's `PatternRewriteWalker`: on a
    loop-level module, where few of many ops match, that walker (`Operation.walk`'s
    generators, a worklist, a listener per insertion) took 3 times as long (ResNet-50:
    20 -> 61 ms CPU).
    """

    name = "math-approx"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "loop", self.name)
        functions, powers = ExpandFunctionPattern(), ExpandPowerPattern()
        for inner in walk_ops(op):  # one sweep: an expansion holds no op a pattern matches
            if type(inner) in _EXPANSIONS:
                functions.match_and_rewrite(inner, PatternRewriter(inner))
            elif isinstance(inner, math.PowFOp):
                powers.match_and_rewrite(inner, PatternRewriter(inner))


__all__ = ["ExpandFunctionPattern", "MathApproxPass"]
