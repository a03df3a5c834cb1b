"""Value and memory layout of DLVM types in generated code.

Value form (tensor level and the native calling convention): every type is a tree whose
leaves are tensors, flattened in order:

- tensor: itself; tuple / struct: its elements / fields in order; `[n x T]`: n times T;
- enum `$E`: an `i64` tag (`recursive_types.enum_tag`: the case's index counted from
  the zero case, so zero bytes are the zero value) followed by the associated values
  of *every* case in order (a product, not a union; the values of cases other than
  the tag's are zeros);
- indirect (recursive) enum: one `i64`, the address of a box holding that product
  (`enum_body`) after a 16-byte header (refcount, then the enum's `box_kind`); the
  address 0 is the enum's zero value (no box);
- pointer `*T`: three `i64` scalars (address, lower bound, upper bound) -- a fat
  pointer; the bounds are the byte range of the allocation it points into, checked at
  every access (null: all three 0); an `allocateHeap` pointer's bounds carry its
  object's tag above bit 48 (`abi.TAG_SHIFT`: checked against the heap header, so a
  pointer to a freed object traps);
- box `box{T}`: one `i64`, the address of its header (refcount i64, then the T);
- stack: one `i64`, the address of the runtime stack object;
- function values have no leaves (calls are direct).

Memory form: the C layout of the same tree (each leaf aligned to its element size,
aggregates padded to their largest alignment); a tensor is stored inline
(row-major, bool as one byte).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from xdsl.ir import Attribute

from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    dtype_bytes,
    format_type,
)
from dlc.dialects.recursive_types import indirect_enums

I64 = TensorType((), "i64")
POINTER_LEAVES = 3


class LayoutError(Exception):
    """A type the code generator cannot represent (message: what)."""


def children(t: Attribute, symbols: Symbols) -> list[Attribute] | None:
    """The element types of `t` in the value tree; None for a tensor leaf."""
    if isinstance(t, TensorType):
        return None
    if isinstance(t, TupleType):
        return list(t.types)
    if isinstance(t, ArrayType):
        return [t.element] * t.count.data
    if isinstance(t, PointerType):
        return [I64] * POINTER_LEAVES
    if isinstance(t, BoxType | StackType):
        return [I64]
    if isinstance(t, FunctionType):
        return []
    if isinstance(t, NominalType) and t.kind.data == "struct" and t.ident in symbols.structs:
        return [ft for _, ft in symbols.structs[t.ident]]
    if isinstance(t, NominalType) and t.kind.data == "enum" and t.ident in symbols.enums:
        if t.ident in indirect_enums(symbols):
            return [I64]
        return list(enum_body(t, symbols).types)
    raise LayoutError(f"values of type {format_type(t)}")


def leaves(t: Attribute, symbols: Symbols) -> list[TensorType]:
    """Tensor leaves of `t` in order."""
    return [leaf for _, leaf in layout(t, symbols).fields]


ENUM_BOX_HEADER = 16
"""Bytes before an indirect enum's body in its box: the refcount, then `box_kind`."""


def is_indirect(t: Attribute, symbols: Symbols) -> TypeGuard[NominalType]:
    """Whether `t` is an enum laid out in boxes (recursive_types.py)."""
    return (
        isinstance(t, NominalType) and t.kind.data == "enum" and t.ident in indirect_enums(symbols)
    )


def enum_body(t: NominalType, symbols: Symbols) -> TupleType:
    """The by-value product of enum `t`: `(i64 tag, (values of case 0), ...)`."""
    return TupleType([I64, *(TupleType(list(values)) for _, values in symbols.enums[t.ident])])


def indirect_kinds(symbols: Symbols) -> list[str]:
    """The indirect enums in declaration order; a box's kind word is 1 + the index."""
    found = indirect_enums(symbols)
    return [name for name in symbols.enums if name in found]


def box_mask(t: Attribute, symbols: Symbols) -> list[bool]:
    """For each leaf of `t` in order: whether it is the box address of an indirect enum
    (a reference a value of `t` holds)."""
    mask: list[bool] = []
    stack: list[Attribute] = [t]
    while stack:
        item = stack.pop()
        if is_indirect(item, symbols):
            mask.append(True)
            continue
        kids = children(item, symbols)
        if kids is None:
            mask.append(False)
        else:
            stack.extend(reversed(kids))
    return mask


def box_offsets(t: Attribute, symbols: Symbols) -> list[int]:
    """The byte offsets, in `t`'s memory form, of its box-address leaves."""
    fields = layout(t, symbols).fields
    return [o for (o, _), boxed in zip(fields, box_mask(t, symbols), strict=True) if boxed]


@dataclass(frozen=True)
class Layout:
    """Byte size, alignment and the (offset, type) of every leaf in order."""

    size: int
    align: int
    fields: tuple[tuple[int, TensorType], ...]


def _leaf_layout(t: TensorType) -> Layout:
    width = 1 if t.dt == "bool" else dtype_bytes(t.dt)
    return Layout(width * t.num_elements, width, ((0, t),))


def layout(t: Attribute, symbols: Symbols) -> Layout:
    """C layout of `t` (post-order over the value tree, no recursion).

    A struct or enum met again inside itself is a LayoutError: the verifier rejects
    such types, and unverified IR must not make this loop forever."""
    done: dict[int, Layout] = {}
    keep: list[Attribute] = []  # keeps every node alive, so ids stay unique
    open_nominals: set[str] = set()  # structs and enums being laid out
    stack: list[tuple[Attribute, list[Attribute] | None]] = [(t, None)]
    while stack:
        item, kids = stack.pop()
        keep.append(item)
        if kids is None:
            kids = children(item, symbols)
            if kids is None:
                assert isinstance(item, TensorType)
                done[id(item)] = _leaf_layout(item)
                continue
            if isinstance(item, NominalType):
                if item.ident in open_nominals:
                    raise LayoutError(f"values of the recursive type {format_type(item)}")
                open_nominals.add(item.ident)
            stack.append((item, kids))
            stack.extend((k, None) for k in kids)
            continue
        if isinstance(item, NominalType):
            open_nominals.discard(item.ident)
        offset, align = 0, 1
        fields: list[tuple[int, TensorType]] = []
        for kid in kids:
            sub = done[id(kid)]
            offset = (offset + sub.align - 1) // sub.align * sub.align
            fields.extend((offset + o, lt) for o, lt in sub.fields)
            offset += sub.size
            align = max(align, sub.align)
        size = (offset + align - 1) // align * align
        done[id(item)] = Layout(size, align, tuple(fields))
    return done[id(t)]


@dataclass(frozen=True)
class Extent:
    """How large a value of a type is: `parts` counts the nodes of its value tree below
    the root (array elements, tuple elements, fields, enum payloads, pointer words)."""

    parts: int
    size: int
    align: int


def extent(t: Attribute, symbols: Symbols, memo: dict[Attribute, Extent]) -> Extent:
    """The parts and C layout size of `t`, memoised in `memo` and without expanding
    arrays (linear in the declarations, where `layout` is linear in the value): what
    the verifier checks dlc's limits with. Opaque types count as empty."""
    open_nominals: set[str] = set()
    stack: list[tuple[Attribute, list[Attribute] | None]] = [(t, None)]
    while stack:
        item, kids = stack.pop()
        if item in memo:
            continue
        if kids is None:
            if isinstance(item, TensorType):
                leaf = _leaf_layout(item)
                memo[item] = Extent(0, leaf.size, leaf.align)
                continue
            if isinstance(item, ArrayType) and item.count.data <= 0:  # holds no element
                memo[item] = Extent(0, 0, 1)
                continue
            try:
                kids = [item.element] if isinstance(item, ArrayType) else children(item, symbols)
            except LayoutError:
                memo[item] = Extent(0, 0, 1)
                continue
            assert kids is not None
            if isinstance(item, NominalType):
                if item.ident in open_nominals:
                    raise LayoutError(f"values of the recursive type {format_type(item)}")
                open_nominals.add(item.ident)
            stack.append((item, kids))
            stack.extend((k, None) for k in kids)
            continue
        if isinstance(item, NominalType):
            open_nominals.discard(item.ident)
        memo[item] = _combine(item, [memo[k] for k in kids])
    return memo[t]


def _combine(t: Attribute, kids: list[Extent]) -> Extent:
    if isinstance(t, ArrayType):  # n > 0 copies; an element's size is a multiple of its align
        n, element = t.count.data, kids[0]
        return Extent(n * (1 + element.parts), n * element.size, element.align)
    offset, align, parts = 0, 1, 0
    for kid in kids:
        offset = (offset + kid.align - 1) // kid.align * kid.align + kid.size
        align = max(align, kid.align)
        parts += 1 + kid.parts
    return Extent(parts, (offset + align - 1) // align * align, align)


def key_offset(t: Attribute, key: int | str, symbols: Symbols) -> tuple[int, Attribute, int | None]:
    """For one element key into `t`: (static byte offset, element type, stride for a
    dynamic index or None). Integer keys of arrays/tensors are scaled by the stride."""
    if isinstance(t, TensorType):
        sub = t.with_shape(t.dims[1:])
        stride = layout(sub, symbols).size
        return (key * stride if isinstance(key, int) else 0), sub, stride
    if isinstance(t, ArrayType):
        stride = layout(t.element, symbols).size
        return (key * stride if isinstance(key, int) else 0), t.element, stride
    kids = children(t, symbols) or []
    if isinstance(key, str) and isinstance(t, NominalType):
        names = [n for n, _ in symbols.structs[t.ident]]
        key = names.index(key)
    if not isinstance(key, int):
        raise LayoutError(f"a value key into {format_type(t)}")
    offset = 0
    for i, kid in enumerate(kids):
        kid_layout = layout(kid, symbols)
        offset = (offset + kid_layout.align - 1) // kid_layout.align * kid_layout.align
        if i == key:
            return offset, kid, None
        offset += kid_layout.size
    raise LayoutError(f"key {key} into {format_type(t)}")
