"""Compiled functions as CPython builtin functions: the cheapest call from Python; and
the probed `PyArrayObject` layout the native entries read.

A call through ctypes converts every argument and goes through libffi: about 150 ns
before any work, more than NumPy's whole `x + 1`. The METH_FASTCALL entry of a function
(`dlc.lowering.loop_to_llvm.python_entry.fast_entry`) is a C function with CPython's
own calling convention, wrapped here in a builtin function object
(`PyCFunction_NewEx`), which the interpreter calls directly (about 15 ns).

The entry assumes what it cannot check: a 64-bit CPython with the GIL, whose objects
start with their reference count (it returns new references by incrementing it), and
the `PyArrayObject` layout the runtime probed (`convention.ARRAY_LAYOUT`). `FAST_CALLS`
says whether this interpreter is one (not a debug or free-threaded build, not PyPy);
elsewhere compiled functions keep the ctypes call.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from dlc.dialects.abi import ArrayLayout

METH_FASTCALL = 0x0080


def _array_layout() -> ArrayLayout | None:
    """The `PyArrayObject` field offsets of this process's NumPy (NumPy 1 and 2 share
    them on 64-bit CPython), each checked on probe arrays; None when any differs (then
    entries take data pointers and Python checks the arguments)."""
    word = ctypes.sizeof(ctypes.c_void_p)
    layout = ArrayLayout(
        type=word, data=2 * word, nd=3 * word, dims=4 * word, descr=7 * word, flags=8 * word
    )
    probe = np.zeros((3, 5), np.float32)
    transposed = probe.T

    def read(array: np.ndarray, offset: int, ctype: type) -> int:
        return ctypes.cast(id(array) + offset, ctypes.POINTER(ctype))[0]

    if word != 8 or read(probe, layout.type, ctypes.c_void_p) != id(np.ndarray):
        return None
    dims = read(probe, layout.dims, ctypes.c_void_p)
    ok = (
        read(probe, layout.data, ctypes.c_void_p) == probe.ctypes.data
        and read(probe, layout.nd, ctypes.c_int32) == 2
        and [ctypes.c_int64.from_address(dims + 8 * i).value for i in range(2)] == [3, 5]
        and read(probe, layout.descr, ctypes.c_void_p) == id(probe.dtype)
        and read(probe, layout.flags, ctypes.c_int32) & 1 == 1
        and read(transposed, layout.flags, ctypes.c_int32) & 1 == 0
    )
    return layout if ok else None


ARRAY_LAYOUT = _array_layout()
DATA_OFFSET = ARRAY_LAYOUT.data if ARRAY_LAYOUT is not None else None


def _data_field(array: np.ndarray) -> int | None:
    assert DATA_OFFSET is not None
    return ctypes.c_void_p.from_address(id(array) + DATA_OFFSET).value


def _ctypes_data(array: np.ndarray) -> int | None:
    return array.ctypes.data


array_address: Callable[[np.ndarray], int | None] = (
    _data_field if DATA_OFFSET is not None else _ctypes_data
)
"""The address of an array's data: read from its `PyArrayObject` where the probed
layout holds (a few times cheaper than `ndarray.ctypes.data`), else through NumPy."""


def _supported() -> bool:
    return (
        sys.implementation.name == "cpython"
        and ctypes.sizeof(ctypes.c_void_p) == 8
        and not hasattr(sys, "gettotalrefcount")  # a debug build: two more words first
        and "t" not in getattr(sys, "abiflags", "")  # a free-threaded build: another header
        and hasattr(ctypes, "pythonapi")
    )


FAST_CALLS = _supported()


class _MethodDef(ctypes.Structure):
    _fields_ = [  # noqa: RUF012 -- ctypes' declaration
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    ]


class Builtin:
    """A builtin function object calling the native METH_FASTCALL function at
    `address`; `failed` is the object it returns when a call did not succeed (its
    `self`). Keep this object (it owns the method table) while the function is used."""

    def __init__(self, address: int, name: str) -> None:
        self.failed = object()
        self._name = name.encode("utf-8", "replace")
        self._table = _MethodDef(self._name, address, METH_FASTCALL, None)
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
        self.function: Callable[..., Any] = new(ctypes.addressof(self._table), self.failed, None)
