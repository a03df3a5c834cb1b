"""`lower_scalar_op(op, operands, out)`: the llvm ops for one xDSL `arith` / `math` op,
emitted through the `ScalarEmitter`, and the values that replace its results: the ops of
`scalar.SIMPLE`, casts, compares and constants. Float->int casts saturate, NaN giving 0
(`fptosi` would be poison); f64->f16 rounds once (`_f64_to_f16`).
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import (
    AnyFloat,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    VectorType,
    i1,
)
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.analysis.walk import kind_of
from dlc.diagnostics import error_at
from dlc.dialects import llvm_lanes
from dlc.lowering.loop_to_llvm.scalar import (
    SIMPLE,
    ScalarEmitter,
    const,
    icmp,
    intrinsic,
    select,
    type_suffix,
)
from dlc.lowering.prebuilt import make

_FLOAT_WIDTHS: dict[type[Attribute], int] = {Float16Type: 16, Float32Type: 32, Float64Type: 64}


def _width(t: Attribute) -> int:
    if isinstance(t, IntegerType):
        return t.width.data
    return _FLOAT_WIDTHS[type(t)]


def _uitofp(out: ScalarEmitter, x: SSAValue, t: Attribute) -> SSAValue:
    """Unsigned int -> float through a wider signed int (i64: halve, convert, double)."""
    width = _width(x.type)
    if width < 64:
        wide = out.emit(make(llvm.ZExtOp, x, IntegerType(64)))
        return out.emit(make(llvm.SIToFPOp, wide, t))
    i64t = x.type
    one = const(out, 1, i64t)
    halved = out.emit(
        make(llvm.OrOp, out.emit(make(llvm.LShrOp, x, one)), out.emit(make(llvm.AndOp, x, one)))
    )
    big = out.emit(make(llvm.SIToFPOp, halved, t))
    doubled = out.emit(make(llvm.FAddOp, big, big))
    small = out.emit(make(llvm.SIToFPOp, x, t))
    return select(out, icmp(out, "slt", x, const(out, 0, i64t)), doubled, small)


def _f64_to_f16(out: ScalarEmitter, x: SSAValue) -> SSAValue:
    """f64 -> f16 without compiler-rt's `__truncdfhf2` (absent from the JIT's process):
    round to f32 *to odd*, then to f16 to nearest even. f32 keeps 13 more bits than f16,
    so the double rounding is exact (Boldo & Melquiond, "Emulation of FMA and correctly
    rounded sums: proved algorithms using rounding to odd").

    Round to odd from round-to-nearest `r`: if `r` is inexact, step its magnitude toward
    zero when it overshot (truncation), then set the last bit."""
    f32t, i32t = Float32Type(), IntegerType(32)
    r = out.emit(make(llvm.FPTruncOp, x, f32t))
    back = out.emit(make(llvm.FPExtOp, r, Float64Type()))
    bits = out.emit(make(llvm.BitcastOp, r, i32t))
    abs_back = intrinsic(out, "fabs", [back], Float64Type())
    abs_x = intrinsic(out, "fabs", [x], Float64Type())
    overshot = out.emit(make(llvm_lanes.FCmpOp, abs_back, abs_x, "ogt"))
    truncated = select(out, overshot, out.emit(make(llvm.SubOp, bits, const(out, 1, i32t))), bits)
    odd = out.emit(make(llvm.OrOp, truncated, const(out, 1, i32t)))
    inexact = out.emit(make(llvm_lanes.FCmpOp, back, x, "one"))
    to_odd = out.emit(make(llvm.BitcastOp, select(out, inexact, odd, bits), f32t))
    return out.emit(make(llvm.FPTruncOp, to_odd, Float16Type()))


def _cast(op: Operation, x: SSAValue, out: ScalarEmitter) -> SSAValue | None:
    t = op.results[0].type
    if isinstance(op, arith.ExtFOp):
        return out.emit(make(llvm.FPExtOp, x, t))
    if isinstance(op, arith.TruncFOp):
        if isinstance(x.type, Float64Type) and isinstance(t, Float16Type):
            return _f64_to_f16(out, x)
        return out.emit(make(llvm.FPTruncOp, x, t))
    if isinstance(op, arith.ExtSIOp):
        return out.emit(make(llvm.SExtOp, x, t))
    if isinstance(op, arith.ExtUIOp):
        return out.emit(make(llvm.ZExtOp, x, t))
    if isinstance(op, arith.TruncIOp):
        return out.emit(make(llvm.TruncOp, x, t))
    if isinstance(op, arith.SIToFPOp):
        return out.emit(make(llvm.SIToFPOp, x, t))
    if isinstance(op, arith.UIToFPOp):
        return _uitofp(out, x, t)
    if isinstance(op, arith.FPToSIOp | arith.FPToUIOp):
        kind = "fptosi" if isinstance(op, arith.FPToSIOp) else "fptoui"
        name = f"llvm.{kind}.sat.{type_suffix(t)}.{type_suffix(x.type)}"  # NaN -> 0
        return out.emit(make(llvm.CallIntrinsicOp, name, [x], [t]))
    if isinstance(op, arith.BitcastOp):
        return out.emit(make(llvm.BitcastOp, x, t))
    return None


def _compare(op: Operation, xs: list[SSAValue], out: ScalarEmitter) -> SSAValue | None:
    if isinstance(op, arith.CmpiOp):
        # arith and llvm number the integer predicates the same way
        return out.emit(make(llvm.ICmpOp, xs[0], xs[1], IntegerAttr(op.predicate.value.data, 64)))
    if not isinstance(op, arith.CmpfOp):
        return None
    predicate = op.predicate.value.data
    if predicate in (0, 15):  # false / true
        return const(out, int(predicate == 15), i1)
    return out.emit(make(llvm_lanes.FCmpOp, xs[0], xs[1], IntegerAttr(predicate, 64)))


def _constant(op: arith.ConstantOp, out: ScalarEmitter) -> SSAValue:
    value = op.value
    t = op.result.type
    if isinstance(value, IntegerAttr) and isinstance(t, IntegerType):
        raw = value.value.data
        if t.width.data == 1:
            raw = int(raw != 0)
        same = value.type == t and raw == value.value.data
        return out.constant(value if same else IntegerAttr(raw, t), t)
    if isinstance(value, FloatAttr) and isinstance(t, AnyFloat):
        return out.constant(value if value.type == t else FloatAttr(value.value.data, t), t)
    raise error_at(op, f"not supported by the code generator yet: {op.name} of {t}")


def _with_fastmath(op: Operation, result: SSAValue) -> SSAValue:
    """Copy an arith float op's fast-math flags (a reduction's `reassoc`, see
    `scalar_ops.mark_reassociable`) onto the llvm float op that replaces it."""
    flags = op.properties.get("fastmath")
    owner = result.owner
    if isinstance(flags, arith.FastMathFlagsAttr) and flags.data:
        if isinstance(owner, llvm.AbstractFloatArithOp):
            owner.fastmathFlags = llvm.FastMathAttr(flags.data)
    return result


_TYPES = (VectorType, IntegerType, Float16Type, Float32Type, Float64Type)
_TYPE_KINDS: dict[type, int] = {}  # a type's class -> its `kind_of` `_TYPES`


def lower_scalar_op(op: Operation, operands: list[SSAValue], out: ScalarEmitter) -> list[SSAValue]:
    """The llvm values replacing `op`'s results; raises for unsupported ops."""
    constant = isinstance(op, arith.ConstantOp)
    for value in (*operands, *op.results):
        kind = kind_of(value.type, _TYPES, _TYPE_KINDS)
        if kind == 1 and not constant:  # element-wise arithmetic and casts on registers
            kind = kind_of(cast(VectorType, value.type).element_type, _TYPES, _TYPE_KINDS)
        if kind < 2:
            raise error_at(
                op, f"not supported by the code generator yet: {op.name} on {value.type}"
            )
    if constant:
        return [_constant(cast(arith.ConstantOp, op), out)]
    lowering = SIMPLE.get(type(op))
    if lowering is not None:
        return [_with_fastmath(op, lowering(out, operands))]
    result = _cast(op, operands[0], out) if len(operands) == 1 else _compare(op, operands, out)
    if result is None:
        raise error_at(op, f"not supported by the code generator yet: {op.name}")
    return [result]
