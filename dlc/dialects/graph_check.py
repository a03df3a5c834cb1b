"""Literal checking (docs/reference/language.md), with dlc's fixes.

Differences from DLVM: `null` is valid for pointers and boxes; integer literals must
fit their data type (signed or unsigned range of the width); a finite literal of a float
type must not round to infinity in it (`1e39: f32`, `70000: f16`: C and LLVM would round
it to inf, dlc reports it; write `inf` for infinity); enum literals must give exactly
the case's number of values; a dense literal (dlc's addition) must hold exactly its
type's bytes. The walk is iterative: literals may nest deeply.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from xdsl.ir import Attribute

from dlc.dialects.graph_literal import LitTree
from dlc.dialects.graph_types import (
    NATIVE_DTYPES,
    ArrayType,
    BoxType,
    NominalType,
    PointerType,
    TensorType,
    TupleType,
    dtype_bits,
    dtype_bytes,
    dtype_holds_floats,
    dtype_is_bool,
    dtype_is_int,
    dtype_is_unsigned,
    format_type,
    numpy_dtype,
)

if TYPE_CHECKING:
    from dlc.dialects.graph_module import Symbols


def check_literal(
    tree: LitTree,
    t: Attribute,
    operand_types: Sequence[Attribute],
    symbols: Symbols | None = None,
) -> str | None:
    """Why literal `tree` is not a valid value of type `t`, or None when it is."""
    work: list[tuple[LitTree, Attribute]] = [(tree, t)]
    while work:
        node, ty = work.pop()
        message = _check_node(node, ty, operand_types, symbols, work)
        if message is not None:
            return message
    return None


def _check_node(
    node: LitTree,
    ty: Attribute,
    operand_types: Sequence[Attribute],
    symbols: Symbols | None,
    work: list[tuple[LitTree, Attribute]],
) -> str | None:
    kind = node[0]
    bad = f"literal is not a valid value of type {format_type(ty)}"
    if kind == "undefined":
        return None
    if kind == "zero":
        return None if isinstance(ty, TensorType) else bad
    if kind == "null":
        return None if isinstance(ty, PointerType | BoxType) else bad
    if kind == "operand":
        if not 0 <= node[1] < len(operand_types):
            count = len(operand_types)
            return f"literal element refers to operand {node[1]}, but the literal has {count}"
        got = operand_types[node[1]]
        if got != ty:
            return f"literal element of type {format_type(got)} where {format_type(ty)} is expected"
        return None
    if kind in ("int", "float", "bool"):
        return _check_scalar(kind, node[1], ty)
    if kind == "dense":
        return _check_dense(node[1], ty)
    if kind == "tensor":
        if isinstance(ty, TensorType) and _valid_dense(node, ty):
            return None  # the common case, checked in bulk; else element by element
        elems = node[1]
        if not isinstance(ty, TensorType) or ty.rank == 0 or ty.dims[0] != len(elems):
            return bad
        work.extend((e, ty.with_shape(ty.dims[1:])) for e in elems)
        return None
    if kind == "tuple":
        if not isinstance(ty, TupleType) or len(ty.types) != len(node[1]):
            return bad
        work.extend(zip(node[1], ty.types))
        return None
    if kind == "array":
        if not isinstance(ty, ArrayType) or ty.count.data != len(node[1]):
            return bad
        work.extend((e, ty.element) for e in node[1])
        return None
    if kind == "struct":
        return _check_struct(node, ty, symbols, work)
    if kind == "enum":
        return _check_enum(node, ty, symbols, work)
    return f"unknown literal kind {kind}"


def _valid_dense(node: LitTree, ty: TensorType) -> bool:
    """Whether `node` is a dense tensor of scalars that are all valid `ty.dt` values
    (shape and values checked level by level and in bulk: an imported weight has
    millions of elements). False means "not shown valid": the element-by-element
    walk then decides and finds the message."""
    level: list[LitTree] = [node]
    for n in ty.dims:
        next_level: list[LitTree] = []
        for sub in level:
            if sub[0] != "tensor" or len(sub[1]) != n:
                return False
            next_level.extend(sub[1])
        level = next_level
    kinds = {leaf[0] for leaf in level}
    if dtype_is_bool(ty.dt):
        return kinds <= {"bool"}
    if dtype_holds_floats(ty.dt):
        if not kinds <= {"int", "float"}:
            return False
        try:
            values = np.array([leaf[1] for leaf in level], np.float64)
        except OverflowError:
            return False
        with np.errstate(over="ignore"):
            rounded = values.astype(numpy_dtype(ty.dt))
        return not bool(np.any(np.isinf(rounded) & np.isfinite(values)))
    if not kinds <= {"int"} or not dtype_is_int(ty.dt) or not level:
        return kinds <= {"int"} and dtype_is_int(ty.dt)
    ints = [leaf[1] for leaf in level]
    bits = dtype_bits(ty.dt)
    lowest = 0 if dtype_is_unsigned(ty.dt) else -(2 ** (bits - 1))  # as `_check_scalar`
    return lowest <= min(ints) and max(ints) < 2**bits


def _check_dense(data: bytes, ty: Attribute) -> str | None:
    """A dense node: a tensor of a native data type, its bytes exactly the elements (a
    bool byte 0 or 1); checked in bulk."""
    if not isinstance(ty, TensorType):
        return f"dense literal is not a valid value of type {format_type(ty)}"
    if ty.dt not in NATIVE_DTYPES:
        return f"dense literal of {ty.dt} is not supported (only of {', '.join(NATIVE_DTYPES)})"
    need = ty.num_elements * dtype_bytes(ty.dt)
    if len(data) != need:
        return f"dense literal has {len(data)} bytes, {format_type(ty)} takes {need}"
    if dtype_is_bool(ty.dt) and np.frombuffer(data, np.uint8).max(initial=0) > 1:
        return "dense bool literal holds a byte other than 0 and 1"
    return None


def _check_scalar(kind: str, value: object, ty: Attribute) -> str | None:
    if not isinstance(ty, TensorType):
        return f"scalar literal is not a valid value of type {format_type(ty)}"
    if dtype_is_bool(ty.dt):
        return None if kind == "bool" else f"{kind} literal is not a valid {ty.dt} value"
    if dtype_holds_floats(ty.dt):
        if kind not in ("int", "float"):
            return f"{kind} literal is not a valid {ty.dt} value"
        assert isinstance(value, int | float)
        if overflows_float(value, ty.dt):
            what = "integer" if kind == "int" else "float"
            return f"{what} literal {value!r} is out of range for {ty.dt}"
        return None
    if kind != "int":
        return f"{kind} literal is not a valid {ty.dt} value"
    assert isinstance(value, int) and dtype_is_int(ty.dt)
    bits = dtype_bits(ty.dt)
    lowest = 0 if dtype_is_unsigned(ty.dt) else -(2 ** (bits - 1))
    if not lowest <= value < 2**bits:
        return f"integer literal {value} does not fit in {ty.dt}"
    return None


def overflows_float(value: int | float, dtype: str) -> bool:
    """`value` is finite but rounds to ±inf in float `dtype` (IEEE round to nearest)."""
    try:
        x = float(value)
    except OverflowError:  # an int beyond f64's range
        return True
    if not math.isfinite(x):
        return False
    with np.errstate(over="ignore"):
        return bool(np.isinf(np.asarray(x, dtype=numpy_dtype(dtype))))


def _check_struct(
    node: LitTree, ty: Attribute, symbols: Symbols | None, work: list[tuple[LitTree, Attribute]]
) -> str | None:
    if not (isinstance(ty, NominalType) and ty.kind.data == "struct"):
        return f"struct literal is not a valid value of type {format_type(ty)}"
    if symbols is None:
        return None
    fields = symbols.structs.get(ty.ident)
    names = [name for name, _ in node[1]]
    if fields is None or names != [name for name, _ in fields]:
        return f"struct literal fields {', '.join('#' + n for n in names)} do not match ${ty.ident}"
    work.extend((value, ft) for (_, value), (_, ft) in zip(node[1], fields))
    return None


def _check_enum(
    node: LitTree, ty: Attribute, symbols: Symbols | None, work: list[tuple[LitTree, Attribute]]
) -> str | None:
    if not (isinstance(ty, NominalType) and ty.kind.data == "enum"):
        return f"enum literal is not a valid value of type {format_type(ty)}"
    if symbols is None:
        return None
    cases = dict(symbols.enums.get(ty.ident, []))
    case, values = node[1], node[2]
    if case not in cases:
        return f"enum ${ty.ident} has no case ?{case}"
    if len(cases[case]) != len(values):
        return f"enum case ?{case} takes {len(cases[case])} values, got {len(values)}"
    work.extend(zip(values, cases[case]))
    return None
