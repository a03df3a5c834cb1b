"""Graph -> tensor rules for memory, aggregates in memory, enums and bitCast.

Values follow dlc/dialects/layout.py (a pointer is [address, lower, upper] of i64
scalars, a box [address]); memory accesses become `tensor.mem_read`/`tensor.mem_write`
of each tensor leaf at its C-layout offset.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects import tensor_memory as tm
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import BoxType, NominalType, PointerType, TensorType, TupleType
from dlc.dialects.layout import I64, LayoutError, children, key_offset, layout, leaves
from dlc.dialects.recursive_types import enum_tag
from dlc.lowering.graph_to_tensor.compute_builder import (
    BodyBuilder,
    Lowered,
    Splat,
    build_compute,
    lowered_type,
)
from dlc.lowering.graph_to_tensor.ops import UnsupportedOp
from dlc.lowering.graph_to_tensor.runtime_ops import (
    lower_random,
    lower_stack_op,
    tagged_heap_object,
)

BOX_HEADER = 8  # the refcount (i64) before a box's payload


def _materialize(b: Builder, value: Lowered) -> SSAValue:
    if isinstance(value, SSAValue):
        return value
    assert isinstance(value, Splat)
    return build_compute(b, value.type, lambda s, i, _: s.read(value, i)).result


def _pointer(value: Lowered) -> list[Lowered]:
    """A pointer value: its [address, lower bound, upper bound] (a box: [address])."""
    assert isinstance(value, list), value
    return value


def i64_op(b: Builder, opcode: str, x: Lowered, y: Lowered | int) -> Lowered:
    """x (add|multiply) y on i64 scalars, folded when both are constants."""
    if isinstance(y, int):
        y = Splat(y, I64)
    if isinstance(x, Splat) and isinstance(y, Splat):
        value = x.value + y.value if opcode == "add" else x.value * y.value
        return Splat(value, I64)
    if opcode == "add" and isinstance(y, Splat) and y.value == 0:
        return x

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        a, c = s.read(x, []), s.read(y, [])
        return s.emit(arith.AddiOp(a, c) if opcode == "add" else arith.MuliOp(a, c))

    return build_compute(b, I64, body).result


I64_MAX = 2**63 - 1


def byte_count(b: Builder, count: Lowered, size: int) -> Lowered:
    """count · size bytes as an i64 scalar. A negative count, or a product beyond i64,
    gives I64_MAX instead of a wrapped-around small size: no allocation can satisfy it
    (calloc fails: a trap) and no bounds check admits it."""
    limit = I64_MAX // max(size, 1)
    if isinstance(count, Splat):
        n = int(count.value)
        return Splat(n * size if 0 <= n <= limit else I64_MAX, I64)

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        n = s.read(count, [])
        over = s.cmpi("ugt", n, s.index(limit))  # unsigned: negative counts are over too
        return s.select(over, s.index(I64_MAX), s.emit(arith.MuliOp(n, s.index(size))))

    return build_compute(b, I64, body).result


def unflatten(t: Attribute, items: Iterator[Lowered], symbols: Symbols) -> Lowered:
    """The value of type `t` made of its leaves `items` in order (iterative)."""
    root: list[Lowered] = []
    stack: list[tuple[Iterator[Attribute], list[Lowered]]] = [(iter([t]), root)]
    while stack:
        types, out = stack[-1]
        element = next(types, None)
        if element is None:
            stack.pop()
            if stack:
                stack[-1][1].append(out)
            continue
        kids = children(element, symbols)
        if kids is None:
            out.append(next(items))
        else:
            stack.append((iter(kids), []))
    return root[0]


def flatten(value: Lowered) -> list[Lowered]:
    out: list[Lowered] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


def zero(t: Attribute, symbols: Symbols) -> Lowered:
    """Zeros / null pointers / the first enum case of type `t`."""
    return unflatten(t, iter([Splat(0, leaf) for leaf in leaves(t, symbols)]), symbols)


class MemoryRules:
    """Lowers the memory and aggregate ops of one function."""

    def __init__(self, symbols: Symbols):
        self.symbols = symbols

    def size(self, t: Attribute) -> int:
        return layout(t, self.symbols).size

    def read(self, b: Builder, t: Attribute, pointer: list[Lowered]) -> Lowered:
        addr, lo, hi = (_materialize(b, v) for v in pointer)
        values: list[Lowered] = []
        for offset, leaf in layout(t, self.symbols).fields:
            at = _materialize(b, i64_op(b, "add", addr, offset))
            values.append(b.insert(tm.MemReadOp(at, lo, hi, leaf)).result)
        return unflatten(t, iter(values), self.symbols)

    def write(self, b: Builder, t: Attribute, value: Lowered, pointer: list[Lowered]) -> None:
        addr, lo, hi = (_materialize(b, v) for v in pointer)
        fields = layout(t, self.symbols).fields
        for (offset, _), leaf in zip(fields, flatten(value), strict=True):
            at = _materialize(b, i64_op(b, "add", addr, offset))
            b.insert(tm.MemWriteOp(_materialize(b, leaf), at, lo, hi))

    def allocation(self, b: Builder, addr: Lowered, nbytes: Lowered | int) -> list[Lowered]:
        return [addr, addr, i64_op(b, "add", addr, nbytes)]

    def lower(self, b: Builder, op: Operation, args: list[Lowered]) -> Lowered | None:
        """The value of `op` (None for void ops); UnsupportedOp when not handled."""
        try:
            return self._lower(b, op, args)
        except LayoutError as err:
            raise UnsupportedOp(str(err)) from None

    def _lower(self, b: Builder, op: Operation, args: list[Lowered]) -> Lowered | None:
        match op:
            case gm.AllocateStackOp():
                size = op.count.data * self.size(op.elem_type)
                addr = b.insert(tm.StackAllocOp(size)).result
                return self.allocation(b, addr, size)
            case gm.AllocateHeapOp():
                nbytes = byte_count(b, args[0], self.size(op.elem_type))
                addr = b.insert(tm.HeapAllocOp(_materialize(b, nbytes))).result
                return tagged_heap_object(b, addr, nbytes, _materialize)
            case gm.AllocateBoxOp():
                box_bytes = BOX_HEADER + self.size(op.elem_type)
                addr = b.insert(tm.HeapAllocOp(_materialize(b, Splat(box_bytes, I64)))).result
                self.write(b, I64, Splat(1, I64), self.allocation(b, addr, BOX_HEADER))
                return [addr]
            case gm.ProjectBoxOp():
                box_type = op.box.type
                assert isinstance(box_type, BoxType)
                return box_part(b, _pointer(args[0])[0], BOX_HEADER, self.size(box_type.element))
            case gm.RetainOp() | gm.ReleaseOp():
                self.refcount(b, op, _pointer(args[0])[0])
                return None
            case gm.DeallocateOp():
                b.insert(tm.HeapFreeOp(_materialize(b, _pointer(args[0])[0])))
                return None
            case gm.LoadOp():
                return self.read(b, op.result.type, _pointer(args[0]))
            case gm.StoreOp():
                pointee = op.pointer.type
                assert isinstance(pointee, PointerType)
                self.write(b, pointee.pointee, args[0], _pointer(args[1]))
                return None
            case gm.ElementPointerOp():
                return self.element_pointer(b, op, args)
            case gm.CopyOp():
                self.copy(b, op, args)
                return None
            case gt.BitCastOp():
                return self.bitcast(b, op, args[0])
            case gm.RandomOp():
                return lower_random(b, op, args, _materialize)
            case gm.CreateStackOp() | gm.PushOp() | gm.PopOp() | gm.DestroyStackOp():
                return lower_stack_op(b, op, args, self, _materialize)
        raise UnsupportedOp(getattr(op, "OPCODE", op.name))

    def refcount(self, b: Builder, op: Operation, addr: Lowered) -> None:
        """retain: count + 1; release: count - 1, freeing the box at zero."""
        pointer = box_part(b, addr, 0, BOX_HEADER)
        count = self.read(b, I64, pointer)
        delta = 1 if isinstance(op, gm.RetainOp) else -1
        updated = i64_op(b, "add", count, delta)
        self.write(b, I64, updated, pointer)
        if delta > 0:
            return

        def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
            dead = s.cmpi("eq", s.read(updated, []), s.index(0))
            return s.select(dead, s.read(addr, []), s.index(0))

        target = build_compute(b, I64, body).result  # free(NULL) does nothing
        b.insert(tm.HeapFreeOp(target))

    def element_pointer(self, b: Builder, op: gm.ElementPointerOp, args: list[Lowered]) -> Lowered:
        pointer = _pointer(args[0])
        pointer_type = op.pointer.type
        assert isinstance(pointer_type, PointerType)
        t = pointer_type.pointee
        addr = pointer[0]
        dynamic = iter(args[1:])
        for key in gm.keys_of(dict(op.properties)):
            offset, t, stride = key_offset(t, -1 if key is None else key, self.symbols)
            if key is None:
                if stride is None:
                    raise UnsupportedOp("elementPointer with a value key into a struct or tuple")
                index = _as_i64(b, next(dynamic))
                addr = i64_op(b, "add", addr, i64_op(b, "multiply", index, stride))
            else:
                addr = i64_op(b, "add", addr, offset)
        return [addr, pointer[1], pointer[2]]

    def copy(self, b: Builder, op: gm.CopyOp, args: list[Lowered]) -> None:
        source, dest, count = _pointer(args[0]), _pointer(args[1]), args[2]
        t = op.source.type
        if isinstance(t, BoxType):
            size = self.size(t.element)
            source = box_part(b, source[0], BOX_HEADER, size)
            dest = box_part(b, dest[0], BOX_HEADER, size)
            nbytes: Lowered = Splat(size, I64)
        else:
            assert isinstance(t, PointerType)
            nbytes = byte_count(b, count, self.size(t.pointee))
        operands = [*dest, *source, nbytes]
        b.insert(tm.MemCopyOp([_materialize(b, v) for v in operands]))
        return None

    def bitcast(self, b: Builder, op: gt.BitCastOp, value: Lowered) -> Lowered:
        source, target = op.operand.type, op.result.type
        if not isinstance(source, TensorType) or not isinstance(target, TensorType):
            raise UnsupportedOp("bitCast of a non-tensor value")
        if self.size(source) != self.size(target):
            raise UnsupportedOp(
                f"bitCast between types of different byte sizes ({self.size(source)} and "
                f"{self.size(target)})"
            )
        return b.insert(tm.BitCastOp(_materialize(b, value), target)).result


def box_part(b: Builder, box: Lowered, offset: int, size: int) -> list[Lowered]:
    """The pointer [box + offset, same, box + offset + size] to a part of a box (its
    refcount or payload); a null box (a zero value, never allocated) gives the empty
    bounds [0, 0, 0], so any access through it traps instead of touching address 8."""
    if isinstance(box, Splat) and box.value == 0:
        return [Splat(0, I64)] * 3

    def part(delta: int) -> Lowered:
        def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
            addr = s.read(box, [])
            null = s.cmpi("eq", addr, s.index(0))
            return s.select(null, s.index(0), s.emit(arith.AddiOp(addr, s.index(delta))))

        return build_compute(b, I64, body).result

    start = part(offset)
    return [start, start, part(offset + size)]


def _as_i64(b: Builder, value: Lowered) -> Lowered:
    """An integer scalar key widened to i64 (64-bit index arithmetic)."""
    t = lowered_type(value)
    if t.dt == "i64":
        return value
    if isinstance(value, Splat):
        return Splat(int(value.value), I64)
    return build_compute(b, I64, lambda s, i, _: s.cast(s.read(value, []), t.dt, "i64")).result


def enum_value(t: NominalType, case: str, values: list[Lowered], symbols: Symbols) -> Lowered:
    """[tag, values of case 0, ...]: the given case's values, zeros for the others."""
    cases = symbols.enums[t.ident]
    out: list[Lowered] = [Splat(enum_tag(t, case, symbols), I64)]
    for name, types in cases:
        out.append(values if name == case else zero(TupleType(list(types)), symbols))
    return out


def lower_aggregate_key_op(
    b: Builder, op: Operation, args: list[Lowered], symbols: Symbols
) -> Lowered:
    """`extract`/`insert` through tuples, structs or arrays: graph_to_tensor_keys.py."""
    from dlc.lowering.graph_to_tensor.keys import lower_key_op

    return lower_key_op(b, op, args, symbols)
