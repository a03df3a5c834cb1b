"""The arguments and results of a compiled function on the general path of a call
(`convention.CompiledFunction`): `Param` checks one argument (dtype, shape, scalar kind
and range) and converts it, raising `TypeError` / `ValueError` naming it; `new_output`
allocates results.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from dlc.dtypes import NUMPY_DTYPES
from dlc.runtime.signature import TensorSig, format_sig


def _poisoned_empty(shape: Any, dtype: Any) -> np.ndarray:
    """A new output filled with the byte 0x7f (f32 3.4e38, f64 1.4e306, i32
    2139062143): an element the compiled code fails to write shows up as a wrong
    value instead of whatever the allocator's recycled memory held."""
    output = np.empty(shape, dtype)
    output.reshape(-1).view(np.uint8).fill(0x7F)  # reshape: 0-d arrays too
    return output


new_output: Callable[..., np.ndarray] = (
    _poisoned_empty if os.environ.get("DLC_POISON_OUTPUTS", "") == "1" else np.empty
)
"""Allocates result arrays: `np.empty`, or poisoned with `DLC_POISON_OUTPUTS=1` (the
test suite sets it, so a result element left unwritten cannot pass by luck)."""


class Param:
    """One parameter of a compiled function: position, DLVM name, type, NumPy dtype."""

    __slots__ = ("dtype", "func", "index", "name", "shape", "ttype")

    def __init__(self, func: str, index: int, name: str, ttype: TensorSig) -> None:
        self.func, self.index, self.name, self.ttype = func, index, name, ttype
        self.shape = ttype.dims
        self.dtype = NUMPY_DTYPES[ttype.dt]

    def expected(self) -> str:
        return f"argument {self.index} (%{self.name}) of @{self.func}: expected {format_sig(self.ttype)}"

    def convert(self, value: object) -> np.ndarray:
        """The C-contiguous array to pass for `value` (the slow path of a call)."""
        if isinstance(value, np.ndarray):
            got = f"{value.dtype} array of shape {value.shape}"
            if value.dtype != self.dtype:
                raise TypeError(f"{self.expected()}, got {got}")
            if value.shape != self.shape:
                raise ValueError(f"{self.expected()}, got {got}")
            return np.ascontiguousarray(value)
        if self.shape == () and isinstance(value, numbers.Number | np.generic):
            return self.scalar(value)
        raise TypeError(f"{self.expected()}, got {type(value).__name__}")

    def scalar(self, value: Any) -> np.ndarray:
        """A Python / NumPy scalar converted to the dtype: exactly for integers and
        bools; for floats rounded, but never from a bool nor from a finite value to inf."""
        kind = self.dtype.kind
        is_bool = isinstance(value, bool | np.bool_)
        ok = False
        if kind == "b":
            ok = is_bool or (isinstance(value, numbers.Integral) and int(value) in (0, 1))
        elif is_bool:
            ok = False  # a bool is no number here, though Python's bool is an int
        elif kind in "iu" and isinstance(value, numbers.Real):
            info = np.iinfo(self.dtype)
            whole = isinstance(value, numbers.Integral) or float(value).is_integer()
            exact = int(value) if isinstance(value, numbers.Integral) else int(float(value))
            ok = whole and info.min <= exact <= info.max
        elif kind == "f":
            ok = isinstance(value, numbers.Real)
        if not ok:
            raise TypeError(f"{self.expected()}, got {type(value).__name__} {value!r}")
        if kind != "f":
            return np.array(value, dtype=self.dtype)
        try:
            with np.errstate(over="ignore"):
                array = np.array(value, dtype=self.dtype)
        except OverflowError:  # an int beyond float64's range
            array = None
        if array is None or (np.isinf(array) and not _is_infinite(value)):
            raise ValueError(
                f"{self.expected()}, got {type(value).__name__} {value!r}, out of the range of "
                f"{format_sig(self.ttype)}"
            )
        return array


def _is_infinite(value: object) -> bool:
    """Whether a Python / NumPy real is ±inf (ints and other reals are finite)."""
    return isinstance(value, float | np.floating) and bool(np.isinf(value))
