"""The NumPy calling convention of compiled functions: argument checks and the call.

A `CompiledFunction` calls native code `f(ptr in0, ..., ptr out0, ...)` on
C-contiguous data (tuple results flattened, void result; see `dlc.dialects.abi`).
Arguments are checked (count, dtype, shape) before any native code runs: a wrong call
raises `TypeError` / `ValueError` naming the argument. For a small per-call cost each
function also has an entry `_dlc_py_<f>` that takes the `PyArrayObject*`s themselves
(`id(array)`) and loads their data pointers natively (`array.ctypes.data` alone costs
about a microsecond). The caller keeps every array alive during the call. Structs,
enums and pointers go through `values.py` (one array per leaf of the type's layout).
"""

from __future__ import annotations

import ctypes
import numbers
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from xdsl.ir import Attribute

from dlc.dialects.graph_types import (
    NATIVE_DTYPES,
    TensorType,
    TupleType,
    format_type,
    nest_leaves,
    numpy_dtype,
)
from dlc.dialects.layout import LayoutError, leaves
from dlc.runtime.jit import JITModule
from dlc.runtime.values import from_leaves, is_plain, to_leaves

NUMPY_DTYPES = {dt: numpy_dtype(dt) for dt in NATIVE_DTYPES}


def _array_data_offset() -> int | None:
    """Byte offset of the data pointer in a `PyArrayObject`, checked in this process."""
    probe = np.arange(3, dtype=np.int64)
    offset = 2 * ctypes.sizeof(ctypes.c_void_p)  # right after PyObject_HEAD
    if ctypes.c_void_p.from_address(id(probe) + offset).value != probe.ctypes.data:
        return None
    return offset


DATA_OFFSET = _array_data_offset()
SMALL_CALL_ELEMENTS = 1 << 14
MAX_NATIVE_ARGS = 1024  # ctypes' limit on the parameters of a foreign function


def _never_called(*_: object) -> None:
    """The entry of a function without one: `CompiledFunction.__call__` raises first."""
    raise AssertionError("unreachable")


def tensor_leaves(t: Attribute) -> list[TensorType] | None:
    """Tensor leaves of a tensor / nested-tuple type in order; None for anything else."""
    leaves: list[TensorType] = []
    stack = [t]
    while stack:
        item = stack.pop()
        if isinstance(item, TupleType):
            stack.extend(reversed(item.types))
        elif isinstance(item, TensorType) and item.dt in NUMPY_DTYPES:
            leaves.append(item)
        else:
            return None
    return leaves


def rebuild(t: Attribute, leaves: Iterator[np.ndarray]) -> Any:
    """The value of (nested) tuple type `t` made of `leaves` in order."""
    return nest_leaves(t, leaves, tuple)


class Param:
    """One parameter of a compiled function: position, DLVM name, type, NumPy dtype."""

    __slots__ = ("dtype", "func", "index", "name", "shape", "ttype")

    def __init__(self, func: str, index: int, name: str, ttype: TensorType) -> None:
        self.func, self.index, self.name, self.ttype = func, index, name, ttype
        self.shape = ttype.dims
        self.dtype = NUMPY_DTYPES[ttype.dt]

    def expected(self) -> str:
        return f"argument {self.index} (%{self.name}) of @{self.func}: expected {format_type(self.ttype)}"

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
        """A Python / NumPy scalar converted exactly (no lossy conversion) to the dtype."""
        kind = self.dtype.kind
        ok = False
        if kind == "b":
            ok = isinstance(value, bool | np.bool_) or (
                isinstance(value, numbers.Integral) and int(value) in (0, 1)
            )
        elif kind == "i" and isinstance(value, numbers.Real | np.bool_):
            info = np.iinfo(self.dtype)
            whole = isinstance(value, numbers.Integral | np.bool_) or float(value).is_integer()
            ok = whole and info.min <= int(value) <= info.max
        elif kind == "f":
            ok = isinstance(value, numbers.Real | np.bool_)
        if not ok:
            raise TypeError(f"{self.expected()}, got {type(value).__name__} {value!r}")
        return np.array(value, dtype=self.dtype)


class CompiledFunction:
    """A native function called with NumPy arrays / scalars; returns NumPy arrays.

    A tensor result is an array (0-d for scalars), a tuple result a (nested) tuple of
    arrays, a void result None.
    """

    def __init__(self, name: str, graph_func: Any, jit: JITModule, native: bool = True) -> None:
        self.name = name
        self._jit = jit  # keeps the native code alive
        ftype = graph_func.function_type
        entry = graph_func.body.blocks.first
        args = entry.args if entry is not None else ()
        self.param_names = [getattr(a, "_name", None) or str(i) for i, a in enumerate(args)]
        self._output_type = ftype.output
        self._error = ""
        self._checks: list[tuple[np.dtype, tuple[int, ...], Param]] | None = None
        self._structured = None
        symbols = _symbols_of(graph_func)
        # The fast path takes tensor arguments; tuple arguments go the structured way.
        plain = is_plain(ftype.output) and all(isinstance(t, TensorType) for t in ftype.args)
        try:
            structured = (
                None
                if plain
                else ([leaves(t, symbols) for t in ftype.args], leaves(ftype.output, symbols))
            )
        except LayoutError:
            structured = None
        if (
            structured is not None
            and native
            and all(t.dt in NUMPY_DTYPES for ts in structured[0] for t in ts)
        ):
            self._init_structured(name, ftype, symbols, structured, jit)
            return
        outputs = tensor_leaves(ftype.output)
        if outputs is None or any(
            not isinstance(t, TensorType) or tensor_leaves(t) is None for t in ftype.args
        ):
            signature = (
                f"({', '.join(format_type(t) for t in ftype.args)}) -> {format_type(ftype.output)}"
            )
            self._error = (
                f"@{name} is not callable from Python: its type {signature} is not made of tensors"
            )
            return
        if not native:
            self._error = f"@{name} was not compiled to native code"
            return
        self._params = [
            Param(name, i, n, t)
            for i, (n, t) in enumerate(zip(self.param_names, ftype.args, strict=True))
        ]
        self._outputs = [(t.dims, NUMPY_DTYPES[t.dt]) for t in outputs]
        self._single = not isinstance(ftype.output, TupleType)
        self._checks = [(p.dtype, p.shape, p) for p in self._params]
        self._native = self._entry_point(jit, [*ftype.args, *outputs])

    def _init_structured(self, name, ftype, symbols, structured, jit) -> None:  # noqa: ANN001
        """Structs, enums, pointers...: one Param per leaf (values.py conventions)."""
        arg_leaves, out_leaves = structured
        self._params = [
            Param(name, i, f"{n}[{k}]" if len(ts) > 1 or not isinstance(t, TensorType) else n, leaf)
            for i, (n, t, ts) in enumerate(
                zip(self.param_names, ftype.args, arg_leaves, strict=True)
            )
            for k, leaf in enumerate(ts)
        ]
        self._outputs = [(t.dims, NUMPY_DTYPES[t.dt]) for t in out_leaves]
        self._single = False
        self._checks = [(p.dtype, p.shape, p) for p in self._params]
        self._structured = (list(ftype.args), symbols)
        self._native = self._entry_point(jit, [*(t for ts in arg_leaves for t in ts), *out_leaves])

    def _flatten_args(self, args: tuple[object, ...]) -> list[object]:
        types, symbols = self._structured  # type: ignore[misc]
        if len(args) != len(types):
            names = ", ".join(self.param_names)
            raise TypeError(
                f"{self.name}() takes {len(types)} arguments ({names}), got {len(args)}"
            )
        flat: list[object] = []
        for i, (value, t) in enumerate(zip(args, types, strict=True)):
            what = f"argument {i} (%{self.param_names[i]}) of @{self.name}"
            flat.extend(to_leaves(value, t, symbols, what))
        return flat

    def _entry_point(self, jit: JITModule, buffers: list[TensorType]) -> Callable[..., None]:
        """A cached ctypes callable of the native code (and how to pass an array to it).
        Beyond ctypes' parameter limit the function is not callable from Python (calling
        it raises TypeError); the module still compiles."""
        if len(buffers) > MAX_NATIVE_ARGS:
            self._checks = None
            self._error = (
                f"@{self.name} is not callable from Python: it takes {len(buffers)} buffers "
                f"(arguments and results, flattened), more than ctypes' {MAX_NATIVE_ARGS}"
            )
            return _never_called
        by_object = DATA_OFFSET is not None
        self._pointer: Callable[[np.ndarray], int] = id if by_object else _data_pointer
        # Small calls keep the GIL (releasing and re-taking it costs more than the work).
        small = sum(t.num_elements for t in buffers) <= SMALL_CALL_ELEMENTS
        small = small or self.name in getattr(jit, "keep_gil", ())  # arena: not reentrant
        factory = ctypes.PYFUNCTYPE if small else ctypes.CFUNCTYPE
        prototype = factory(None, *([ctypes.c_void_p] * len(buffers)))
        symbol = f"_dlc_py_{self.name}" if by_object else self.name
        return prototype(jit.address(symbol))

    def __repr__(self) -> str:
        return f"<CompiledFunction @{self.name}({', '.join(self.param_names)})>"

    def __call__(self, *args: object) -> Any:
        checks = self._checks
        if checks is None:
            raise TypeError(self._error)
        if self._structured is not None:
            args = tuple(self._flatten_args(args))
        if len(args) != len(checks):
            names = ", ".join(self.param_names)
            raise TypeError(
                f"{self.name}() takes {len(checks)} arguments ({names}), got {len(args)}"
            )
        pointer = self._pointer
        converted = []  # keeps converted arguments alive during the call
        pointers = []
        i = 0
        for value in args:
            dtype, shape, param = checks[i]
            i += 1
            # fast path: an ndarray of the exact dtype and shape, C-contiguous
            if (
                type(value) is not np.ndarray
                or value.dtype is not dtype
                or value.shape != shape
                or not value.flags.c_contiguous
            ):
                value = param.convert(value)
                converted.append(value)
            pointers.append(pointer(value))
        outputs = [np.empty(shape, dtype) for shape, dtype in self._outputs]
        self._native(*pointers, *map(pointer, outputs))
        status = self._jit.status
        if status is not None and status.value:
            self._jit.raise_status()
        if self._structured is not None:
            return from_leaves(self._output_type, iter(outputs), self._structured[1])
        if self._single:
            return outputs[0]
        if not outputs and not self._output_type.types:
            return None
        return rebuild(self._output_type, iter(outputs))


def _symbols_of(graph_func: Any) -> Any:
    from dlc.dialects.graph import Symbols, enclosing_symbols

    return enclosing_symbols(graph_func) or Symbols()


def _data_pointer(array: np.ndarray) -> int:
    return array.ctypes.data
