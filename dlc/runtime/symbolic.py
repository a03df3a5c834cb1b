"""Calling functions with symbolic dimensions: the sizes come from the arguments.

`SymbolicFunction` checks each argument (count, data type, rank, every static extent),
binds each symbolic dimension `%n` to the extent of its first parameter that has it and
checks every other use against that, and a parameter's dimension expression (`%past+1`)
against its value: a mismatch is a `ShapeError` located at the function, naming the
dimension, the parameters and the sizes. Nothing native
runs before the checks pass. The native function (`lower-graph-to-loop`) takes the
buffers, then the sizes (`int64`, in `Signature.symbols` order), then the outputs (one,
or one per element of a tuple result, returned as a tuple), whose shapes are computed
here from the bound sizes (a dimension `%past+1` evaluated). Buffers sized at run time take the call
context's arena when they fit (the heap otherwise); the arena grows after a call to
what the call wanted, so repeated calls at a size allocate nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlc.diagnostics import DiagnosticError, Location, get_loc
from dlc.dialects import graph_dims
from dlc.dialects.abi import CTX_ARENA_TOP, function_symbol
from dlc.dialects.graph_types import TupleType
from dlc.dtypes import NUMPY_DTYPES
from dlc.runtime.context import Contexts
from dlc.runtime.fastcall import array_address
from dlc.runtime.jit import JITModule
from dlc.runtime.module import CompiledModule
from dlc.runtime.native import Messages

Dims = tuple[int | str, ...]


class ShapeError(DiagnosticError, ValueError):
    """Arguments whose sizes disagree where the program says they are equal."""


@dataclass(frozen=True)
class Signature:
    """A function of tensor parameters (`params`: DLVM names without `%`, `args`:
    (dtype, dims)) returning the tensors `outputs` (a tuple of them when `is_tuple`);
    `symbols` in the order the native code takes their sizes; `location` is the
    function's, for `ShapeError`."""

    name: str
    params: tuple[str, ...]
    args: tuple[tuple[str, Dims], ...]
    outputs: tuple[tuple[str, Dims], ...]
    symbols: tuple[str, ...]
    location: Location | None
    is_tuple: bool = False


def _dims_text(dims: Dims) -> str:
    return " x ".join(graph_dims.text(d) for d in dims)


class SymbolicFunction:
    """A compiled function whose loops run to sizes taken from its arguments."""

    def __init__(self, sig: Signature, jit: JITModule, contexts: Any, messages: Any) -> None:
        self.name = sig.name
        self.sig = sig
        self._jit = jit  # the machine code lives as long as the function is referenced
        address = jit.address(function_symbol(sig.name))
        n = len(sig.args) + 1 + len(sig.outputs)
        self._native = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (n + 1)))(address)
        self._contexts = contexts
        self._messages = messages
        self.sizes_called: set[tuple[int, ...]] = set()
        # per parameter: its dtype, rank and (axis, extent) of every static dimension
        self._checks = [
            (
                np.dtype(NUMPY_DTYPES[dt]),
                len(dims),
                [(a, d) for a, d in enumerate(dims) if isinstance(d, int)],
            )
            for dt, dims in sig.args
        ]
        self._outputs = [(np.dtype(NUMPY_DTYPES[dt]), dims) for dt, dims in sig.outputs]
        # every use of a symbolic dimension: (parameter, axis, name), in parameter order;
        # a sum (`%past+1`) is checked against its value once the names are bound
        uses = [
            (i, axis, d)
            for i, (_, dims) in enumerate(sig.args)
            for axis, d in enumerate(dims)
            if isinstance(d, str)
        ]
        self._uses = [u for u in uses if graph_dims.is_name(u[2])]
        self._derived = [u for u in uses if not graph_dims.is_name(u[2])]

    def __repr__(self) -> str:
        return f"<dlc symbolic function @{self.name}>"

    def _array(self, i: int, value: object) -> np.ndarray:
        dtype, rank, static = self._checks[i]
        if (  # fast path: an ndarray of the exact dtype and rank, C-contiguous
            type(value) is np.ndarray
            and value.dtype is dtype
            and value.ndim == rank
            and value.flags.c_contiguous
        ):
            shape = value.shape
            for a, d in static:
                if shape[a] != d:
                    return self._converted(i, value)  # its error names the dimension
            return value
        return self._converted(i, value)

    def _converted(self, i: int, value: object) -> np.ndarray:
        """Argument `i` converted to its parameter's dtype, or the error naming it."""
        dt, dims = self.sig.args[i]
        param = self.sig.params[i]
        array = np.asarray(value)
        dtype = NUMPY_DTYPES[dt]
        if array.dtype != dtype:
            if not np.can_cast(array.dtype, dtype, casting="same_kind"):
                raise TypeError(
                    f"{self.name}(): argument %{param}: expected {dt}, got {array.dtype}"
                )
            array = array.astype(dtype)
        if array.ndim != len(dims):
            raise ValueError(
                f"{self.name}(): argument %{param}: expected rank {len(dims)} "
                f"(<{_dims_text(dims)}>), got shape {array.shape}"
            )
        for axis, (want, got) in enumerate(zip(dims, array.shape, strict=True)):
            if isinstance(want, int) and want != got:
                raise ValueError(
                    f"{self.name}(): argument %{param}: dimension {axis} is {got}, expected {want}"
                )
        return np.ascontiguousarray(array)

    def bind(self, arrays: list[np.ndarray]) -> dict[str, int]:
        """The size of each symbolic dimension; `ShapeError` where two uses differ."""
        sizes: dict[str, int] = {}
        for i, axis, d in self._uses:
            got = arrays[i].shape[axis]
            known = sizes.setdefault(d, got)
            if known != got:
                raise self._mismatch(d, known, got, (i, axis))
        for i, axis, d in self._derived:
            want, got = graph_dims.evaluate(d, sizes), arrays[i].shape[axis]
            if want != got:
                raise self._derived_mismatch(d, sizes, got, (i, axis))
        return sizes

    def _derived_mismatch(
        self, d: str, sizes: dict[str, int], got: int, place: tuple[int, int]
    ) -> ShapeError:
        """The error of dimension expression `d` (the names bound to `sizes`), `got` at
        `place` (parameter, axis)."""
        names = ", ".join(f"%{n} = {sizes[n]}" for n in graph_dims.names(d))
        i, axis = place
        return ShapeError(
            f"@{self.name}: symbolic dimension {graph_dims.text(d)} is "
            f"{graph_dims.evaluate(d, sizes)} ({names}) but {got} in "
            f"%{self.sig.params[i]} (dimension {axis})",
            self.sig.location,
        )

    def _mismatch(self, d: str, known: int, got: int, place: tuple[int, int]) -> ShapeError:
        """The error of symbolic dimension `d`, first `known`, `got` at `place`
        (parameter, axis)."""
        where, at = next((self.sig.params[j], a) for j, a, name in self._uses if name == d)
        i, axis = place
        return ShapeError(
            f"@{self.name}: symbolic dimension %{d} is {known} in %{where} "
            f"(dimension {at}) but {got} in %{self.sig.params[i]} (dimension {axis})",
            self.sig.location,
        )

    def __call__(self, *args: object) -> Any:
        if len(args) != len(self.sig.args):
            names = ", ".join(f"%{p}" for p in self.sig.params)
            raise TypeError(
                f"{self.name}() takes {len(self.sig.args)} arguments ({names}), got {len(args)}"
            )
        arrays = [self._array(i, a) for i, a in enumerate(args)]
        sizes = self.bind(arrays)
        values = np.array([sizes[s] for s in self.sig.symbols] or [0], np.int64)
        outputs = [
            np.empty(tuple(graph_dims.evaluate(d, sizes) for d in dims), dtype)
            for dtype, dims in self._outputs
        ]
        self.sizes_called.add(tuple(sizes[s] for s in self.sig.symbols))
        ctx = self._contexts.current or self._contexts.get()
        ctx.reset()
        self._native(ctx.address, *map(array_address, (*arrays, values, *outputs)))
        wanted = int(ctx.words[CTX_ARENA_TOP]) - ctx.arena_base
        if ctx.status.value:  # before fit_arena, which resets the status word
            if self._messages is None:
                ctx.reset()
                raise AssertionError(f"@{self.name}: status word set by code that cannot fail")
            self._messages.raise_for(ctx)
        ctx.fit_arena(wanted)
        return tuple(outputs) if self.sig.is_tuple else outputs[0]


class SymbolicModule(CompiledModule):
    """A `CompiledModule` of functions with symbolic dimensions: one native compile
    for every size. `stats(f)` adds `compiles` (the LLVM compiles the module took,
    counted by `jit.NATIVE_COMPILES` around its compile: calls never add one) and
    `sizes_called` (how many distinct sizes the function has run at)."""

    def __init__(
        self,
        jit: JITModule,
        sigs: list[Signature],
        report: Any,
        messages: list[str] | None,
        levels: Any,
        threads: int,
        compiles: int,
    ) -> None:
        super().__init__(jit, {}, set(), report, messages, levels, threads)
        self._compiles = compiles
        contexts = Contexts(report[2], threads)
        status = Messages(messages) if messages else None
        functions: dict[str, Any] = {  # called like CompiledFunction
            s.name: SymbolicFunction(s, jit, contexts, status) for s in sigs
        }
        self._functions = functions

    def stats(self, name: str) -> dict[str, int]:
        facts = super().stats(name)
        function = self._functions[name]
        assert isinstance(function, SymbolicFunction)
        return {**facts, "compiles": self._compiles, "sizes_called": len(function.sizes_called)}


def signatures(funcs: dict[str, Any], symbols: Callable[[Any], list[str]]) -> list[Signature]:
    """The call signatures of graph functions `funcs` (by name); `symbols` gives the
    order of a function type's symbolic dimensions (`function_symbols`)."""
    return [
        Signature(
            name,
            tuple(a.name_hint or f"{i}" for i, a in enumerate(f.body.blocks[0].args)),
            tuple((t.dt, t.dims) for t in f.function_type.args),
            tuple((t.dt, t.dims) for t in result_types(f.function_type.output)),
            tuple(symbols(f.function_type)),
            get_loc(f),
            isinstance(f.function_type.output, TupleType),
        )
        for name, f in funcs.items()
    ]


def result_types(output: Any) -> tuple[Any, ...]:
    """The tensor types a function returns: its result, or the elements of a tuple."""
    return tuple(output.types) if isinstance(output, TupleType) else (output,)
