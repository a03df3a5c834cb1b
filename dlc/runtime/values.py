"""Python values of structured DLVM types for compiled functions.

- tuple, struct, array: a Python tuple of the element values (struct: fields in
  declaration order);
- enum: a `(case, values)` tuple, e.g. `("some", (np.float32(1.5), 3))`;
- pointer `*T` (argument only): a C-contiguous NumPy array; the function reads and
  writes its data in place (bounds: the array's bytes). A `*T` result is returned as
  the integer tuple (address, lower, upper).
- box and stack values cannot cross the Python boundary.

`to_leaves` flattens a value into the arrays of the native calling convention
(dlc/dialects/layout.py), `from_leaves` rebuilds results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from xdsl.ir import Attribute

from dlc.dialects.abi import ADDRESS_MASK
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    format_type,
)
from dlc.dialects.layout import children, is_indirect, layout, leaves
from dlc.dialects.recursive_types import case_of_tag, enum_tag, zero_case


class _Zero:
    """The zero value of an indirect enum (address 0) inside a converted value."""


ZERO = _Zero()
ZERO_LEAF = np.array(0, np.int64)


def is_plain(t: Attribute) -> bool:
    """Tensors and (nested) tuples of tensors: the original fast calling convention."""
    stack = [t]
    while stack:
        item = stack.pop()
        if isinstance(item, TupleType):
            stack.extend(item.types)
        elif not isinstance(item, TensorType):
            return False
    return True


Hook = Callable[[Any, NominalType], Any]


def to_leaves(
    value: Any, t: Attribute, symbols: Symbols, what: str, box: Hook | None = None
) -> list[Any]:
    """The leaf values (arrays / scalars, checked later per leaf) of `value`; an
    indirect enum's leaf is `box(value, type)` (boxes.py builds it)."""
    out: list[Any] = []
    stack: list[tuple[Any, Attribute]] = [(value, t)]
    while stack:
        v, ty = stack.pop()
        if isinstance(ty, TensorType):
            out.append(v)
        elif is_indirect(ty, symbols):
            if box is None:
                raise TypeError(f"{what}: values of type {format_type(ty)} cannot be passed here")
            out.append(ZERO_LEAF if v is ZERO else box(v, ty))
        elif isinstance(ty, PointerType):
            out.extend(_pointer(v, ty, symbols, what))
        elif isinstance(ty, BoxType | StackType):
            raise TypeError(
                f"{what}: values of type {format_type(ty)} cannot be passed from Python"
            )
        elif isinstance(ty, NominalType) and ty.kind.data == "enum":
            stack.extend(reversed(_enum(v, ty, symbols, what)))
        else:
            kids = children(ty, symbols) or []
            if not isinstance(v, tuple | list) or len(v) != len(kids):
                raise TypeError(
                    f"{what}: expected a tuple of {len(kids)} values for {format_type(ty)}, got {v!r:.60}"
                )
            stack.extend(reversed(list(zip(v, kids, strict=True))))
    return out


def _pointer(v: Any, ty: PointerType, symbols: Symbols, what: str) -> list[np.ndarray]:
    if not isinstance(v, np.ndarray) or not v.flags.c_contiguous or not v.flags.writeable:
        raise TypeError(
            f"{what}: expected a writable C-contiguous NumPy array for {format_type(ty)}"
        )
    pointee = ty.pointee
    dtypes = {leaf.dt for leaf in leaves(pointee, symbols)}
    if len(dtypes) == 1:  # a tensor, array or struct of one data type: that dtype
        from dlc.dialects.graph_types import numpy_dtype

        (dt,) = dtypes
        if v.dtype != numpy_dtype(dt):
            raise TypeError(f"{what}: expected a {dt} array for {format_type(ty)}, got {v.dtype}")
    size = layout(pointee, symbols).size
    if size and v.nbytes % size:
        raise ValueError(
            f"{what}: the array's {v.nbytes} bytes are not a multiple of {format_type(pointee)} ({size} bytes)"
        )
    addr = v.ctypes.data
    return [np.array(x, np.int64) for x in (addr, addr, addr + v.nbytes)]


def _enum(v: Any, ty: NominalType, symbols: Symbols, what: str) -> list[tuple[Any, Attribute]]:
    cases = symbols.enums[ty.ident]
    names = [c for c, _ in cases]
    if not (isinstance(v, tuple) and len(v) == 2 and v[0] in names):
        raise TypeError(
            f"{what}: expected (case, values) with a case of ${ty.ident} {names}, got {v!r:.60}"
        )
    items: list[tuple[Any, Attribute]] = [
        (np.array(enum_tag(ty, v[0], symbols), np.int64), TensorType((), "i64"))
    ]
    for name, types in cases:
        given = tuple(v[1]) if name == v[0] else None
        if given is not None and len(given) != len(types):
            raise TypeError(f"{what}: case ?{name} has {len(types)} values, got {len(given)}")
        for k, et in enumerate(types):
            items.append((given[k] if given is not None else _zero(et, symbols), et))
    return items


def _zero(t: Attribute, symbols: Symbols) -> Any:
    if isinstance(t, TensorType):
        from dlc.dialects.graph_types import numpy_dtype

        return np.zeros(t.dims, numpy_dtype(t.dt))
    if is_indirect(t, symbols):
        return ZERO
    if isinstance(t, NominalType) and t.kind.data == "enum":
        case, types = symbols.enums[t.ident][zero_case(t, symbols)]
        return (case, tuple(_zero(e, symbols) for e in types))
    if isinstance(t, PointerType):
        return np.zeros(0, np.uint8)  # never dereferenced: a zero-size buffer
    return tuple(_zero(k, symbols) for k in children(t, symbols) or [])


def from_leaves(
    t: Attribute, leaves: Iterator[Any], symbols: Symbols, hook: Hook | None = None
) -> Any:
    """The Python value of type `t` made of the result arrays in order (an indirect
    enum's: `hook(type, leaf)`)."""
    if isinstance(t, TensorType):
        return next(leaves)
    if is_indirect(t, symbols):
        assert hook is not None
        return hook(t, next(leaves))
    kids = children(t, symbols) or []
    values = [from_leaves(k, leaves, symbols, hook) for k in kids]  # depth = type nesting
    if isinstance(t, NominalType) and t.kind.data == "enum":
        cases = symbols.enums[t.ident]
        index = case_of_tag(t, int(values[0]), symbols)
        return (cases[index][0], values[1 + index])
    if isinstance(t, PointerType):  # (address, lower, upper) without a heap tag
        return (int(values[0]), *(int(v) & ADDRESS_MASK for v in values[1:]))
    if isinstance(t, BoxType | StackType):
        return tuple(int(v) for v in values)
    if isinstance(t, ArrayType | TupleType | NominalType):
        return tuple(values)
    return tuple(values)
