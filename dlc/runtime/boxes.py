"""Values of indirect (recursive) enums crossing the Python boundary.

In native code such a value is the address of a reference-counted box (the layout and
the ownership rules: dlc/lowering/graph_to_tensor/boxes.py). An argument's tree is
built here as boxes on the C heap, in the layout the code's own allocations have
(`calloc`, the `abi.HEAP_HEADER` word, then `[refcount, kind, body]`), lent to the call
and released after it; a result's tree is read back into `(case, values)` tuples and
its reference released. Everything is iterative: a tree 10 000 deep is fine. The boxes
are counted in the module variable `abi.LIVE_BOXES_VAR` like the code's own.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import Attribute

from dlc.dialects.abi import DEAD, HEAP_HEADER, LIVE
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import NominalType, PointerType, TensorType, numpy_dtype
from dlc.dialects.layout import (
    ENUM_BOX_HEADER,
    box_offsets,
    children,
    enum_body,
    indirect_kinds,
    layout,
)
from dlc.dialects.recursive_types import case_of_tag, zero_case

_LIBC = ctypes.CDLL(None)
_LIBC.calloc.restype = ctypes.c_void_p
_LIBC.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_LIBC.free.argtypes = [ctypes.c_void_p]


class Zero:
    """The zero value of an indirect enum inside a converted value: address 0."""


ZERO = Zero()


class Deferred:
    """An indirect enum inside a body being built: made into a box of its own later."""

    def __init__(self, value: Any, t: Attribute):
        self.value, self.type = value, t


def _word(addr: int) -> ctypes.c_int64:
    return ctypes.c_int64.from_address(addr)


class BoxHeap:
    """Builds, reads and releases the boxes of one module's symbols."""

    def __init__(self, symbols: Symbols, counter: int | None):
        """`counter`: the address of the module's live-box count (None: not counted)."""
        self.symbols = symbols
        self.kinds = indirect_kinds(symbols)
        self.counter = counter

    def _count(self, delta: int) -> None:
        if self.counter is not None:
            _word(self.counter).value += delta

    def _allocate(self, t: NominalType) -> int:
        size = layout(enum_body(t, self.symbols), self.symbols).size
        base = _LIBC.calloc(1, HEAP_HEADER + ENUM_BOX_HEADER + size)
        if not base:
            raise MemoryError("out of memory building a recursive enum argument")
        _word(base).value = LIVE
        box = base + HEAP_HEADER
        _word(box).value = 1
        _word(box + 8).value = 1 + self.kinds.index(t.ident)
        self._count(1)
        return box

    def build(self, value: Any, t: NominalType, body_leaves: Callable[..., list[Any]]) -> int:
        """The box address of `value` (a `(case, values)` tree) with count 1.
        `body_leaves(value, type, hook)` gives the leaves of its by-value body
        (values.py), calling `hook(child, child_type)` for each indirect enum inside."""
        root = ctypes.c_int64(0)
        work: list[tuple[Any, NominalType, int]] = [(value, t, ctypes.addressof(root))]
        try:
            while work:
                v, ty, slot = work.pop()
                if v is ZERO:
                    continue
                box = self._allocate(ty)
                _word(slot).value = box
                body_type = enum_body(ty, self.symbols)
                leaves = body_leaves(v, ty, Deferred)
                fields = layout(body_type, self.symbols).fields
                for (offset, leaf), item in zip(fields, leaves, strict=True):
                    at = box + ENUM_BOX_HEADER + offset
                    if isinstance(item, Deferred):
                        work.append((item.value, item.type, at))  # type: ignore[arg-type]
                        continue
                    data = _leaf_bytes(item, leaf)
                    ctypes.memmove(at, data, len(data))
        except BaseException:
            self.release(root.value)
            raise
        return root.value

    def release(self, box: int) -> None:
        """One reference less; free what dies (iteratively)."""
        if not box:
            return
        count = _word(box).value - 1
        _word(box).value = count
        if count:
            return
        work = [box]
        while work:
            current = work.pop()
            kind = self.kinds[_word(current + 8).value - 1]
            body_type = enum_body(NominalType(kind, "enum"), self.symbols)
            for offset in box_offsets(body_type, self.symbols):
                child = _word(current + ENUM_BOX_HEADER + offset).value
                if child:
                    _word(child).value -= 1
                    if _word(child).value == 0:
                        work.append(child)
            _word(current - HEAP_HEADER).value = DEAD
            _LIBC.free(current - HEAP_HEADER)
            self._count(-1)

    def read(self, box: int, t: NominalType, rebuild: Callable[..., Any]) -> Any:
        """The `(case, values)` tree at `box` (shared boxes read once); `rebuild(type,
        leaves, hook)` is values.from_leaves, the hook giving indirect enums' values."""
        built: dict[int, Any] = {}
        held: dict[int, list[Any]] = {}
        work: list[tuple[int, NominalType, bool]] = [(box, t, False)]
        while work:  # post-order: every box after the boxes it holds
            current, ty, expanded = work.pop()
            if current in built:
                continue
            if current == 0:
                built[0] = ZERO
                continue
            if not expanded:
                held[current] = _body_leaves(current, enum_body(ty, self.symbols), self.symbols)
                work.append((current, ty, True))
                work.extend((a, k, False) for a, k in _boxes_in(held[current]) if a not in built)
                continue
            body = rebuild(
                enum_body(ty, self.symbols),
                iter(held.pop(current)),
                lambda child_type, leaf: self._value_of(built, leaf),
            )
            index = case_of_tag(ty, int(body[0]), self.symbols)
            built[current] = (self.symbols.enums[ty.ident][index][0], body[1 + index])
        return self._value_of(built, (box, t))

    def _value_of(self, built: dict[int, Any], leaf: tuple[int, NominalType]) -> Any:
        address, t = leaf
        return self.zero(t) if address == 0 else built[address]

    def zero(self, t: Attribute) -> Any:
        """The zero value of type `t` as Python values (an indirect enum's: its zero
        case, finite by recursive_types' rule; depth = type nesting)."""
        if isinstance(t, TensorType):
            return np.zeros(t.dims, numpy_dtype(t.dt))
        if isinstance(t, PointerType):
            return (0, 0, 0)
        if isinstance(t, NominalType) and t.kind.data == "enum":
            case, types = self.symbols.enums[t.ident][zero_case(t, self.symbols)]
            return (case, tuple(self.zero(k) for k in types))
        return tuple(self.zero(k) for k in children(t, self.symbols) or [])


def _kid_types(t: Attribute, symbols: Symbols) -> list[Attribute]:
    """The type of each leaf of `t` where leaves are indirect enums or tensors."""
    from dlc.dialects.layout import children, is_indirect

    out: list[Attribute] = []
    stack = [t]
    while stack:
        item = stack.pop()
        kids = None if is_indirect(item, symbols) else children(item, symbols)
        if kids is None:
            out.append(item)
        else:
            stack.extend(reversed(kids))
    return out


def _body_leaves(box: int, body_type: Attribute, symbols: Symbols) -> list[Any]:
    """The leaves of a box's body: arrays, or (address, enum type) of held boxes."""
    fields = layout(body_type, symbols).fields
    kinds = _kid_types(body_type, symbols)
    out: list[Any] = []
    for (offset, leaf), kind in zip(fields, kinds, strict=True):
        at = box + ENUM_BOX_HEADER + offset
        if isinstance(kind, NominalType):
            out.append((_word(at).value, kind))
            continue
        dtype = numpy_dtype(leaf.dt)
        size = int(np.prod(leaf.dims, dtype=np.int64)) * dtype.itemsize
        data = ctypes.string_at(at, size)
        out.append(np.frombuffer(data, dtype).reshape(leaf.dims).copy())
    return out


def _boxes_in(leaves: list[Any]) -> list[tuple[int, NominalType]]:
    return [leaf for leaf in leaves if isinstance(leaf, tuple)]


def _leaf_bytes(value: Any, leaf: Any) -> bytes:
    """A leaf value (already checked by the argument's conversion) as bytes."""
    return np.ascontiguousarray(value, numpy_dtype(leaf.dt)).reshape(leaf.dims).tobytes()
