"""Scalar part of `lower-loop-to-llvm`: the llvm building blocks (`const`, `icmp`,
`select`, intrinsic and libm calls through the `ScalarEmitter`) and `SIMPLE`, the table of
xDSL `arith` / `math` ops whose llvm ops depend only on their operands; `arith_ops.py`
dispatches one op (`lower_scalar_op`) to the table, casts, compares and constants. The
semantics are the reference interpreter's (`dlc/semantics/ops.py`;
docs/reference/semantics.md): integer division and remainder by zero give 0 and
`INT_MIN / -1` wraps instead of trapping (LLVM's `sdiv`/`srem` would be undefined);
`maximumf`/`minimumf` propagate NaN. Math functions without an LLVM intrinsic call libm
(`tanhf`, `erf`, ...); f16 goes through f32 for those calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from xdsl.dialects import arith, llvm, math
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    VectorType,
    f32,
    i1,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import llvm_lanes, loop
from dlc.lowering import prebuilt
from dlc.lowering.prebuilt import make


class ScalarEmitter(Protocol):
    """What the scalar lowering needs from the function emitter."""

    def emit(self, op: Operation) -> SSAValue:
        """Append `op` at the insertion point; return its first result (if any)."""
        ...

    def declare(self, name: str, inputs: Sequence[Attribute], output: Attribute) -> None:
        """Declare an external function (libm) in the module."""
        ...

    def constant(self, value: IntegerAttr | FloatAttr, t: Attribute) -> SSAValue:
        """`llvm.mlir.constant(value)`, one per function: defined at the top of its
        entry block (so it dominates every use) and shared by all uses."""
        ...


# How one op is lowered: the emitter and the op's lowered operands give its llvm value.
Lowering = Callable[[ScalarEmitter, list[SSAValue]], SSAValue]


def type_suffix(t: Attribute) -> str:
    """LLVM intrinsic name suffix: f16/f32/f64/iN, v16f32 for vectors."""
    if isinstance(t, VectorType):
        return f"v{t.get_shape()[0]}{type_suffix(t.element_type)}"
    if isinstance(t, Float16Type):
        return "f16"
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float64Type):
        return "f64"
    assert isinstance(t, IntegerType)
    return f"i{t.width.data}"


_INTS: dict[tuple[int, Attribute], IntegerAttr] = {}  # const's attributes, made once


def const(out: ScalarEmitter, value: int | float, t: Attribute) -> SSAValue:
    """The constant `value` of type `t` (a vector type: in every lane)."""
    if isinstance(t, VectorType):
        return splat(out, const(out, value, t.element_type), t)
    if isinstance(t, IntegerType):
        key = (int(value), t)
        attr = _INTS.get(key)
        if attr is None:
            attr = _INTS[key] = IntegerAttr(int(value), t)
        return out.constant(attr, t)
    assert isinstance(t, AnyFloat)
    return out.constant(FloatAttr(float(value), t), t)


def splat(out: ScalarEmitter, scalar: SSAValue, t: VectorType) -> SSAValue:
    """`scalar` in every lane of a `t` (LLVM folds a constant's splat to a constant)."""
    first = out.emit(
        make(llvm.InsertElementOp, out.emit(make(llvm.UndefOp, t)), scalar, const(out, 0, i32))
    )
    mask = DenseArrayBase.from_list(i32, [0] * t.get_shape()[0])
    return out.emit(make(llvm.ShuffleVectorOp, first, first, mask, t))


def intrinsic(out: ScalarEmitter, name: str, args: Sequence[SSAValue], t: Attribute) -> SSAValue:
    """Call `llvm.<name>.<suffix of t>` returning a `t`."""
    return out.emit(make(llvm.CallIntrinsicOp, f"llvm.{name}.{type_suffix(t)}", list(args), [t]))


def icmp(out: ScalarEmitter, pred: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    return out.emit(prebuilt.icmp(llvm.ICmpPredicateFlag(pred).to_int(), lhs, rhs))


def select(out: ScalarEmitter, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
    return out.emit(make(llvm_lanes.SelectOp, cond, a, b))


# --- integer division: x / 0 -> 0, INT_MIN / -1 wraps ------------------------------


def _safe_divisor(
    out: ScalarEmitter, a: SSAValue, b: SSAValue, signed: bool
) -> tuple[SSAValue, SSAValue]:
    """(divisor that cannot trap, b == 0)."""
    t = b.type
    assert isinstance(t, IntegerType)
    zero, one = const(out, 0, t), const(out, 1, t)
    is_zero = icmp(out, "eq", b, zero)
    bad = is_zero
    if signed:
        int_min = const(out, -(1 << (t.width.data - 1)), t)
        overflow = out.emit(
            make(llvm.AndOp, icmp(out, "eq", a, int_min), icmp(out, "eq", b, const(out, -1, t)))
        )
        bad = out.emit(make(llvm.OrOp, is_zero, overflow))
    return select(out, bad, one, b), is_zero


def _guarded(kind: type[Operation], signed: bool) -> Lowering:
    """a op b with b == 0 -> 0; with INT_MIN / -1 computed as INT_MIN / 1 (wraps)."""

    def lower(out: ScalarEmitter, xs: list[SSAValue]) -> SSAValue:
        a, b = xs
        safe_b, is_zero = _safe_divisor(out, a, b, signed)
        value = out.emit(make(kind, a, safe_b))
        return select(out, is_zero, const(out, 0, a.type), value)

    return lower


def _rounded_div(out: ScalarEmitter, xs: list[SSAValue], floor: bool) -> SSAValue:
    """floor (or ceil) of a / b for signed ints; b == 0 -> 0."""
    a, b = xs
    t = a.type
    safe_b, is_zero = _safe_divisor(out, a, b, True)
    q = out.emit(make(llvm.SDivOp, a, safe_b))
    r = out.emit(make(llvm.SRemOp, a, safe_b))
    zero = const(out, 0, t)
    inexact = icmp(out, "ne", r, zero)
    signs_differ = icmp(out, "slt", out.emit(make(llvm.XOrOp, r, safe_b)), zero)
    if floor:  # q - 1 when the remainder's sign differs from the divisor's
        adjust = out.emit(make(llvm.AndOp, inexact, signs_differ))
        q = select(out, adjust, out.emit(make(llvm.SubOp, q, const(out, 1, t))), q)
    else:  # q + 1 when the signs agree
        agree = out.emit(make(llvm.XOrOp, signs_differ, const(out, 1, i1)))
        adjust = out.emit(make(llvm.AndOp, inexact, agree))
        q = select(out, adjust, out.emit(make(llvm.AddOp, q, const(out, 1, t))), q)
    return select(out, is_zero, zero, q)


def _shift(kind: type[Operation], arithmetic: bool) -> Lowering:
    """Shift amounts >= width give 0 (or the sign fill for arithmetic shifts), not poison."""

    def lower(out: ScalarEmitter, xs: list[SSAValue]) -> SSAValue:
        a, b = xs
        t = a.type
        element = t.element_type if isinstance(t, VectorType) else t  # lane by lane
        assert isinstance(element, IntegerType)
        width = const(out, element.width.data, t)
        too_far = icmp(out, "uge", b, width)
        if arithmetic:  # a >> min(b, width - 1) is the sign fill for large b
            clamped = select(out, too_far, const(out, element.width.data - 1, t), b)
            return out.emit(make(llvm.AShrOp, a, clamped))
        shifted = out.emit(make(kind, a, b))
        return select(out, too_far, const(out, 0, t), shifted)

    return lower


def _ipowi(out: ScalarEmitter, xs: list[SSAValue]) -> SSAValue:
    """x ** n by square-and-multiply over the bits of n (wraps); n < 0: 1, ±1 or 0."""
    x, n = xs
    t = x.type
    assert isinstance(t, IntegerType)
    zero, one = const(out, 0, t), const(out, 1, t)
    result, base = one, x
    for bit in range(t.width.data - 1):
        mask = const(out, 1 << bit, t)
        has_bit = icmp(out, "ne", out.emit(make(llvm.AndOp, n, mask)), zero)
        result = select(out, has_bit, out.emit(make(llvm.MulOp, result, base)), result)
        base = out.emit(make(llvm.MulOp, base, base))
    is_one = icmp(out, "eq", x, one)
    is_minus_one = icmp(out, "eq", x, const(out, -1, t))
    odd = icmp(out, "ne", out.emit(make(llvm.AndOp, n, one)), zero)
    minus_one_power = select(out, odd, const(out, -1, t), one)
    negative = select(out, is_one, one, select(out, is_minus_one, minus_one_power, zero))
    return select(out, icmp(out, "slt", n, zero), negative, result)


# --- float helpers ------------------------------------------------------------------


def libm_call(name: str) -> Lowering:
    """Call libm `name` (double) / `namef` (float); f16 is computed in f32; on
    vectors, one call per lane."""

    def lower(out: ScalarEmitter, xs: list[SSAValue]) -> SSAValue:
        t = xs[0].type
        if isinstance(t, VectorType):
            return _per_lane(out, xs, t, lower)
        work = f32 if isinstance(t, Float16Type) else t
        args = [x if work == t else out.emit(make(llvm.FPExtOp, x, work)) for x in xs]
        symbol = name if isinstance(work, Float64Type) else f"{name}f"
        out.declare(symbol, [work] * len(args), work)
        value = out.emit(make(llvm.CallOp, symbol, *args, return_type=work))
        return value if work == t else out.emit(make(llvm.FPTruncOp, value, t))

    return lower


def _per_lane(out: ScalarEmitter, xs: list[SSAValue], t: VectorType, scalar: Lowering) -> SSAValue:
    """`scalar` applied to each lane of the vectors `xs`, put together as a `t` (a lane
    is taken out as a one-lane shuffle bitcast to its scalar: xDSL's llvm dialect has
    no `extractelement`)."""
    result = out.emit(make(llvm.UndefOp, t))
    element = t.element_type
    one = VectorType(element, [1])
    for lane in range(t.get_shape()[0]):
        mask = DenseArrayBase.from_list(i32, [lane])
        args = [
            out.emit(
                make(llvm.BitcastOp, out.emit(make(llvm.ShuffleVectorOp, x, x, mask, one)), element)
            )
            for x in xs
        ]
        at = const(out, lane, i32)
        result = out.emit(make(llvm.InsertElementOp, result, scalar(out, args), at))
    return result


def _intr(name: str, *extra_false: bool) -> Lowering:
    """Intrinsic `llvm.<name>.<type>` on the operands (plus trailing i1 flags)."""

    def lower(out: ScalarEmitter, xs: list[SSAValue]) -> SSAValue:
        flags = [const(out, int(flag), i1) for flag in extra_false]
        return intrinsic(out, name, [*xs, *flags], xs[0].type)

    return lower


def _rsqrt(out: ScalarEmitter, xs: list[SSAValue]) -> SSAValue:
    root = intrinsic(out, "sqrt", xs, xs[0].type)
    return out.emit(make(llvm.FDivOp, const(out, 1.0, xs[0].type), root))


def _fpowi(out: ScalarEmitter, xs: list[SSAValue]) -> SSAValue:
    exponent = out.emit(make(llvm.SIToFPOp, xs[1], xs[0].type))
    return intrinsic(out, "pow", [xs[0], exponent], xs[0].type)


def _binary(kind: type[Operation]) -> Lowering:
    return lambda out, xs: out.emit(make(kind, xs[0], xs[1]))


def _fbinary(kind: type[Operation]) -> Lowering:
    return lambda out, xs: out.emit(make(kind, xs[0], xs[1]))


# Ops whose lowering depends only on the operands (result type = operand type).
SIMPLE: dict[type[Operation], Lowering] = {
    arith.AddiOp: _binary(llvm.AddOp),  # wraps
    arith.SubiOp: _binary(llvm.SubOp),
    arith.MuliOp: _binary(llvm.MulOp),
    arith.AndIOp: _binary(llvm.AndOp),
    arith.OrIOp: _binary(llvm.OrOp),
    arith.XOrIOp: _binary(llvm.XOrOp),
    arith.ShLIOp: _shift(llvm.ShlOp, False),
    arith.ShRUIOp: _shift(llvm.LShrOp, False),
    arith.ShRSIOp: _shift(llvm.AShrOp, True),
    arith.DivSIOp: _guarded(llvm.SDivOp, True),  # x / 0 -> 0
    arith.DivUIOp: _guarded(llvm.UDivOp, False),
    arith.RemSIOp: _guarded(llvm.SRemOp, True),  # x % 0 -> 0
    arith.RemUIOp: _guarded(llvm.URemOp, False),
    arith.FloorDivSIOp: lambda out, xs: _rounded_div(out, xs, True),
    arith.CeilDivSIOp: lambda out, xs: _rounded_div(out, xs, False),
    arith.MaxSIOp: _intr("smax"),
    arith.MinSIOp: _intr("smin"),
    arith.MaxUIOp: _intr("umax"),
    arith.MinUIOp: _intr("umin"),
    arith.AddfOp: _fbinary(llvm.FAddOp),
    arith.SubfOp: _fbinary(llvm.FSubOp),
    arith.MulfOp: _fbinary(llvm.FMulOp),
    arith.DivfOp: _fbinary(llvm.FDivOp),
    loop.RemFOp: _fbinary(llvm.FRemOp),  # sign of the dividend, like C fmod
    arith.NegfOp: lambda out, xs: out.emit(make(llvm.FNegOp, xs[0])),
    arith.MaximumfOp: _intr("maximum"),  # NaN-propagating
    arith.MinimumfOp: _intr("minimum"),
    arith.MaxnumfOp: _intr("maxnum"),
    arith.MinnumfOp: _intr("minnum"),
    math.AbsFOp: _intr("fabs"),
    math.AbsIOp: _intr("abs", False),
    math.CeilOp: _intr("ceil"),
    math.FloorOp: _intr("floor"),
    math.RoundOp: _intr("round"),  # half away from zero
    math.RoundEvenOp: _intr("roundeven"),
    math.TruncOp: _intr("trunc"),
    math.SqrtOp: _intr("sqrt"),
    math.RsqrtOp: _rsqrt,
    math.ExpOp: _intr("exp"),
    math.Exp2Op: _intr("exp2"),
    math.LogOp: _intr("log"),
    math.Log2Op: _intr("log2"),
    math.Log10Op: _intr("log10"),
    math.SinOp: _intr("sin"),
    math.CosOp: _intr("cos"),
    math.TanOp: _intr("tan"),
    math.PowFOp: _intr("pow"),
    math.CopySignOp: _intr("copysign"),
    math.FmaOp: _intr("fma"),
    math.FPowIOp: _fpowi,
    math.IPowIOp: _ipowi,
    math.CountLeadingZerosOp: _intr("ctlz", False),
    math.CountTrailingZerosOp: _intr("cttz", False),
    math.CtPopOp: _intr("ctpop"),
    math.TanhOp: libm_call("tanh"),
    math.SinhOp: libm_call("sinh"),
    math.CoshOp: libm_call("cosh"),
    math.AsinOp: libm_call("asin"),
    math.AcosOp: libm_call("acos"),
    math.AtanOp: libm_call("atan"),
    math.AsinhOp: libm_call("asinh"),
    math.AcoshOp: libm_call("acosh"),
    math.AtanhOp: libm_call("atanh"),
    math.Atan2Op: libm_call("atan2"),
    math.ErfOp: libm_call("erf"),
    loop.ErfcOp: libm_call("erfc"),
    math.ExpM1Op: libm_call("expm1"),
    math.Log1pOp: libm_call("log1p"),
    math.CbrtOp: libm_call("cbrt"),
    arith.SelectOp: lambda out, xs: select(out, xs[0], xs[1], xs[2]),
}
