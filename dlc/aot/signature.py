"""The C signature of an exported DLVM function: which C type each argument takes.

A function is exportable when its parameters are tensors and its result is a tensor,
a (nested) tuple of tensors or void, all of a native data type (`C_TYPES`). Tensor
parameters of rank >= 1 are `const T *` to C-contiguous data; rank-0 parameters
(scalars) are passed by value. Results are `T *` to caller-owned C-contiguous
buffers of the documented shape, one per tensor leaf of the result (tuples
flattened in order). `f16` and `bf16` travel as `uint16_t` (their bits), `bool` as
C's `bool` (one byte, 0 or 1). Anything else (structs, enums, pointers, tuple
parameters, other data types) is a located error naming the parameter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeGuard

from xdsl.ir import Attribute

from dlc.diagnostics import error_at
from dlc.dialects import graph_dims
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_types import TensorType, TupleType, format_type
from dlc.lowering.graph_to_loop.function import function_symbols

C_TYPES = {
    "f16": "uint16_t",
    "f32": "float",
    "f64": "double",
    "bool": "bool",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    "bf16": "uint16_t",
}
"""DLVM data type -> C type of one element."""

LLVM_SCALARS = {
    "f16": "i16",
    "f32": "float",
    "f64": "double",
    "bool": "i1 zeroext",
    "i8": "i8",
    "i16": "i16",
    "i32": "i32",
    "i64": "i64",
    "u8": "i8",
    "u16": "i16",
    "u32": "i32",
    "u64": "i64",
    "bf16": "i16",
}
"""DLVM data type -> the LLVM parameter type of a scalar passed by value (C's ABI)."""

C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class CArg:
    """One C argument: its DLVM name, tensor type, and whether it is a result."""

    name: str
    ttype: TensorType
    output: bool

    @property
    def by_value(self) -> bool:
        """A scalar parameter is passed by value (a result never is)."""
        return not self.output and self.ttype.dims == ()

    def c_declaration(self) -> str:
        """`const float *x`, `float alpha` or `float *result`."""
        ctype = C_TYPES[self.ttype.dt]
        if self.by_value:
            return f"{ctype} {self.name}"
        return f"{'' if self.output else 'const '}{ctype} *{self.name}"

    def describe(self) -> str:
        """`x: f32 [1 x 784]` (`[%n x 784]` with a symbolic dimension) for the header
        comment."""
        dims = " x ".join(str(d) if isinstance(d, int) else f"%{d}" for d in self.ttype.dims)
        return f"{self.name}: {self.ttype.dt} [{dims or 'scalar'}]"


@dataclass(frozen=True)
class CSize:
    """The size of a symbolic dimension, an `int64_t` parameter: its DLVM name (`n` of
    `%n`) and its C name."""

    symbol: str
    name: str


@dataclass(frozen=True)
class CFunction:
    """An exported function: DLVM name, C name, its C arguments (results last) and,
    with symbolic dimensions, their sizes (the C parameters before the arguments, in
    the order the native code takes them: first use in the parameters)."""

    name: str
    c_name: str
    args: tuple[CArg, ...]
    sizes: tuple[CSize, ...] = ()
    sized_call: bool = False  # the native code takes a sizes buffer (a symbolic module's)

    def c_size(self, symbol: str) -> str:
        """The C name of the size of `%symbol`."""
        return next(s.name for s in self.sizes if s.symbol == symbol)

    def c_extent(self, d: int | str) -> str:
        """The C expression of an extent: `4`, `seq`, `(past + 1)` for `%past+1`."""
        if isinstance(d, int):
            return str(d)
        if graph_dims.is_name(d):
            return self.c_size(d)
        terms = [
            " * ".join([*map(self.c_size, names), *([str(k)] if k != 1 or not names else [])])
            for names, k in graph_dims.poly(d).items()
        ]
        return "(" + " + ".join(terms) + ")"

    @property
    def params(self) -> tuple[CArg, ...]:
        return tuple(a for a in self.args if not a.output)

    @property
    def results(self) -> tuple[CArg, ...]:
        return tuple(a for a in self.args if a.output)


def _result_leaves(t: Attribute) -> list[Attribute] | None:
    """The leaves of a tensor / nested-tuple result in order; None if another type."""
    if isinstance(t, TensorType):
        return [t]
    if not isinstance(t, TupleType):
        return None
    leaves: list[Attribute] = []
    for item in t.types:
        inner = _result_leaves(item)
        if inner is None:
            return None
        leaves.extend(inner)
    return leaves


def _exportable(t: Attribute) -> TypeGuard[TensorType]:
    return isinstance(t, TensorType) and t.dt in C_TYPES


def _c_identifier(name: str) -> str:
    """`name` with characters C identifiers cannot hold replaced by `_`."""
    text = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return text if C_IDENTIFIER.fullmatch(text) else f"_{text}"


def _unique(name: str, taken: set[str]) -> str:
    """`name`, or `name_` ... when taken; recorded as taken."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def c_function(func: FuncOp, prefix: str) -> CFunction:
    """The C signature of graph function `func` (a located error if it has none)."""
    name = func.sym_name.data
    ftype = func.function_type
    entry = func.body.blocks.first
    assert entry is not None, "an exported function has a body"
    names = [getattr(a, "_name", None) or f"arg{i}" for i, a in enumerate(entry.args)]
    where = f"@{name} cannot be exported to C"
    params: list[CArg] = []
    taken: set[str] = set()
    for arg_name, t in zip(names, ftype.args, strict=True):
        if not _exportable(t):
            kinds = "plain tensors of f16, bf16, f32, f64, bool, i8-i64 or u8-u64"
            raise error_at(
                func, f"{where}: parameter %{arg_name} has type {format_type(t)} ({kinds} only)"
            )
        params.append(CArg(_c_identifier(arg_name), t, output=False))
    # the sizes first (in the order lower-graph-to-loop takes them), then the buffers
    sizes = tuple(CSize(s, _unique(_c_identifier(s), taken)) for s in function_symbols(ftype))
    params = [CArg(_unique(p.name, taken), p.ttype, output=False) for p in params]
    leaves = _result_leaves(ftype.output)
    tensors = [t for t in leaves or [] if _exportable(t)]
    if leaves is None or len(tensors) != len(leaves):
        raise error_at(
            func,
            f"{where}: its result type {format_type(ftype.output)} is not made of tensors "
            "of f16, bf16, f32, f64, bool, i8-i64 or u8-u64",
        )
    single = len(tensors) == 1 and isinstance(ftype.output, TensorType)
    results = [
        CArg(_unique("result" if single else f"result{i}", taken), t, output=True)
        for i, t in enumerate(tensors)
    ]
    c_name = f"{prefix}_{_c_identifier(name)}"
    return CFunction(name, c_name, (*params, *results), sizes, sized_call=bool(sizes))
