"""The NumPy calling convention of compiled functions: argument checks and the call.

A `CompiledFunction` checks every argument (count, dtype, shape, scalar kind and range)
before native code runs and raises `TypeError` / `ValueError` naming it; the call goes
through a METH_FASTCALL builtin, a ctypes entry that checks arrays natively, or the
general path with conversions, cheapest first. Details: docs/design/abi.md.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from dlc.dialects.abi import (
    BAD_ARGUMENTS,
    FAST_ENTRY_PREFIX,
    PY_ENTRY_PREFIX,
    PY_TYPES,
)
from dlc.dtypes import NATIVE_DTYPES, NUMPY_DTYPES
from dlc.runtime.context import Contexts
from dlc.runtime.fastcall import ARRAY_LAYOUT, DATA_OFFSET, FAST_CALLS, Builtin
from dlc.runtime.jit import JITModule
from dlc.runtime.native import Messages, fill_types
from dlc.runtime.params import Param, new_output
from dlc.runtime.signature import (
    FuncSig,
    TensorSig,
    func_signature,
    rebuild,
    tensor_leaves,
)

SMALL_CALL_ELEMENTS = 1 << 14
MAX_NATIVE_ARGS = 1024  # ctypes' limit on the parameters of a foreign function


def _never_called(*_: object) -> None:
    """The entry of a function without one: `CompiledFunction.__call__` raises first."""
    raise AssertionError("unreachable")


def entry_checks(graph_func: Any) -> list[tuple[tuple[int, ...], int]] | None:
    """What the Python entry of `graph_func` checks natively (`python_entry.Check` per
    parameter), for functions of plain tensor parameters and tensor / tuple results;
    None for others (their arguments go through `values.py` and Python's checks)."""
    sig = func_signature(graph_func)
    if sig is None:
        return None
    return [(t.dims, NATIVE_DTYPES.index(t.dt)) for t in sig.args]


class CompiledFunction:
    """A native function called with NumPy arrays / scalars; returns NumPy arrays.

    A tensor result is an array (0-d for scalars), a tuple result a (nested) tuple of
    arrays, a void result None.
    """

    def __init__(
        self,
        name: str,
        graph_func: Any,
        jit: JITModule,
        contexts: Contexts,
        messages: Messages | None,
        native: bool = True,
        *,
        long: bool = False,
    ) -> None:
        """`contexts` gives the calling thread's call context; `messages` explains a
        status word a failed call leaves (None: the code cannot fail); `long`: the
        function may run unboundedly long (loops of blocks, recursion), so its calls
        release the GIL whatever their size."""
        self._long = long
        self.name = name
        self._jit = jit  # keeps the native code alive
        self._contexts = contexts
        self._messages = messages
        self._error = ""
        self._checks: list[tuple[np.dtype, tuple[int, ...], Param]] | None = None
        self._fast: tuple[Any, ...] | None = None  # (builtin, result shape, result dtype)
        self._checked: tuple[Any, ...] | None = None  # (arity, result shape, result dtype)
        self._structured: tuple[list[Any], Any] | None = None
        self._boxes: Any = None  # runtime.boxes.BoxHeap, made on first use
        sig = graph_func if isinstance(graph_func, FuncSig) else func_signature(graph_func)
        self.signature = sig  # tensors only (None: structs, pointers... or not callable)
        if sig is None:  # structs, enums, pointers... (or nothing callable)
            self._init_other(name, graph_func, jit, native)
            return
        self.param_names = list(sig.params)
        self._output_type: Any = sig.output
        if not native:
            self._error = f"@{name} was not compiled to native code"
            return
        outputs = tensor_leaves(sig.output)
        self._params = [Param(name, i, n, t) for i, (n, t) in enumerate(zip(sig.params, sig.args))]
        self._outputs = [(t.dims, NUMPY_DTYPES[t.dt]) for t in outputs]
        self._single = isinstance(sig.output, TensorSig)
        self._checks = [(p.dtype, p.shape, p) for p in self._params]
        self._native = self._entry_point(jit, [*sig.args, *outputs])
        checked = jit.global_address(PY_TYPES) is not None  # the entries check natively
        if self._single and self._checks is not None and ARRAY_LAYOUT is not None and checked:
            self._checked = (len(self._params), *self._outputs[0])
            fast = jit.address_or_none(FAST_ENTRY_PREFIX + name)
            if fast is not None and self._small and FAST_CALLS:
                self._builtin = Builtin(fast, name)
                self._fast = (self._builtin.function, *self._outputs[0])

    def _init_other(self, name: str, graph_func: Any, jit: JITModule, native: bool) -> None:
        """A graph function beyond tensors: structs, enums, pointers... as one Param per
        leaf (values.py conventions), or the reason it cannot be called."""
        from dlc.dialects.graph_types import TensorType, format_type
        from dlc.dialects.layout import LayoutError, leaves
        from dlc.runtime.values import is_plain

        ftype = graph_func.function_type
        entry = graph_func.body.blocks.first
        args = entry.args if entry is not None else ()
        self.param_names = [getattr(a, "_name", None) or str(i) for i, a in enumerate(args)]
        self._output_type = ftype.output
        symbols = _symbols_of(graph_func)
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
            structured is None
            or not native
            or not all(t.dt in NATIVE_DTYPES for ts in structured[0] for t in ts)
        ):
            signature = (
                f"({', '.join(format_type(t) for t in ftype.args)}) -> {format_type(ftype.output)}"
            )
            self._error = (
                f"@{name} is not callable from Python: its type {signature} is not made of tensors"
            )
            return
        arg_leaves, out_leaves = structured
        self._params = [
            Param(
                name,
                i,
                f"{n}[{k}]" if len(ts) > 1 or not isinstance(t, TensorType) else n,
                TensorSig(leaf.dt, tuple(leaf.dims)),
            )
            for i, (n, t, ts) in enumerate(
                zip(self.param_names, ftype.args, arg_leaves, strict=True)
            )
            for k, leaf in enumerate(ts)
        ]
        self._outputs = [(tuple(t.dims), NUMPY_DTYPES[t.dt]) for t in out_leaves]
        self._single = False
        self._checks = [(p.dtype, p.shape, p) for p in self._params]
        self._structured = (list(ftype.args), symbols)
        buffers = [*(p.ttype for p in self._params)]
        buffers += [TensorSig(t.dt, tuple(t.dims)) for t in out_leaves]
        self._native = self._entry_point(jit, buffers)

    def _flatten_args(self, args: tuple[object, ...], lent: list[int]) -> list[object]:
        """The leaves of `args`; recursive enum values are built as boxes, whose
        addresses `lent` collects (released after the call)."""
        from dlc.runtime.values import to_leaves

        assert self._structured is not None, "only a structured entry flattens its arguments"
        types, symbols = self._structured
        if len(args) != len(types):
            names = ", ".join(self.param_names)
            raise TypeError(
                f"{self.name}() takes {len(types)} arguments ({names}), got {len(args)}"
            )
        flat: list[object] = []
        for i, (value, t) in enumerate(zip(args, types, strict=True)):
            what = f"argument {i} (%{self.param_names[i]}) of @{self.name}"
            flat.extend(to_leaves(value, t, symbols, what, self._heap().lender(what, lent)))
        return flat

    def _heap(self) -> Any:
        """The module's `runtime.boxes.BoxHeap` (recursive enum values)."""
        if self._boxes is None:
            from dlc.runtime.boxes import heap_of

            assert self._structured is not None, "only a structured entry has boxes"
            self._boxes = heap_of(self._jit, self._structured[1])
        return self._boxes

    def _entry_point(self, jit: JITModule, buffers: list[TensorSig]) -> Callable[..., None]:
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
        if any(t.dt == "bf16" for t in buffers):
            NUMPY_DTYPES["bf16"]  # loads ml_dtypes, then its slot of the entries' type table:
            fill_types(jit)
        by_object = DATA_OFFSET is not None
        self._pointer: Callable[[np.ndarray], int] = id if by_object else _data_pointer
        # Small calls keep the GIL (releasing and re-taking it costs more than the work),
        # unless they may run long: other threads then keep running.
        small = sum(t.num_elements for t in buffers) <= SMALL_CALL_ELEMENTS and not self._long
        self._small = small
        factory = ctypes.PYFUNCTYPE if small else ctypes.CFUNCTYPE
        prototype = factory(ctypes.c_int64, *([ctypes.c_void_p] * (1 + len(buffers))))
        return prototype(jit.address(PY_ENTRY_PREFIX + self.name))

    def __repr__(self) -> str:
        return f"<CompiledFunction @{self.name}({', '.join(self.param_names)})>"

    def _bind(self, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[object, ...]:
        """Positional and keyword arguments in parameter order, by Python's rules."""
        names = self.param_names
        if len(args) > len(names):
            raise TypeError(
                f"{self.name}() takes {len(names)} arguments ({', '.join(names)}), got {len(args)}"
            )
        bound: list[object] = [*args, *[_MISSING] * (len(names) - len(args))]
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(
                    f"{self.name}() got an unexpected keyword argument '{key}' "
                    f"(parameters: {', '.join(names)})"
                )
            index = names.index(key)
            if bound[index] is not _MISSING:
                raise TypeError(f"{self.name}() got multiple values for argument '{key}'")
            bound[index] = value
        missing = [f"'{n}'" for n, v in zip(names, bound, strict=True) if v is _MISSING]
        if missing:
            arguments = "argument" if len(missing) == 1 else "arguments"
            raise TypeError(
                f"{self.name}() missing {len(missing)} {arguments}: {', '.join(missing)}"
            )
        return tuple(bound)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        # The common call: the entry checks natively that the arguments are arrays of
        # exactly the parameters' dtypes and shapes, C-contiguous (python_entry.py); when
        # one is not, nothing ran and the general path below takes over.
        fast = self._fast
        if fast is not None and not kwargs:  # a builtin function (fastcall.py)
            ctx = self._contexts.current or self._contexts.get()
            output = new_output(fast[1], fast[2])
            if fast[0](ctx.words, *args, output) is output:
                return output
            if ctx.status.value > 0:
                self._raise_for(ctx)
            return self._call(args, kwargs)
        checked = self._checked
        if checked is not None and not kwargs and len(args) == checked[0]:  # through ctypes
            output = new_output(checked[1], checked[2])
            ctx = self._contexts.current or self._contexts.get()
            status = self._native(ctx.address, *map(id, args), id(output))
            if not status:
                return output
            if status != BAD_ARGUMENTS:
                self._raise_for(ctx)
        return self._call(args, kwargs)

    def _raise_for(self, ctx: Any) -> None:
        if self._messages is None:  # only code that can fail sets the status word
            ctx.reset()
            raise AssertionError(f"@{self.name}: status word set by code that cannot fail")
        self._messages.raise_for(ctx)

    def _call(self, args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
        """Any call: keyword arguments, scalars, conversions, tuple and struct values."""
        checks = self._checks
        if checks is None:
            raise TypeError(self._error)
        if kwargs:  # the positional fast path stays as it is
            args = self._bind(args, kwargs)
        lent: list[int] = []
        try:
            return self._call_flat(args, lent)
        finally:
            for box in lent:
                self._heap().release(box)

    def _call_flat(self, args: tuple[object, ...], lent: list[int]) -> Any:
        checks = self._checks
        assert checks is not None
        if self._structured is not None:
            args = tuple(self._flatten_args(args, lent))
        if len(args) != len(checks):
            names = ", ".join(self.param_names)
            raise TypeError(
                f"{self.name}() takes {len(checks)} arguments ({names}), got {len(args)}"
            )
        pointer = self._pointer
        converted = []  # keeps converted arguments alive during the call
        pointers = []
        for value, (dtype, shape, param) in zip(args, checks):
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
        outputs = []
        for shape, dtype in self._outputs:
            output = new_output(shape, dtype)
            outputs.append(output)
            pointers.append(pointer(output))
        ctx = self._contexts.current or self._contexts.get()
        status = self._native(ctx.address, *pointers)
        if status == BAD_ARGUMENTS:  # Python's checks above are the entry's: unreachable
            raise AssertionError(f"@{self.name}: arguments refused by the native entry")
        if status:
            self._raise_for(ctx)
        if self._structured is not None:
            from dlc.runtime.values import from_leaves

            symbols, take = self._structured[1], self._heap().take
            return from_leaves(self._output_type, iter(outputs), symbols, take)
        if self._single:
            return outputs[0]
        if not outputs and not self._output_type.types:
            return None
        return rebuild(self._output_type, iter(outputs))


_MISSING = object()
"""A parameter no argument was bound to (`CompiledFunction._bind`)."""


def _symbols_of(graph_func: Any) -> Any:
    from dlc.dialects.graph import Symbols, enclosing_symbols

    return enclosing_symbols(graph_func) or Symbols()


def _data_pointer(array: np.ndarray) -> int:
    return array.ctypes.data
