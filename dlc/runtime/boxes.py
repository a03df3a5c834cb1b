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
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.ir import Attribute

from dlc.dialects.abi import DEAD, HEAP_HEADER, LIVE, LIVE_BOXES_VAR
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import (
    NominalType,
    PointerType,
    TensorType,
    TupleType,
    format_type,
    numpy_dtype,
)
from dlc.dialects.layout import (
    ENUM_BOX_HEADER,
    box_offsets,
    children,
    enum_body,
    indirect_kinds,
    is_indirect,
    layout,
)
from dlc.dialects.recursive_types import case_of_tag, enum_tag, zero_case
from dlc.runtime.values import ZERO, from_leaves, to_leaves

_LIBC = ctypes.CDLL(None)
_LIBC.calloc.restype = ctypes.c_void_p
_LIBC.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_LIBC.free.argtypes = [ctypes.c_void_p]


class Deferred:
    """An indirect enum inside a body being built: made into a box of its own later."""

    def __init__(self, value: Any, t: NominalType):
        self.value, self.type = value, t


def _word(addr: int) -> ctypes.c_int64:
    return ctypes.c_int64.from_address(addr)


@dataclass
class _Shape:
    """An indirect enum's box, for conversions: per case its stored tag, values type
    and leaves `(offset in the box, tensor type, held enum type or None)`."""

    size: int
    kind: int
    names: list[str]
    tags: list[int]
    cases: list[TupleType]
    fields: list[list[tuple[int, TensorType, NominalType | None]]]
    held: list[int]  # offsets (in the box) of every box address the body may hold


class BoxHeap:
    """Builds, reads and releases the boxes of one module's symbols."""

    def __init__(self, symbols: Symbols, counter: int | None):
        """`counter`: the address of the module's live-box count (None: not counted)."""
        self.symbols = symbols
        self.kinds = indirect_kinds(symbols)
        self.counter = counter
        self._shapes: dict[str, _Shape] = {}
        self._held_by_kind: dict[int, list[int]] = {}

    def shape(self, t: NominalType) -> _Shape:
        shape = self._shapes.get(t.ident)
        if shape is None:
            shape = self._shapes[t.ident] = self._make_shape(t)
        return shape

    def _held(self, kind: int) -> list[int]:
        """The held-box offsets of boxes of `kind` (a box's kind word)."""
        held = self._held_by_kind.get(kind)
        if held is None:
            held = self.shape(NominalType(self.kinds[kind - 1], "enum")).held
            self._held_by_kind[kind] = held
        return held

    def _make_shape(self, t: NominalType) -> _Shape:
        symbols = self.symbols
        body = enum_body(t, symbols)
        fields = layout(body, symbols).fields
        kinds = _kid_types(body, symbols)
        cases = symbols.enums[t.ident]
        per_case: list[list[tuple[int, TensorType, NominalType | None]]] = []
        start = 1  # leaf 0 is the tag
        for _, types in cases:
            count = len(_kid_types(TupleType(list(types)), symbols))
            per_case.append(
                [
                    (ENUM_BOX_HEADER + o, leaf, k if isinstance(k, NominalType) else None)
                    for (o, leaf), k in zip(
                        fields[start : start + count], kinds[start : start + count], strict=True
                    )
                ]
            )
            start += count
        held = [ENUM_BOX_HEADER + o for o in box_offsets(body, symbols)]
        return _Shape(
            layout(body, symbols).size,
            1 + self.kinds.index(t.ident),
            [c for c, _ in cases],
            [enum_tag(t, c, symbols) for c, _ in cases],
            [TupleType(list(types)) for _, types in cases],
            per_case,
            held,
        )

    def _count(self, delta: int) -> None:
        if self.counter is not None:
            _word(self.counter).value += delta

    def _allocate(self, shape: _Shape) -> int:
        base = _LIBC.calloc(1, HEAP_HEADER + ENUM_BOX_HEADER + shape.size)
        if not base:
            raise MemoryError("out of memory building a recursive enum argument")
        _word(base).value = LIVE
        box = base + HEAP_HEADER
        _word(box).value = 1
        _word(box + 8).value = shape.kind
        self._count(1)
        return box

    def build(self, value: Any, t: NominalType, what: str) -> int:
        """The box address of `value` (a `(case, values)` tree) with count 1. A Python
        object met twice becomes one box held twice (a DAG stays linear); a value
        that contains itself, or does not fit, is a TypeError naming `what`, and no
        box is left behind."""
        boxes: dict[int, int] = {}  # id of a (case, values) object -> its box
        open_: dict[int, tuple[int, list[Any]]] = {}  # id -> (case index, leaves)
        keep: list[Any] = []  # the objects whose ids are keys
        work: list[tuple[Any, NominalType, bool]] = [(value, t, False)]
        try:
            while work:
                v, ty, expanded = work.pop()
                key = id(v)
                if v is ZERO or (key in boxes and not expanded):
                    continue
                if not expanded:
                    if key in open_:
                        raise TypeError(f"{what}: a ${ty.ident} value that contains itself")
                    k, leaves = self._case(v, ty, what)
                    open_[key] = (k, leaves)
                    keep.append(v)
                    work.append((v, ty, True))
                    work.extend((d.value, d.type, False) for d in leaves if isinstance(d, Deferred))
                    continue
                k, leaves = open_.pop(key)
                boxes[key] = self._fill(ty, k, leaves, boxes, what)
        except BaseException:
            for box in boxes.values():
                self._free(box)
            raise
        root = boxes.get(id(value), 0)
        if root:
            _word(root).value += 1
        return root

    def _case(self, v: Any, t: NominalType, what: str) -> tuple[int, list[Any]]:
        shape = self.shape(t)
        if not (isinstance(v, tuple | list) and len(v) == 2 and v[0] in shape.names):
            raise TypeError(
                f"{what}: expected (case, values) with a case of ${t.ident} "
                f"{shape.names}, got {v!r:.60}"
            )
        k = shape.names.index(v[0])
        return k, to_leaves(v[1], shape.cases[k], self.symbols, what, Deferred)

    def _fill(
        self, t: NominalType, k: int, leaves: list[Any], boxes: dict[int, int], what: str
    ) -> int:
        """A new box (count 0) of case `k` of `t`; each box it holds counts one more."""
        shape = self.shape(t)
        fields = list(zip(shape.fields[k], leaves, strict=True))
        data = [
            _leaf_bytes(item, leaf, t, what) if held is None else b""
            for (_, leaf, held), item in fields
        ]
        box = self._allocate(shape)
        _word(box).value = 0
        _word(box + ENUM_BOX_HEADER).value = shape.tags[k]
        for ((at, _, held), item), raw in zip(fields, data, strict=True):
            if held is None:
                ctypes.memmove(box + at, raw, len(raw))
            elif isinstance(item, Deferred):
                child = boxes[id(item.value)]
                _word(box + at).value = child
                _word(child).value += 1
        return box

    def _free(self, box: int) -> None:
        _word(box - HEAP_HEADER).value = DEAD
        _LIBC.free(box - HEAP_HEADER)
        self._count(-1)

    def lender(self, what: str, lent: list[int]) -> Callable[[Any, Any], np.ndarray]:
        """values.to_leaves' hook for an argument: builds the box, records it in
        `lent` (released after the call) and gives its address as the leaf."""

        def box(value: Any, t: Any) -> np.ndarray:
            lent.append(self.build(value, t, what))
            return np.array(lent[-1], np.int64)

        return box

    def take(self, t: NominalType, leaf: np.ndarray) -> Any:
        """values.from_leaves' hook for a result: the tree, its reference released."""
        value = self.read(int(leaf), t)
        self.release(int(leaf))
        return value

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
            for offset in self._held(_word(current + 8).value):
                child = _word(current + offset).value
                if child:
                    _word(child).value -= 1
                    if _word(child).value == 0:
                        work.append(child)
            self._free(current)

    def read(self, box: int, t: NominalType) -> Any:
        """The `(case, values)` tree at `box` (a box held twice is read once)."""
        built: dict[int, Any] = {}
        held: dict[int, tuple[int, list[Any]]] = {}
        work: list[tuple[int, NominalType, bool]] = [(box, t, False)]
        while work:  # post-order: every box after the boxes it holds
            current, ty, expanded = work.pop()
            if current in built or current == 0:
                continue
            shape = self.shape(ty)
            if not expanded:
                k = case_of_tag(ty, _word(current + ENUM_BOX_HEADER).value, self.symbols)
                leaves = [_read_leaf(current + at, leaf, h) for at, leaf, h in shape.fields[k]]
                held[current] = (k, leaves)
                work.append((current, ty, True))
                work.extend((a, h, False) for a, h in _boxes_in(leaves) if a not in built)
                continue
            k, leaves = held.pop(current)
            hook = lambda _t, leaf: self._value_of(built, leaf)  # noqa: E731
            values = from_leaves(shape.cases[k], iter(leaves), self.symbols, hook)
            built[current] = (shape.names[k], values)
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


def _read_leaf(at: int, leaf: TensorType, held: NominalType | None) -> Any:
    if held is not None:
        return (_word(at).value, held)
    dtype = numpy_dtype(leaf.dt)
    size = leaf.num_elements * dtype.itemsize
    return np.frombuffer(ctypes.string_at(at, size), dtype).reshape(leaf.dims).copy()


def _boxes_in(leaves: list[Any]) -> list[tuple[int, NominalType]]:
    return [leaf for leaf in leaves if isinstance(leaf, tuple)]


def _leaf_bytes(value: Any, leaf: TensorType, t: NominalType, what: str) -> bytes:
    array = np.asarray(value)
    if array.shape != tuple(leaf.dims) or array.dtype.kind not in "biuf":
        raise TypeError(
            f"{what}: expected a {leaf.dt} value of shape {tuple(leaf.dims)} in a "
            f"{format_type(t)}, got {value!r:.60}"
        )
    return np.ascontiguousarray(array, numpy_dtype(leaf.dt)).tobytes()


def heap_of(jit: Any, symbols: Symbols) -> BoxHeap:
    """The heap of a loaded module, counting in its `abi.LIVE_BOXES_VAR` (if any)."""
    from dlc.runtime.native import variable_storage

    counter = variable_storage(jit, LIVE_BOXES_VAR)
    return BoxHeap(symbols, None if counter is None else counter.ctypes.data)
