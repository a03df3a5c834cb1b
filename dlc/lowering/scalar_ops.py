"""Scalar semantics of DLVM's element-wise opcodes as xDSL `arith`/`math` code.

Shared by the graph -> tensor lowering (compute bodies) and the tensor -> loop lowering
(reduction combinators), so both levels agree with shared conventions:

- integer `divide`/`truncateDivide` round toward zero, `floorDivide` toward -inf,
  `modulo` takes the dividend's sign; a zero divisor yields 0 (guarded with
  `arith.select`, so no trap); `MIN / -1` wraps to `MIN`;
- float `floorDivide` follows NumPy's `npy_divmod`, float `modulo` is C `fmod`;
- `min`/`max` on floats propagate NaN; `sign` gives -1, 0, 1 and NaN for NaN;
- integer `power` with a negative exponent gives 1 for x == 1, ±1 for x == -1 by
  parity and 0 otherwise; otherwise wrapping square-and-multiply;
- bool values are `i1`.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, i1, i64
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Operation, SSAValue

from dlc.dialects import loop
from dlc.dialects.graph_types import dtype_bits, dtype_is_bool, dtype_is_float, dtype_is_unsigned
from dlc.dialects.tensor import ComputeOp, ReadOp, scalar_type
from dlc.dialects.tensor_types import (
    FloatScalar,
    bf16_bits,
    float_scalar_type,
    int_scalar_type,
)
from dlc.lowering.scalar_tables import (
    FLOAT_BINARY,
    FLOAT_PREDICATES,
    FLOAT_UNARY,
    INT_BINARY,
    INT_PREDICATES,
    UINT_BINARY,
    UINT_PREDICATES,
)
from dlc.lowering.special_functions import SpecialFunctions


class Unsupported(Exception):
    """An opcode/type combination the code generator cannot emit; message = opcode."""


class ScalarBuilder:
    """Appends scalar `arith`/`math` ops through an xDSL `Builder`."""

    def __init__(self, builder: Builder):
        self.builder = builder

    def emit(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    def const(self, value: int | float | bool, dtype: str) -> SSAValue:
        """A constant of a DLVM data type (bool -> i1)."""
        t = scalar_type(dtype)
        attr: IntegerAttr | FloatAttr
        if not isinstance(t, IntegerType):
            attr = FloatAttr(float(value), t)
        elif dtype == "bf16":  # its bits (`bf16_bits`)
            attr = IntegerAttr(bf16_bits(float(value)), t)
        else:
            attr = IntegerAttr(wrap_int(int(value), dtype_bits(dtype)), t)
        return self.emit(arith.ConstantOp(attr))

    def index(self, value: int) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, i64)))

    def typed_const(self, value: int | float, like: SSAValue) -> SSAValue:
        t = like.type
        if isinstance(t, IntegerType):
            return self.emit(arith.ConstantOp(IntegerAttr(wrap_int(int(value), t.width.data), t)))
        assert isinstance(t, FloatScalar), f"a constant like a value of type {t}"
        return self.emit(arith.ConstantOp(FloatAttr(float(value), t)))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.SelectOp(cond, a, b))

    def cmpi(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.CmpiOp(a, b, pred))

    def cmpf(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.CmpfOp(a, b, pred))

    # -- element-wise opcodes ------------------------------------------------

    def unary(self, opcode: str, dtype: str, x: SSAValue) -> SSAValue:
        if opcode == "square":
            return self.binary("multiply", dtype, x, x)
        if opcode == "sign":
            return self._sign(dtype, x)
        if not dtype_is_float(dtype):
            if opcode != "negate":
                raise Unsupported(opcode)
            return self.emit(arith.SubiOp(self.typed_const(0, x), x))
        if opcode in ("lgamma", "digamma"):
            return SpecialFunctions(self).in_f64(x, dtype, opcode)
        if opcode not in FLOAT_UNARY:
            raise Unsupported(opcode)
        return self.emit(FLOAT_UNARY[opcode](x))

    def _sign(self, dtype: str, x: SSAValue) -> SSAValue:
        one, minus_one, zero = (self.typed_const(v, x) for v in (1, -1, 0))
        if dtype_is_float(dtype):
            # x == 0 maps -0.0 to 0.0; NaN fails every compare and passes through.
            rest = self.select(self.cmpf("oeq", x, zero), zero, x)
            rest = self.select(self.cmpf("olt", x, zero), minus_one, rest)
            return self.select(self.cmpf("ogt", x, zero), one, rest)
        if dtype_is_unsigned(dtype):
            return self.select(self.cmpi("ne", x, zero), one, zero)
        rest = self.select(self.cmpi("slt", x, zero), minus_one, zero)
        return self.select(self.cmpi("sgt", x, zero), one, rest)

    def binary(self, opcode: str, dtype: str, x: SSAValue, y: SSAValue) -> SSAValue:
        """A numeric or boolean binary opcode, or a compare (giving i1); `@f` calls the
        loop function f (a function combinator, see `loop.scalar_call`)."""
        if opcode.startswith("@"):
            from dlc.dialects.loop_memory import ScalarCallOp

            return self.emit(ScalarCallOp(opcode[1:], [x, y], x.type))
        if opcode in FLOAT_PREDICATES:
            if dtype_is_float(dtype):
                return self.cmpf(FLOAT_PREDICATES[opcode], x, y)
            if dtype_is_unsigned(dtype):
                return self.cmpi(UINT_PREDICATES[opcode], x, y)
            return self.cmpi(INT_PREDICATES[opcode], x, y)
        if dtype_is_float(dtype):
            return self._float_binary(opcode, x, y)
        if dtype_is_bool(dtype) and opcode not in ("and", "or", "xor"):
            raise Unsupported(opcode)
        unsigned = dtype_is_unsigned(dtype)
        if opcode in INT_BINARY:
            return self.emit((UINT_BINARY if unsigned else INT_BINARY)[opcode](x, y))
        if opcode in ("divide", "truncateDivide", "floorDivide", "modulo") and unsigned:
            return self._uint_division(opcode, x, y)
        if opcode in ("divide", "truncateDivide", "floorDivide", "modulo"):
            return self._int_division(opcode, x, y)
        if opcode == "power":
            return self._int_power(dtype, x, y)
        raise Unsupported(opcode)

    def _float_binary(self, opcode: str, x: SSAValue, y: SSAValue) -> SSAValue:
        if opcode in FLOAT_BINARY:
            return self.emit(FLOAT_BINARY[opcode](x, y))
        if opcode == "truncateDivide":
            return self.emit(math.TruncOp(self.emit(arith.DivfOp(x, y))))
        if opcode == "floorDivide":
            return self._float_floor_divide(x, y)
        raise Unsupported(opcode)

    def _float_floor_divide(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """NumPy's npy_divmod quotient (exact where floor(a / b) is not)."""
        zero = self.typed_const(0.0, a)
        one = self.typed_const(1.0, a)
        mod = self.emit(loop.RemFOp(a, b))
        div = self.emit(arith.DivfOp(self.emit(arith.SubfOp(a, mod)), b))
        signs_differ = self.cmpi("ne", self.cmpf("olt", b, zero), self.cmpf("olt", mod, zero))
        adjust = self.emit(arith.AndIOp(self.cmpf("une", mod, zero), signs_differ))
        div = self.select(adjust, self.emit(arith.SubfOp(div, one)), div)
        floor = self.emit(math.FloorOp(div))
        round_up = self.cmpf("ogt", self.emit(arith.SubfOp(div, floor)), self.typed_const(0.5, a))
        floor = self.select(round_up, self.emit(arith.AddfOp(floor, one)), floor)
        plain = self.emit(arith.DivfOp(a, b))
        signed_zero = self.emit(math.CopySignOp(zero, plain))
        result = self.select(self.cmpf("une", div, zero), floor, signed_zero)
        return self.select(self.cmpf("oeq", b, zero), plain, result)

    def _uint_division(self, opcode: str, x: SSAValue, y: SSAValue) -> SSAValue:
        """Guarded unsigned division (every rounding is toward zero): y == 0 gives 0."""
        zero, one = self.typed_const(0, x), self.typed_const(1, x)
        y_is_zero = self.cmpi("eq", y, zero)
        safe_y = self.select(y_is_zero, one, y)
        op = arith.RemUIOp if opcode == "modulo" else arith.DivUIOp
        return self.select(y_is_zero, zero, self.emit(op(x, safe_y)))

    def _int_division(self, opcode: str, x: SSAValue, y: SSAValue) -> SSAValue:
        """Guarded signed division: y == 0 gives 0, y == -1 avoids the MIN / -1 trap."""
        zero, one, minus_one = (self.typed_const(v, x) for v in (0, 1, -1))
        y_is_zero = self.cmpi("eq", y, zero)
        y_is_minus_one = self.cmpi("eq", y, minus_one)
        unsafe = self.emit(arith.OrIOp(y_is_zero, y_is_minus_one))
        safe_y = self.select(unsafe, one, y)
        if opcode == "modulo":
            # remsi(x, 1) = 0 covers both y == 0 and y == -1.
            return self.emit(arith.RemSIOp(x, safe_y))
        q = self.emit(arith.DivSIOp(x, safe_y))
        if opcode == "floorDivide":
            r = self.emit(arith.RemSIOp(x, safe_y))
            r_nonzero = self.cmpi("ne", r, zero)
            signs_differ = self.cmpi(
                "ne", self.cmpi("slt", r, zero), self.cmpi("slt", safe_y, zero)
            )
            adjust = self.emit(arith.AndIOp(r_nonzero, signs_differ))
            q = self.select(adjust, self.emit(arith.SubiOp(q, one)), q)
        q = self.select(y_is_minus_one, self.emit(arith.SubiOp(zero, x)), q)
        return self.select(y_is_zero, zero, q)

    def _int_power(self, dtype: str, x: SSAValue, e: SSAValue) -> SSAValue:
        """Square-and-multiply over the exponent's bits, unrolled (wrapping)."""
        zero, one, minus_one = (self.typed_const(v, x) for v in (0, 1, -1))
        result, base = one, x
        unsigned = dtype_is_unsigned(dtype)
        for bit in range(dtype_bits(dtype) - (0 if unsigned else 1)):
            shifted = self.emit(arith.ShRSIOp(e, self.typed_const(bit, e)))
            is_set = self.cmpi("ne", self.emit(arith.AndIOp(shifted, one)), zero)
            result = self.select(is_set, self.emit(arith.MuliOp(result, base)), result)
            base = self.emit(arith.MuliOp(base, base))
        if unsigned:
            return result
        odd = self.cmpi("ne", self.emit(arith.AndIOp(e, one)), zero)
        minus_one_pow = self.select(odd, minus_one, one)
        negative = self.select(self.cmpi("eq", x, minus_one), minus_one_pow, zero)
        negative = self.select(self.cmpi("eq", x, one), one, negative)
        return self.select(self.cmpi("slt", e, zero), negative, result)

    def not_(self, x: SSAValue) -> SSAValue:
        """Logical not of an i1, bitwise not of a wider integer."""
        if x.type == i1:
            return self.emit(arith.XOrIOp(x, self.emit(arith.ConstantOp(IntegerAttr(1, i1)))))
        return self.emit(arith.XOrIOp(x, self.typed_const(-1, x)))

    def cast(self, x: SSAValue, source: str, target: str) -> SSAValue:
        """`dataTypeCast` (graph_elementwise.DataTypeCastOp states the rules). f16
        goes through f32 (ints to f16 through f64 above 16 bits) so that no
        compiler-rt conversion routine is needed."""
        if source == target:
            return x
        if source == "bf16":
            x, source = self._bf16_to_f32(x), "f32"
            return self.cast(x, source, target)
        if target == "bf16":
            return self._f32_to_bf16(self.cast(x, source, "f32"))
        if dtype_is_bool(target):
            zero = self.const(0, source)
            if dtype_is_float(source):
                return self.cmpf("une", x, zero)
            return self.cmpi("ne", x, zero)
        if dtype_is_float(source) and dtype_is_float(target):
            return self._float_cast(x, source, target)
        if dtype_is_float(source):
            if source == "f16":
                x, source = self.emit(arith.ExtFOp(x, scalar_type("f32"))), "f32"
            return self._float_to_int(x, target)
        if dtype_is_float(target):
            via = target if target != "f16" else "f32" if dtype_bits(source) <= 16 else "f64"
            signed = not (dtype_is_bool(source) or dtype_is_unsigned(source))
            op = arith.SIToFPOp if signed else arith.UIToFPOp
            y = self.emit(op(x, float_scalar_type(via)))
            return self._float_cast(y, via, target)
        return self._int_cast(x, source, target)

    def _float_to_int(self, x: SSAValue, target: str) -> SSAValue:
        """Truncated toward zero to i64 (saturating, NaN -> 0; lowered to LLVM's
        `fptosi.sat`), then wrapped to the target's width; u64: [0, 2^64) saturating,
        negatives wrapped from i64 (semantics/ops.py `cast`)."""
        wide = self.emit(arith.FPToSIOp(x, i64))
        if target == "u64":
            big = self.emit(arith.FPToUIOp(x, i64))
            negative = self.cmpf("olt", x, self.typed_const(0.0, x))
            return self.select(negative, wide, big)
        if dtype_bits(target) == 64:
            return wide
        return self.emit(arith.TruncIOp(wide, int_scalar_type(target)))

    def _bf16_to_f32(self, bits: SSAValue) -> SSAValue:
        """bf16 bits are the top half of the f32 with the same value."""
        wide = self.emit(arith.ExtUIOp(bits, IntegerType(32)))
        shifted = self.emit(arith.ShLIOp(wide, self.typed_const(16, wide)))
        return self.emit(arith.BitcastOp(shifted, scalar_type("f32")))

    def _f32_to_bf16(self, x: SSAValue) -> SSAValue:
        """f32 -> bf16 bits, rounded to nearest even (NaN: its top half, made quiet)."""
        bits = self.emit(arith.BitcastOp(x, IntegerType(32)))
        c = lambda v: self.typed_const(v, bits)  # noqa: E731
        top = self.emit(arith.ShRUIOp(bits, c(16)))
        odd = self.emit(arith.AndIOp(top, c(1)))
        rounded = self.emit(arith.AddiOp(bits, self.emit(arith.AddiOp(c(0x7FFF), odd))))
        rounded = self.emit(arith.ShRUIOp(rounded, c(16)))
        quiet = self.emit(arith.OrIOp(top, c(0x40)))
        result = self.select(self.cmpf("uno", x, x), quiet, rounded)
        return self.emit(arith.TruncIOp(result, IntegerType(16)))

    def _float_cast(self, x: SSAValue, source: str, target: str) -> SSAValue:
        if dtype_bits(source) == dtype_bits(target):
            return x
        if dtype_bits(target) < dtype_bits(source):
            return self.emit(arith.TruncFOp(x, scalar_type(target)))
        return self.emit(arith.ExtFOp(x, scalar_type(target)))

    def _int_cast(self, x: SSAValue, source: str, target: str) -> SSAValue:
        """Integers (and bool) to integers: wrap, extended by the source's signedness."""
        bits, to_bits = dtype_bits(source), dtype_bits(target)
        if bits == to_bits:
            return x
        if to_bits < bits:
            return self.emit(arith.TruncIOp(x, int_scalar_type(target)))
        signed = not (dtype_is_bool(source) or dtype_is_unsigned(source))
        op = arith.ExtSIOp if signed else arith.ExtUIOp
        return self.emit(op(x, int_scalar_type(target)))


def wrap_int(value: int, bits: int) -> int:
    """Two's-complement wrap into the signed range of `bits` (bool stays 0/1)."""
    if bits == 1:
        return -1 if value & 1 else 0
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def mark_contractible(add: arith.AddfOp, element: SSAValue) -> None:
    """Let LLVM fuse `acc + x * y` (the `add` folding a product `element`) into one
    fused multiply-add: both ops get `contract`, nothing else (no reassociation). The
    schedule's `fma` decides; see `dlc.dialects.schedule` for the error bound."""
    owner = element.owner
    if not isinstance(owner, arith.MulfOp):
        return
    add.fastmath = _with_flag(add.fastmath, FastMathFlag.ALLOW_CONTRACT)
    owner.fastmath = _with_flag(owner.fastmath, FastMathFlag.ALLOW_CONTRACT)


def _with_flag(
    flags: arith.FastMathFlagsAttr | None, flag: FastMathFlag
) -> arith.FastMathFlagsAttr:
    present = set(flags.data) if flags is not None else set()
    return arith.FastMathFlagsAttr([*present, flag])


"""Fast-math flags of a reduction's float combine (`mark_reassociable`)."""


def contiguous_reduction(op: ComputeOp) -> bool:
    """Whether `op`'s innermost reduction index longer than 1 is used only as the index
    of the last dimension longer than 1 of its reads (a contiguous walk, e.g. a row sum,
    or the channel sum of a 1 x 1 convolution over a 1 x 1 image, whose reduction over
    the kernel's 1 x 1 taps comes after it; not a dot's `w[k, j]`)."""
    extents = op.reduction_extents
    if not extents:
        return False
    axis = max((a for a, n in enumerate(extents) if n > 1), default=len(extents) - 1)
    iv = op.body.block.args[len(op.domain) + axis]
    for use in iv.uses:
        read = use.operation
        if not isinstance(read, ReadOp):
            return False
        indices = list(read.indices)
        if indices[_last_long(read)] is not iv or sum(i is iv for i in indices) != 1:
            return False
    return True


def _last_long(read: ReadOp) -> int:
    """The position of the read tensor's last dimension longer than 1 (the last when
    none is)."""
    dims = getattr(read.tensor.type, "dims", ())
    return max((a for a, n in enumerate(dims) if n > 1), default=len(read.indices) - 1)


def mark_reassociable(op: ComputeOp, value: SSAValue) -> SSAValue:
    """Let LLVM reorder the float `add` / `multiply` fold producing `value` when `op`
    reduces over a contiguous innermost axis (`contiguous_reduction`; other reductions,
    dot products among them, keep the strict left-to-right order).

    The combine gets `reassoc` (only it: no `nnan`/`ninf`/`nsz`, so NaN, inf and
    signed zeros keep IEEE semantics), which lets the loop vectorizer keep K = VF x UF
    independent partial accumulators (on this AVX-512 host 8 lanes x 2-4 interleaved,
    K = 16-32), each a left fold of the elements i = lane (mod K), added up in a tree
    after the loop (`llvm.vector.reduce.fadd`) with the remainder folded in last.
    Changed summation order, error bound: |computed - exact| <= (n / K + log2 K + 1)
    u sum|x_i| (u = unit roundoff) instead of (n - 1) u sum|x_i| for the strict
    left-to-right fold: better, and close to NumPy's pairwise summation (the reference
    interpreter's `np.add.reduce`). Products: the same bound on the relative error.
    Results may differ from the sequential fold in the last bits and depend on the
    host's vector width (fixed per compiled module).
    `min`/`max` (`maximumf`/`minimumf`, NaN-propagating) and integer combines are
    associative already and vectorize without flags; other combines are left alone.
    """
    if contiguous_reduction(op):
        reassociate(value)
    return value


def reassociate(value: SSAValue) -> None:
    """`reassoc` on the float `add` / `multiply` producing `value` (the combine of a
    contiguous reduction: `mark_reassociable` says why and its error bound)."""
    combine = value.owner
    if isinstance(combine, arith.AddfOp | arith.MulfOp):
        combine.fastmath = _with_flag(combine.fastmath, FastMathFlag.REASSOC)
