"""Scalar types of `tensor.compute` bodies and the verifier helpers the op families of
the `tensor` dialect share (`tensor_control.py`, `tensor_compute.py`)."""

from __future__ import annotations

from xdsl.dialects.builtin import Float16Type, Float32Type, Float64Type, IntegerType, i1
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.graph_types import NATIVE_DTYPES, TensorType

SUPPORTED_DTYPES = NATIVE_DTYPES


FloatScalar = Float16Type | Float32Type | Float64Type
"""The builtin types of float data types (bf16 is stored as its bits: an integer)."""


def scalar_type(dtype: str) -> FloatScalar | IntegerType:
    """The builtin scalar type of a data type inside compute bodies (bool -> i1)."""
    if dtype == "f16":
        return Float16Type()
    if dtype == "f32":
        return Float32Type()
    if dtype == "f64":
        return Float64Type()
    if dtype == "bool":
        return i1
    if dtype == "bf16":
        return IntegerType(16)  # a storage type: its bits (see `bf16_bits`)
    assert dtype in SUPPORTED_DTYPES, f"unsupported data type {dtype}"
    return IntegerType(int(dtype[1:]))


def int_scalar_type(dtype: str) -> IntegerType:
    """`scalar_type` of an integer data type, bool or bf16 (stored as its bits)."""
    t = scalar_type(dtype)
    assert isinstance(t, IntegerType), f"{dtype} is a float data type"
    return t


def float_scalar_type(dtype: str) -> FloatScalar:
    """`scalar_type` of a float data type (f16, f32, f64)."""
    t = scalar_type(dtype)
    assert not isinstance(t, IntegerType), f"{dtype} is not a float data type"
    return t


def bf16_bits(value: float) -> int:
    """The bits of `value` rounded to bf16 (through f32, to nearest even), as a signed
    16-bit integer (the storage of bf16 in compute bodies)."""
    import ml_dtypes
    import numpy as np

    single = np.array(value, np.float32)
    bits = int(single.astype(ml_dtypes.bfloat16).view(np.uint16))
    return bits - (1 << 16) if bits >= 1 << 15 else bits


def dtype_of_scalar(scalar: Attribute) -> str | None:
    """The data type whose body scalars have type `scalar` (i1 -> bool), else None."""
    for dtype in SUPPORTED_DTYPES:
        if dtype != "bf16" and scalar_type(dtype) == scalar:
            return dtype
    return None


class OpVerifyException(VerifyException):
    """A verifier error that belongs to `op`, nested in the op being verified (dlc's
    located verifier reports it at `op`'s location)."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


def tensor_type(value: SSAValue, what: str) -> TensorType:
    """The tensor type of `value`; a verifier error naming `what` otherwise."""
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{what}: expected a tensor, got {value.type}")
    return value.type
