"""`lgamma` and `digamma` as straight-line float64 `arith`/`math` code.

No libm function exists for them in the loop -> llvm lowering, so they are expanded:

- lgamma: Lanczos approximation (g = 7, 9 terms) for x ≥ 0.5 and the reflection
  lgamma(x) = log(π / |sin(πx)|) − lgamma(1 − x) below; poles give +inf. Absolute error
  about 1e-14 on moderate arguments.
- digamma: reflection ψ(x) = ψ(1 − x) − π / tan(πx) for x < 0.5, then the recurrence
  ψ(x) = ψ(x + 1) − 1/x unrolled ten times (each step applied while x < 10), then the
  asymptotic series; poles give NaN, like the reference interpreter.

f32 operands are computed in f64 and rounded, as the reference does.
"""

from __future__ import annotations

import math as pymath
from typing import Protocol

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float64Type, FloatAttr
from xdsl.ir import Operation, SSAValue

_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)


class ScalarEmitter(Protocol):
    """What the expansions need of `scalar_ops.ScalarBuilder`."""

    def emit(self, op: Operation) -> SSAValue: ...

    def cmpf(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue: ...

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue: ...


class SpecialFunctions:
    """Emits lgamma / digamma through a `ScalarBuilder`."""

    def __init__(self, s: ScalarEmitter):
        self.s = s

    def c(self, value: float) -> SSAValue:
        return self.s.emit(arith.ConstantOp(FloatAttr(value, Float64Type())))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.s.emit(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.s.emit(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.s.emit(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.s.emit(arith.DivfOp(a, b))

    def in_f64(self, x: SSAValue, dtype: str, fn: str) -> SSAValue:
        """Widen to f64, apply `fn`, round back."""
        wide = x if dtype == "f64" else self.s.emit(arith.ExtFOp(x, Float64Type()))
        result = self.lgamma(wide) if fn == "lgamma" else self.digamma(wide)
        return result if dtype == "f64" else self.s.emit(arith.TruncFOp(result, x.type))

    def _lanczos(self, x: SSAValue) -> SSAValue:
        """lgamma(x) for x ≥ 0.5."""
        z = self.sub(x, self.c(1.0))
        series = self.c(_LANCZOS[0])
        for k, coefficient in enumerate(_LANCZOS[1:], start=1):
            series = self.add(series, self.div(self.c(coefficient), self.add(z, self.c(float(k)))))
        t = self.add(z, self.c(_LANCZOS_G + 0.5))
        log_t = self.s.emit(math.LogOp(t))
        result = self.add(
            self.c(0.5 * pymath.log(2 * pymath.pi)), self.mul(self.add(z, self.c(0.5)), log_t)
        )
        return self.add(self.sub(result, t), self.s.emit(math.LogOp(series)))

    def lgamma(self, x: SSAValue) -> SSAValue:
        small = self.s.cmpf("olt", x, self.c(0.5))
        reflected = self.s.select(small, self.sub(self.c(1.0), x), x)
        direct = self._lanczos(reflected)
        sine = self.s.emit(math.SinOp(self.mul(self.c(pymath.pi), x)))
        abs_sine = self.s.emit(math.AbsFOp(sine))
        log_ratio = self.s.emit(math.LogOp(self.div(self.c(pymath.pi), abs_sine)))
        value = self.s.select(small, self.sub(log_ratio, direct), direct)
        infinite = self.s.cmpf("oeq", self.s.emit(math.AbsFOp(x)), self.c(pymath.inf))
        infinite = self.s.emit(arith.OrIOp(infinite, self._pole(x)))
        return self.s.select(infinite, self.c(pymath.inf), value)

    def _pole(self, x: SSAValue) -> SSAValue:
        """x ∈ {0, -1, -2, ...} (i1)."""
        integral = self.s.cmpf("oeq", self.s.emit(math.FloorOp(x)), x)
        return self.s.emit(arith.AndIOp(integral, self.s.cmpf("ole", x, self.c(0.0))))

    def digamma(self, x: SSAValue) -> SSAValue:
        s = self.s
        original = x
        small = s.cmpf("olt", x, self.c(0.5))
        tangent = s.emit(math.TanOp(self.mul(self.c(pymath.pi), x)))
        result = s.select(
            small, self.sub(self.c(0.0), self.div(self.c(pymath.pi), tangent)), self.c(0.0)
        )
        x = s.select(small, self.sub(self.c(1.0), x), x)
        for _ in range(10):
            below = s.cmpf("olt", x, self.c(10.0))
            result = s.select(below, self.sub(result, self.div(self.c(1.0), x)), result)
            x = s.select(below, self.add(x, self.c(1.0)), x)
        f = self.div(self.c(1.0), self.mul(x, x))
        series = self.c(691 / 32760)
        for coefficient in (1 / 132, 1 / 240, 1 / 252, 1 / 120, 1 / 12):
            series = self.sub(self.c(coefficient), self.mul(f, series))
        series = self.mul(f, series)
        log_x = s.emit(math.LogOp(x))
        value = self.sub(self.sub(self.add(result, log_x), self.div(self.c(0.5), x)), series)
        return self._digamma_special(original, value)

    def _digamma_special(self, x: SSAValue, value: SSAValue) -> SSAValue:
        """Poles 0, -1, -2, ... and -inf give NaN; +inf gives +inf."""
        s = self.s
        pole = self._pole(x)
        value = s.select(s.cmpf("oeq", x, self.c(pymath.inf)), self.c(pymath.inf), value)
        return s.select(pole, self.c(pymath.nan), value)
