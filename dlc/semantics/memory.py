"""Handlers of the reference interpreter for stacks, memory, boxes, random and trap.

Memory model (see `values.py`): allocations are `Buffer`s of cells holding
zero values; pointers address a cell plus element keys. Loads and stores through a
null or freed pointer, or out of the buffer, raise `UndefinedBehaviorError`. Stack
allocations are freed when their call returns; `deallocate` of stack or var memory is
an error. Boxes start with refcount 1; `release` to 0 frees the box.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.ir import Attribute, Operation

from dlc.diagnostics import TrapError
from dlc.dialects import graph_memory as mem
from dlc.dialects.graph_memory import keys_of
from dlc.dialects.graph_types import BoxType, PointerType, TensorType, format_type
from dlc.semantics.values import (
    Box,
    Buffer,
    Pointer,
    UndefinedBehaviorError,
    get_element,
    numpy_dtype,
    set_element,
    zero_value,
)

if TYPE_CHECKING:
    from dlc.semantics.interpreter import Interpreter

Handler = Callable[["Interpreter", Any, list[Any]], object]
MEMORY_HANDLERS: dict[type[Operation], Handler] = {}


def handles(*classes: type[Operation]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for cls in classes:
            MEMORY_HANDLERS[cls] = fn
        return fn

    return register


def dynamic_keys(op: Operation, dynamic: list[Any]) -> list[int | str]:
    """Static keys with each dynamic (value) key replaced by its integer value."""
    values = iter(dynamic)
    return [int(next(values)) if k is None else k for k in keys_of(dict(op.properties))]


# -- stacks ----------------------------------------------------------------------


class Stack(list):
    """A stack's items, each (type text, value), the top last; `destroyed` after
    `destroyStack`."""

    destroyed = False


def _live_stack(stack: list, what: str) -> list:
    if getattr(stack, "destroyed", False):
        raise UndefinedBehaviorError(f"{what} a destroyed stack")
    return stack


@handles(mem.CreateStackOp)
def _create_stack(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return Stack()


@handles(mem.PushOp)
def _push(interp: Interpreter, op: mem.PushOp, args: list[Any]) -> object:
    _live_stack(args[1], "push to").append((format_type(op.value.type), args[0]))
    return None


@handles(mem.PopOp)
def _pop(interp: Interpreter, op: mem.PopOp, args: list[Any]) -> object:
    stack = _live_stack(args[0], "pop from")
    if not stack:
        raise UndefinedBehaviorError("pop from an empty stack")
    item = format_type(op.result.type)
    if stack[-1][0] != item:
        raise UndefinedBehaviorError(f"pop {item} from a stack whose top item is not a {item}")
    return stack.pop()[1]


@handles(mem.DestroyStackOp)
def _destroy_stack(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    args[0].clear()
    if isinstance(args[0], Stack):
        args[0].destroyed = True
    return None


# -- memory ----------------------------------------------------------------------


def _live_cell(p: object) -> Pointer:
    if not isinstance(p, Pointer):
        raise UndefinedBehaviorError("dereference of a null pointer")
    if p.buffer.freed:
        raise UndefinedBehaviorError("use of freed memory")
    if not 0 <= p.offset < len(p.buffer.cells):
        raise UndefinedBehaviorError(
            f"pointer offset {p.offset} out of bounds of {len(p.buffer.cells)} elements"
        )
    return p


def load(interp: Interpreter, p: object) -> object:
    ptr = _live_cell(p)
    cell = ptr.buffer.cells[ptr.offset]
    return get_element(cell, ptr.buffer.elem_type, ptr.path, interp.symbols)


def store(interp: Interpreter, value: object, p: object) -> None:
    ptr = _live_cell(p)
    cells = ptr.buffer.cells
    cells[ptr.offset] = set_element(
        cells[ptr.offset], ptr.buffer.elem_type, ptr.path, value, interp.symbols
    )


def _allocate(interp: Interpreter, elem_type: Attribute, count: int, kind: str) -> Buffer:
    if count < 0:
        raise UndefinedBehaviorError(f"allocation of {count} elements")
    cells = [zero_value(elem_type, interp.symbols) for _ in range(count)]
    return Buffer(cells, elem_type, kind)


@handles(mem.AllocateStackOp)
def _allocate_stack(interp: Interpreter, op: mem.AllocateStackOp, args: list[Any]) -> object:
    buffer = _allocate(interp, op.elem_type, op.count.data, "stack")
    interp.note_allocation(buffer)
    return Pointer(buffer, 0, op.elem_type)


@handles(mem.AllocateHeapOp)
def _allocate_heap(interp: Interpreter, op: mem.AllocateHeapOp, args: list[Any]) -> object:
    return Pointer(_allocate(interp, op.elem_type, int(args[0]), "heap"), 0, op.elem_type)


@handles(mem.AllocateBoxOp)
def _allocate_box(interp: Interpreter, op: mem.AllocateBoxOp, args: list[Any]) -> object:
    return Box(_allocate(interp, op.elem_type, 1, "box"), op.elem_type)


def _live_box(box: object) -> Box:
    if not isinstance(box, Box):
        raise UndefinedBehaviorError("use of a null box")
    if box.buffer.freed:
        raise UndefinedBehaviorError("use of a freed box")
    return box


@handles(mem.ProjectBoxOp)
def _project_box(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    box = _live_box(args[0])
    return Pointer(box.buffer, 0, box.elem_type)


@handles(mem.RetainOp)
def _retain(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    _live_box(args[0]).refcount += 1
    return None


@handles(mem.ReleaseOp)
def _release(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    box = _live_box(args[0])
    box.refcount -= 1
    if box.refcount == 0:
        box.buffer.freed = True
    return None


@handles(mem.DeallocateOp)
def _deallocate(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    target = args[0]
    buffer = (
        _live_box(target).buffer
        if isinstance(op.operands[0].type, BoxType)
        else _live_cell(target).buffer
    )
    if buffer.kind in ("stack", "var"):
        raise UndefinedBehaviorError(f"deallocate of {buffer.kind} memory")
    buffer.freed = True
    return None


@handles(mem.LoadOp)
def _load(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return load(interp, args[0])


@handles(mem.StoreOp)
def _store(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    store(interp, args[0], args[1])
    return None


@handles(mem.ElementPointerOp)
def _element_pointer(interp: Interpreter, op: mem.ElementPointerOp, args: list[Any]) -> object:
    p = _live_cell(args[0])
    pointee = op.result.type
    assert isinstance(pointee, PointerType)
    return Pointer(p.buffer, p.offset, pointee.pointee, (*p.path, *dynamic_keys(op, args[1:])))


@handles(mem.CopyOp)
def _copy(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    source, dest, count = args
    if isinstance(source, Box):
        source = Pointer(_live_box(source).buffer, 0, source.elem_type)
        dest = Pointer(_live_box(dest).buffer, 0, dest.elem_type)
    values = [load(interp, source.advanced(i)) for i in range(int(count))]
    for i, value in enumerate(values):
        store(interp, value, dest.advanced(i))
    return None


@handles(mem.TrapOp)
def _trap(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    raise TrapError(f"trap in @{interp.current_function}")


@handles(mem.RandomOp)
def _random(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    t = _result_tensor(op)
    dtype = numpy_dtype(t.dt)
    lo, hi = args[0][()], args[1][()]
    if not lo < hi:
        return np.full(t.dims, lo, dtype=dtype)
    if dtype.kind in "iu":
        return interp.rng.integers(lo, hi, size=t.dims, dtype=dtype)
    unit = interp.rng.random(t.dims, dtype=np.float64)
    values = np.asarray(lo + (hi - lo) * unit.astype(dtype), dtype=dtype)
    below = np.nextafter(hi, lo).astype(dtype)
    return np.asarray(np.where(values >= hi, below, values), dtype=dtype)


def _result_tensor(op: Operation) -> TensorType:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t
