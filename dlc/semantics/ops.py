"""Element-wise kernels of the reference interpreter (numpy, in the operands' own dtype).

Semantics (shared with the code generator; docs/reference/semantics.md states them
for users):

* Integer arithmetic wraps (two's complement at the numpy width); callers run under
  `np.errstate(all="ignore")`.
* Integer `divide`/`truncateDivide` round toward zero, `floorDivide` toward -inf,
  `modulo` has the sign of the dividend; a zero divisor gives 0. INT_MIN / -1 wraps to
  INT_MIN and INT_MIN modulo -1 is 0.
* Float `divide` is IEEE; `truncateDivide` is trunc(a / b), `floorDivide` is
  floor(a / b) (not numpy's floor_divide, which differs in the last place), `modulo`
  is C fmod.
* Integer `power` with a negative exponent: 1 for base 1, ±1 for base -1 by parity,
  else 0; otherwise repeated multiplication with wrap-around.
* `min`/`max` propagate NaN. `sign` gives -1, 0, 1 (+0 for ±0, NaN for NaN).
  `round` rounds half away from zero, `rint` half to even.
* `lgamma`, `erf`, `erfc` use Python's `math` per element in float64, rounded to the
  operand's dtype; `lgamma` at its poles is +inf. `digamma` is computed in float64 by
  reflection (x < 0.5), upward recurrence to x ≥ 10 and the asymptotic series; its
  poles (0, -1, -2, ...) and -inf give NaN, +inf gives +inf.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Kernel1 = Callable[[np.ndarray], np.ndarray]
Kernel2 = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _per_element(fn: Callable[[float], float]) -> Kernel1:
    ufunc = np.frompyfunc(fn, 1, 1)

    def kernel(x: np.ndarray) -> np.ndarray:
        return np.asarray(ufunc(x.astype(np.float64)), dtype=x.dtype)

    return kernel


def _lgamma(x: float) -> float:
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def digamma(x: float) -> float:
    """ψ(x) in float64 (see the module docstring)."""
    if math.isnan(x) or x == -math.inf:
        return math.nan
    if x == math.inf:
        return math.inf
    if x <= 0 and x == math.floor(x):
        return math.nan
    result = 0.0
    if x < 0.5:
        # Reflection: ψ(x) = ψ(1 − x) − π / tan(πx).
        result -= math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    # ψ(x) ~ ln x − 1/(2x) − Σ B_2k / (2k x^2k)
    series = f * (
        1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f * (1 / 132 - f * (691 / 32760)))))
    )
    return result + math.log(x) - 0.5 / x - series


def _round_half_away(x: np.ndarray) -> np.ndarray:
    whole = np.trunc(x)
    away = np.abs(x - whole) >= 0.5
    return np.where(away, whole + np.copysign(np.ones_like(x), x), whole)


def _sign(x: np.ndarray) -> np.ndarray:
    return np.where(x == 0, np.zeros_like(x), np.sign(x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(np.sqrt(x))


UNARY_KERNELS: dict[str, Kernel1] = {
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "log": np.log,
    "exp": np.exp,
    "negate": np.negative,
    "sign": _sign,
    "square": np.square,
    "sqrt": np.sqrt,
    "round": _round_half_away,
    "rsqrt": _rsqrt,
    "ceil": np.ceil,
    "floor": np.floor,
    "tan": np.tan,
    "cos": np.cos,
    "sin": np.sin,
    "acos": np.arccos,
    "asin": np.arcsin,
    "atan": np.arctan,
    "lgamma": _per_element(_lgamma),
    "digamma": _per_element(digamma),
    "erf": _per_element(math.erf),
    "erfc": _per_element(math.erfc),
    "rint": np.rint,
}


def unary(opcode: str, x: np.ndarray) -> np.ndarray:
    return np.asarray(UNARY_KERNELS[opcode](x), dtype=x.dtype)


# ---------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------


def _nonzero_divisor(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    zero = b == 0
    return zero, np.where(zero, np.ones_like(b), b)


def _int_floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zero, safe = _nonzero_divisor(b)
    return np.where(zero, 0, np.floor_divide(a, safe))


def _int_trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zero, safe = _nonzero_divisor(b)
    floor = np.floor_divide(a, safe)
    inexact = np.fmod(a, safe) != 0
    fix = inexact & ((a < 0) != (safe < 0))
    return np.where(zero, 0, floor + fix.astype(floor.dtype))


def _int_modulo(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zero, safe = _nonzero_divisor(b)
    return np.where(zero, 0, np.fmod(a, safe))


def _int_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    negative = b < 0
    power = np.power(a, np.where(negative, np.zeros_like(b), b))
    odd = np.remainder(b, 2) == 1
    minus_one = np.where(odd, -1, 1)
    tiny = np.where(a == 1, 1, np.where(a == -1, minus_one, 0))
    return np.where(negative, tiny, power)


def _uint_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a, b)


def _float_trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.trunc(np.divide(a, b))


def _float_floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.floor(np.divide(a, b))


_COMMON: dict[str, Kernel2] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "and": np.bitwise_and,  # logical on bool
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shiftLeft": lambda a, b: _shift(a, b, left=True),
    "shiftRight": lambda a, b: _shift(a, b, left=False),
    "lessThan": np.less,
    "lessThanOrEqual": np.less_equal,
    "greaterThan": np.greater,
    "greaterThanOrEqual": np.greater_equal,
    "equal": np.equal,
    "notEqual": np.not_equal,
}


def _shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    """ONNX BitShift: amounts outside [0, width) give 0 (right shifts of negative
    signed values: -1); left shifts wrap; right shifts of signed values are
    arithmetic."""
    a, b = np.broadcast_arrays(a, b)
    bits = a.dtype.itemsize * 8
    inside = (b >= 0) & (b < bits)
    amount = np.where(inside, b, 0).astype(a.dtype)
    if left:
        unsigned = a.view(f"u{a.dtype.itemsize}")
        y = np.left_shift(unsigned, amount.astype(unsigned.dtype)).view(a.dtype)
        return np.where(inside, y, np.zeros_like(a))
    fill = np.where(a < 0, np.array(-1).astype(a.dtype), np.zeros_like(a))
    return np.where(inside, np.right_shift(a, amount), fill)


_INT_ONLY: dict[str, Kernel2] = {
    "divide": _int_trunc_divide,
    "truncateDivide": _int_trunc_divide,
    "floorDivide": _int_floor_divide,
    "modulo": _int_modulo,
    "power": _int_power,
}

_FLOAT_ONLY: dict[str, Kernel2] = {
    "divide": np.divide,
    "truncateDivide": _float_trunc_divide,
    "floorDivide": _float_floor_divide,
    "modulo": np.fmod,
    "power": np.power,
}

COMPARES = {"lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual", "equal", "notEqual"}


def binary(opcode: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`opcode a, b` with DLVM broadcasting (a subset of numpy's)."""
    kernel = _COMMON.get(opcode)
    if kernel is None:
        table = _INT_ONLY if a.dtype.kind in "iu" else _FLOAT_ONLY
        kernel = _uint_power if opcode == "power" and a.dtype.kind == "u" else table[opcode]
    out_dtype = np.bool_ if opcode in COMPARES else a.dtype
    return np.asarray(kernel(a, b), dtype=out_dtype)


def cast(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """`dataTypeCast`: NumPy's `astype` (integers wrap, floats round to nearest, bool is
    `x != 0`), except float → int: truncated toward zero to a 64-bit integer, which
    saturates (NaN gives 0), then wrapped to the target's width as NumPy does for
    values within int64 (so -2.7 → u8 is 254); u64 takes [0, 2^64) without wrapping.
    bf16 (ml_dtypes' `bfloat16`, kind "V") converts through f32 both ways."""
    if x.dtype.name == "bfloat16" and to != x.dtype:
        return cast(x.astype(np.float32), to)
    if to.name == "bfloat16" and x.dtype != to:
        return np.asarray(cast(x, np.dtype(np.float32)).astype(to))
    if x.dtype.kind != "f" or to.kind not in "iu":
        return np.asarray(x.astype(to))
    whole = np.trunc(x.astype(np.float64))
    wide = _saturate(whole, np.dtype(np.int64))
    if to == np.uint64:
        big = _saturate(whole, np.dtype(np.uint64))
        return np.asarray(np.where(whole >= 0, big, wide.view(np.uint64)), dtype=to)
    return np.asarray(wide.astype(to))


def _saturate(whole: np.ndarray, to: np.dtype) -> np.ndarray:
    """Whole numbers (float64) to a 64-bit integer type, clamped; NaN gives 0."""
    info = np.iinfo(to)
    top = float(2 ** (info.bits - (1 if to.kind == "i" else 0)))  # info.max + 1, exact
    inside = np.where((whole >= info.min) & (whole < top), whole, 0).astype(to)
    y = np.where(whole >= top, np.array(info.max, to), inside)
    y = np.where(whole < info.min, np.array(info.min, to), y)
    return np.asarray(np.where(np.isnan(whole), np.array(0, to), y), dtype=to)


def select(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.asarray(np.where(mask, a, b), dtype=a.dtype)
