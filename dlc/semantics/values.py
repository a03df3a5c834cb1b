"""Runtime values of the reference interpreter and the walks that build and index them.

| DLVM type           | Python value                                              |
|---------------------|-----------------------------------------------------------|
| tensor (rank 0 too) | `np.ndarray` of the mapped dtype (rank 0: a 0-d array)    |
| tuple, `[n x T]`    | `tuple` of element values (void is `()`)                  |
| struct `$S`         | `tuple` of field values in declaration order              |
| enum `$E`           | `(case_name, tuple_of_values)`                            |
| `*T`                | `Pointer` (or `None` for `null`)                          |
| `box{T}`            | `Box`                                                     |
| `stack`             | `list` (the top is the last element)                      |
| function            | `FunctionRef`                                             |

Values are immutable: no op mutates an array or tuple in place, so sharing is safe.
Memory (stack/heap/box/var cells) lives in `Buffer`s; a `Pointer` addresses one cell
plus a path of element keys into that cell's value.

All tree walks here are iterative (`fold_tree`), so deeply nested literals, types and
values need no Python recursion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeGuard, TypeVar

import numpy as np
from xdsl.ir import Attribute

from dlc.diagnostics import DiagnosticError
from dlc.dialects import graph_types
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_literal import LitTree, dense_array
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    format_type,
)
from dlc.dialects.recursive_types import zero_case


class UndefinedBehaviorError(RuntimeError):
    """The program did something DLVM leaves undefined (use after free, pop of an empty
    stack, a `branchEnum` without the value's case, an out-of-range index, ...)."""


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a DLVM data type (`graph_types.numpy_dtype`: `iN` uses the
    narrowest numpy width >= N, so arithmetic wraps at that width, not at N); wider
    than 64 bits is a diagnostic."""
    try:
        return graph_types.numpy_dtype(dtype)
    except ValueError:
        raise DiagnosticError(
            f"reference interpreter: {dtype} data type is not supported"
        ) from None


@dataclass(frozen=True)
class FunctionRef:
    """A function used as a value (`@f: (T) -> R`)."""

    name: str


@dataclass(eq=False)
class Buffer:
    """A block of memory cells, each holding one value of `elem_type`."""

    cells: list[object]
    elem_type: Attribute
    kind: str  # "stack", "heap", "box" or "var"
    freed: bool = False


@dataclass(frozen=True)
class Pointer:
    """Address of cell `offset` of `buffer`, then `path` element keys into its value;
    `elem_type` is the pointee type."""

    buffer: Buffer
    offset: int
    elem_type: Attribute
    path: tuple[int | str, ...] = ()

    def advanced(self, count: int) -> Pointer:
        """The pointer `count` elements further (the last index key moves, else the cell)."""
        if not self.path:
            return Pointer(self.buffer, self.offset + count, self.elem_type)
        last = self.path[-1]
        if not isinstance(last, int):
            raise UndefinedBehaviorError("pointer arithmetic on a struct field pointer")
        return Pointer(self.buffer, self.offset, self.elem_type, (*self.path[:-1], last + count))


@dataclass(eq=False)
class Box:
    """A reference-counted box: one cell and a count (starts at 1, freed at 0)."""

    buffer: Buffer
    elem_type: Attribute
    refcount: int = 1


N = TypeVar("N")
R = TypeVar("R")

MAX_TREE_NODES = 10_000_000


def fold_tree(
    root: N, children: Callable[[N], Sequence[N]], combine: Callable[[N, list[R]], R]
) -> R:
    """Post-order fold without recursion: combine(node, [results of its children])."""
    results: list[R] = []
    work: list[tuple[N, int]] = [(root, -1)]
    visited = 0
    while work:
        node, count = work.pop()
        if count >= 0:
            start = len(results) - count
            args = results[start:]
            del results[start:]
            results.append(combine(node, args))
            continue
        visited += 1
        if visited > MAX_TREE_NODES:
            raise DiagnosticError(
                "reference interpreter: value tree is too large (recursive type?)"
            )
        kids = children(node)
        work.append((node, len(kids)))
        work.extend((k, -1) for k in reversed(kids))
    return results[0]


def wrap_int(value: int, dtype: np.dtype) -> int:
    """Two's-complement wrap of a Python int into `dtype` (literals may use the unsigned range)."""
    bits = dtype.itemsize * 8
    return (value + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)


def splat(value: object, t: TensorType) -> np.ndarray:
    dtype = numpy_dtype(t.dt)
    if isinstance(value, int) and not isinstance(value, bool) and dtype.kind == "i":
        value = wrap_int(value, dtype)
    return np.full(t.dims, value, dtype=dtype)


# ---------------------------------------------------------------------------
# Types: struct fields, enum cases, zero values
# ---------------------------------------------------------------------------


def struct_fields(t: NominalType, symbols: Symbols) -> list[tuple[str, Attribute]]:
    fields = symbols.structs.get(t.ident)
    if fields is None:
        raise DiagnosticError(f"reference interpreter: unknown struct ${t.ident}")
    return fields


def enum_cases(t: NominalType, symbols: Symbols) -> list[tuple[str, tuple[Attribute, ...]]]:
    cases = symbols.enums.get(t.ident)
    if cases is None:
        raise DiagnosticError(f"reference interpreter: unknown enum ${t.ident}")
    return cases


def _zero_enum_case(t: NominalType, symbols: Symbols) -> tuple[str, tuple[Attribute, ...]]:
    """An enum's zero is its first case without values, else its first case whose
    values have finite zeros (dlc/dialects/recursive_types.py)."""
    cases = enum_cases(t, symbols)
    if not cases:
        raise DiagnosticError(f"reference interpreter: enum ${t.ident} has no cases")
    return cases[zero_case(t, symbols)]


def zero_value(t: Attribute, symbols: Symbols) -> object:
    """The value of `undefined`, of fresh allocations and of vars: zeros everywhere,
    `null` pointers, empty stacks, an enum's first value-less case."""

    def children(ty: Attribute) -> Sequence[Attribute]:
        if isinstance(ty, TupleType):
            return ty.types
        if isinstance(ty, ArrayType):
            return [ty.element] * ty.count.data
        if isinstance(ty, NominalType) and ty.kind.data == "struct":
            return [ft for _, ft in struct_fields(ty, symbols)]
        if isinstance(ty, NominalType) and ty.kind.data == "enum":
            return _zero_enum_case(ty, symbols)[1]
        return ()

    def combine(ty: Attribute, kids: list[object]) -> object:
        if isinstance(ty, TensorType):
            return np.zeros(ty.dims, dtype=numpy_dtype(ty.dt))
        if isinstance(ty, NominalType) and ty.kind.data == "enum":
            return (_zero_enum_case(ty, symbols)[0], tuple(kids))
        if isinstance(ty, TupleType | ArrayType | NominalType):
            return tuple(kids)
        if isinstance(ty, StackType):
            return []
        if isinstance(ty, PointerType | BoxType | FunctionType):
            return None
        raise DiagnosticError(f"reference interpreter: no zero value of type {format_type(ty)}")

    return fold_tree(t, children, combine)


# ---------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------


def build_literal(
    tree: LitTree, t: Attribute, operands: Sequence[object], symbols: Symbols
) -> object:
    """The value of `literal TREE: T`, with `("operand", k)` taken from `operands`."""

    def children(node: tuple[LitTree, Attribute]) -> Sequence[tuple[LitTree, Attribute]]:
        lit, ty = node
        kind = lit[0]
        if kind == "tensor":
            assert isinstance(ty, TensorType)
            return [(e, ty.with_shape(ty.dims[1:])) for e in lit[1]]
        if kind == "tuple":
            assert isinstance(ty, TupleType)
            return list(zip(lit[1], ty.types, strict=True))
        if kind == "array":
            assert isinstance(ty, ArrayType)
            return [(e, ty.element) for e in lit[1]]
        if kind == "struct":
            assert isinstance(ty, NominalType)
            types = dict(struct_fields(ty, symbols))
            return [(value, types[name]) for name, value in lit[1]]
        if kind == "enum":
            assert isinstance(ty, NominalType)
            return list(zip(lit[2], dict(enum_cases(ty, symbols))[lit[1]], strict=True))
        return ()

    def combine(node: tuple[LitTree, Attribute], kids: list[object]) -> object:
        lit, ty = node
        kind = lit[0]
        if kind in ("int", "float", "bool"):
            assert isinstance(ty, TensorType)
            return splat(lit[1], ty)
        if kind == "operand":
            return operands[lit[1]]
        if kind == "dense":  # a read-only view of the bytes: values are never mutated
            assert isinstance(ty, TensorType)
            return dense_array(lit[1], ty.dt, ty.dims)
        if kind == "tensor":
            assert isinstance(ty, TensorType)
            if not kids:
                return np.zeros(ty.dims, dtype=numpy_dtype(ty.dt))
            return np.array(kids, dtype=numpy_dtype(ty.dt)).reshape(ty.dims)
        if kind in ("tuple", "array", "struct"):
            return tuple(kids)
        if kind == "enum":
            return (lit[1], tuple(kids))
        if kind in ("zero", "undefined"):
            return zero_value(ty, symbols)
        if kind == "null":
            return None
        raise DiagnosticError(f"reference interpreter: unknown literal kind {kind}")

    return fold_tree((tree, t), children, combine)


# ---------------------------------------------------------------------------
# Element keys: extract / insert / element pointers
# ---------------------------------------------------------------------------


def _step(
    value: object, t: Attribute, key: int | str, symbols: Symbols
) -> tuple[object, Attribute, int]:
    """(element, element type, position) of one key into a container value."""
    if isinstance(key, str):
        assert isinstance(t, NominalType)
        names = [name for name, _ in struct_fields(t, symbols)]
        index = names.index(key)
        assert isinstance(value, tuple)
        return value[index], struct_fields(t, symbols)[index][1], index
    if isinstance(t, TensorType):
        if not 0 <= key < t.dims[0]:
            raise UndefinedBehaviorError(f"index {key} out of range for {format_type(t)}")
        assert isinstance(value, np.ndarray)
        return np.asarray(value[key]), t.with_shape(t.dims[1:]), key
    if isinstance(t, TupleType | ArrayType):
        size = len(t.types) if isinstance(t, TupleType) else t.count.data
        if not 0 <= key < size:
            raise UndefinedBehaviorError(f"index {key} out of range for {format_type(t)}")
        elem = t.types[key] if isinstance(t, TupleType) else t.element
        assert isinstance(value, tuple)
        return value[key], elem, key
    raise DiagnosticError(f"reference interpreter: cannot index into {format_type(t)}")


def get_element(value: object, t: Attribute, keys: Sequence[int | str], symbols: Symbols) -> object:
    for key in keys:
        value, t, _ = _step(value, t, key, symbols)
    return value


def set_element(
    value: object, t: Attribute, keys: Sequence[int | str], new: object, symbols: Symbols
) -> object:
    """A copy of `value` with the element at `keys` replaced by `new` (functional update)."""
    trail: list[tuple[object, int]] = []
    for key in keys:
        inner, t_next, position = _step(value, t, key, symbols)
        trail.append((value, position))
        value, t = inner, t_next
    for container, position in reversed(trail):
        if isinstance(container, np.ndarray):
            updated = container.copy()
            updated[position] = new
            new = updated
        else:
            assert isinstance(container, tuple)
            new = (*container[:position], new, *container[position + 1 :])
    return new


# ---------------------------------------------------------------------------
# Arguments from Python
# ---------------------------------------------------------------------------


def coerce_value(value: object, t: Attribute, what: str, symbols: Symbols) -> object:
    """A caller's Python value as an interpreter value of type `t`: tensors are copied
    into the exact dtype and checked for shape; tuples, arrays, structs (sequences in
    field order) and enums (`(case, values)`) are walked."""

    def children(node: tuple[object, Attribute]) -> Sequence[tuple[object, Attribute]]:
        val, ty = node
        types = _element_types(val, ty, symbols)
        if types is None:
            return ()
        items = val[1] if _is_enum(ty) else val  # type: ignore[index]
        if not isinstance(items, tuple | list) or len(items) != len(types):
            raise ValueError(f"{what}: {val!r} is not a value of type {format_type(ty)}")
        return list(zip(items, types, strict=True))

    def combine(node: tuple[object, Attribute], kids: list[object]) -> object:
        val, ty = node
        if isinstance(ty, TensorType):
            arr = np.array(val, dtype=numpy_dtype(ty.dt))
            if arr.shape != ty.dims:
                raise ValueError(f"{what}: expected {format_type(ty)}, got shape {arr.shape}")
            return arr
        if _is_enum(ty):
            return (val[0], tuple(kids))  # type: ignore[index]
        if _element_types(val, ty, symbols) is not None:
            return tuple(kids)
        return val

    return fold_tree((value, t), children, combine)


def _is_enum(t: Attribute) -> TypeGuard[NominalType]:
    return isinstance(t, NominalType) and t.kind.data == "enum"


def _element_types(value: object, t: Attribute, symbols: Symbols) -> Sequence[Attribute] | None:
    """Element types of an aggregate type (None for other types)."""
    if isinstance(t, TupleType):
        return t.types
    if isinstance(t, ArrayType):
        return [t.element] * t.count.data
    if isinstance(t, NominalType) and t.kind.data == "struct":
        return [ft for _, ft in struct_fields(t, symbols)]
    if _is_enum(t):
        if not (isinstance(value, tuple | list) and len(value) == 2):
            raise ValueError(f"enum value {value!r} is not (case, values)")
        cases = dict(enum_cases(t, symbols))
        if value[0] not in cases:
            raise ValueError(f"${t.ident} has no case ?{value[0]}")
        return cases[value[0]]
    return None
