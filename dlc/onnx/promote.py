"""Type promotion for the importer. onnx's reference implementation computes with NumPy,
so where an ONNX operator mixes types (an i32 accumulator times an f32 scale) the
importer casts to the type that reference computes in. The rule is written out here
rather than asked of NumPy at import time: NumPy's answer for bf16 depends on the
installed ml_dtypes (0.6 has no common type of i32 and bf16, 0.7 says f64), and the
compiled program must not change with a library's version.

The rule, NumPy's for arrays, extended to bf16 by the same principle: two types
promote to the least type of the lattice that holds every value of both exactly.

- bool < every other type; signed and unsigned integers of one kind: the wider.
- a signed and an unsigned integer: the signed type wider than the unsigned one
  (u8 ∨ i8 = i16, u32 ∨ i32 = i64); u64 ∨ any signed integer = f64.
- an integer and a float: the narrowest float at least as wide as the float whose
  significand holds the integer (8- and 16-bit: f16 for 8-bit integers, f32 for
  16-bit, f64 for 32- and 64-bit), and at least the float itself.
- bf16: holds 8-bit integers exactly (an 8-bit significand), like f16; bf16 ∨ f16 =
  f32 (neither holds the other's range or precision); bf16 ∨ f32 = f32."""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import DataTypeCastOp
from dlc.dtypes import dtype_bits, dtype_is_float, dtype_is_unsigned
from dlc.onnx.emitter import Emitter, tensor_type

_INTEGERS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_FLOATS = ("f16", "bf16", "f32", "f64")


def cast(e: Emitter, x: SSAValue, dt: str) -> SSAValue:
    """x as `dt` (x itself when it has that type)."""
    if tensor_type(x).dt == dt:
        return x
    return e.op(DataTypeCastOp, [x], dtype=StringAttr(dt))


def _float_for(integer: str) -> str:
    """The narrowest float that holds every value of `integer` exactly (as NumPy's
    promotion of an integer array with a float array): 8 bits f16, 16 bits f32, more f64."""
    bits = dtype_bits(integer)
    return "f16" if bits <= 8 else "f32" if bits <= 16 else "f64"


def _join_floats(a: str, b: str) -> str:
    if a == b:
        return a
    if {a, b} == {"f16", "bf16"}:
        return "f32"
    return max(a, b, key=lambda dt: (dtype_bits(dt), dt != "bf16"))


def _join(a: str, b: str) -> str:
    """The least common type of two of ONNX's data types (`emitter.ELEMENT_TYPES`)."""
    if a == b:
        return a
    if a == "bool" or b == "bool":
        return b if a == "bool" else a
    if a in _INTEGERS and b in _INTEGERS:
        if dtype_is_unsigned(a) == dtype_is_unsigned(b):
            return max(a, b, key=dtype_bits)
        signed, unsigned = (a, b) if dtype_is_unsigned(b) else (b, a)
        width = dtype_bits(unsigned) * 2
        if width > 64:
            return "f64"
        return f"i{max(width, dtype_bits(signed))}"
    if a in _FLOATS and b in _FLOATS:
        return _join_floats(a, b)
    integer, real = (a, b) if b in _FLOATS else (b, a)
    assert integer in _INTEGERS and real in _FLOATS, f"no {a} or {b} in the lattice"
    narrow = "bf16" if real == "bf16" and dtype_bits(integer) <= 8 else _float_for(integer)
    return _join_floats(narrow, real)


def promoted(*dts: str, divide: bool = False) -> str:
    """The common type of an operation on arrays of `dts` (true division of integers:
    f64, as NumPy's `/`)."""
    result = dts[0]
    for dt in dts[1:]:
        result = _join(result, dt)
    if divide and not dtype_is_float(result) and result != "bf16":
        return "f64"
    return result
