"""Indirect (recursive) enums in generated code: boxes and their reference counts.

A value of an indirect enum (dlc/dialects/recursive_types.py) is one i64, the address of
a box `[refcount, kind, body]` on the heap (`tensor.heap_alloc`: calloc), where the body
is the enum's by-value product `(tag, values of each case)` (layout.enum_body) and
nested indirect enums are box addresses again. Address 0 is the enum's zero value and
reads as the zeroed module variable `abi.ZERO_VAR`.

Ownership is reference counting, not a per-call arena: boxes may outlive the call that
made them (stored in module variables or heap memory, returned to the caller, kept in
a tree that is returned), and a tree's memory must go back as soon as the last
reference goes, also in long loops that build and drop trees. `ownership.py` decides
where the counts change; this file emits the changes: calls of the module's generated
functions `abi.BOX_RETAIN` and `abi.BOX_RELEASE`. Release frees a box whose count
drops to zero and then releases what it holds, iteratively: the boxes to free are
threaded into a list through their (dead) count words, so a tree 10 000 deep never
deepens the native stack. `abi.LIVE_BOXES_VAR` counts the live boxes.

The counts are plain (not atomic) memory updates: calls on several threads are safe
while each works on its own trees, not when they share a tree kept in a module
variable. A call that traps leaves the boxes it held alive (the status word returns
from every function at once, skipping the releases).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.ir import Attribute, Block, Region, SSAValue

from dlc.dialects import tensor
from dlc.dialects import tensor_memory as tm
from dlc.dialects.abi import BOX_RELEASE, BOX_RETAIN, LIVE_BOXES_VAR, ZERO_VAR
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import NominalType, TensorType
from dlc.dialects.layout import (
    ENUM_BOX_HEADER,
    I64,
    box_mask,
    box_offsets,
    enum_body,
    indirect_kinds,
    layout,
)
from dlc.lowering.graph_to_tensor.compute_builder import BodyBuilder, Lowered, Splat, build_compute
from dlc.lowering.graph_to_tensor.memory import MemoryRules, flatten, i64_op

BOOL = TensorType((), "bool")


def _value(b: Builder, value: Lowered) -> SSAValue:
    if isinstance(value, SSAValue):
        return value
    assert isinstance(value, Splat)
    return build_compute(b, value.type, lambda s, i, _: s.read(value, i)).result


def _compare(b: Builder, pred: str, x: Lowered, y: int) -> SSAValue:
    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        return s.cmpi(pred, s.read(x, []), s.index(y))

    return build_compute(b, BOOL, body).result


class Boxes:
    """Emits box allocation, reads and reference counting for one module's symbols."""

    def __init__(self, symbols: Symbols, memory: MemoryRules):
        self.symbols = symbols
        self.memory = memory
        self.kinds = indirect_kinds(symbols)
        self.used = False  # whether the module needs the generated functions

    def body_size(self, t: NominalType) -> int:
        return layout(enum_body(t, self.symbols), self.symbols).size

    def zero_bytes(self) -> int:
        sizes = [self.body_size(NominalType(k, "enum")) for k in self.kinds]
        return max([8, *sizes])

    # ---- values ----------------------------------------------------------------------

    def new_box(self, b: Builder, t: NominalType, body: Lowered) -> Lowered:
        """A fresh box (count 1) holding the by-value `body`; its address as a value."""
        self.used = True
        size = self.body_size(t)
        addr = b.insert(tm.HeapAllocOp(_value(b, Splat(ENUM_BOX_HEADER + size, I64)))).result
        words = self.memory.allocation(b, addr, ENUM_BOX_HEADER)
        self.memory.write(
            b, TensorType((2,), "i64"), _pair(b, 1, 1 + self.kinds.index(t.ident)), words
        )
        at = i64_op(b, "add", addr, ENUM_BOX_HEADER)
        self.memory.write(b, enum_body(t, self.symbols), body, self.memory.allocation(b, at, size))
        self.count_boxes(b, 1)
        return [addr]

    def read_body(self, b: Builder, t: NominalType, value: Lowered) -> Lowered:
        """The by-value body of the box `value` (the zero body for address 0)."""
        (addr,) = flatten(value)
        size, zero_size = self.body_size(t), self.zero_bytes()
        zero = b.insert(tm.GlobalAddressOp(ZERO_VAR, zero_size)).result

        def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
            a = s.read(addr, [])
            null = s.cmpi("eq", a, s.index(0))
            return s.select(
                null, s.read(zero, []), s.emit(arith.AddiOp(a, s.index(ENUM_BOX_HEADER)))
            )

        at = build_compute(b, I64, body).result
        return self.memory.read(b, enum_body(t, self.symbols), self.memory.allocation(b, at, size))

    def count_boxes(self, b: Builder, delta: int) -> None:
        counter = b.insert(tm.GlobalAddressOp(LIVE_BOXES_VAR, 8)).result
        pointer = self.memory.allocation(b, counter, 8)
        self.memory.write(
            b, I64, i64_op(b, "add", self.memory.read(b, I64, pointer), delta), pointer
        )

    # ---- reference counts --------------------------------------------------------------

    def retain(self, b: Builder, t: Attribute, value: Lowered) -> None:
        self._count(b, t, value, BOX_RETAIN)

    def release(self, b: Builder, t: Attribute, value: Lowered) -> None:
        self._count(b, t, value, BOX_RELEASE)

    def _count(self, b: Builder, t: Attribute, value: Lowered, callee: str) -> None:
        for leaf, boxed in zip(flatten(value), box_mask(t, self.symbols), strict=True):
            if not boxed or (isinstance(leaf, Splat) and leaf.value == 0):
                continue
            self.used = True
            b.insert(tensor.CallOp(callee, [_value(b, leaf)], []))

    # ---- the generated functions ---------------------------------------------------------

    def functions(self) -> list[tensor.FuncOp]:
        """`abi.BOX_RETAIN` and `abi.BOX_RELEASE` (module docstring)."""
        return [self._retain_function(), self._release_function()]

    def _retain_function(self) -> tensor.FuncOp:
        func = tensor.FuncOp(BOX_RETAIN, [I64], [])
        entry = func.body.blocks[0]
        (box,) = entry.args
        bump, done = Block(), Block()
        func.body.add_block(bump)
        func.body.add_block(done)
        b = Builder(InsertPoint.at_end(entry))
        b.insert(tensor.CondBrOp(_compare(b, "eq", box, 0), done, [], bump, []))
        b = Builder(InsertPoint.at_end(bump))
        words = self.memory.allocation(b, box, 8)
        self.memory.write(b, I64, i64_op(b, "add", self.memory.read(b, I64, words), 1), words)
        b.insert(tensor.ReturnOp())
        Builder(InsertPoint.at_end(done)).insert(tensor.ReturnOp())
        return func

    def _release_function(self) -> tensor.FuncOp:
        """count - 1; at zero the box starts the list of boxes to free (`next` in the
        count word); each box freed releases its children, adding those that die."""
        func = tensor.FuncOp(BOX_RELEASE, [I64], [])
        region = func.body
        entry = region.blocks[0]
        (box,) = entry.args
        blocks = {n: Block() for n in ("dec", "keep", "start", "done")}
        loop, pop = Block(arg_types=[I64]), Block()
        for block in (*blocks.values(), loop, pop):
            region.add_block(block)
        b = Builder(InsertPoint.at_end(entry))
        b.insert(tensor.CondBrOp(_compare(b, "eq", box, 0), blocks["done"], [], blocks["dec"], []))
        b = Builder(InsertPoint.at_end(blocks["dec"]))
        words = self.memory.allocation(b, box, 8)
        count = _value(b, i64_op(b, "add", self.memory.read(b, I64, words), -1))
        b.insert(
            tensor.CondBrOp(_compare(b, "eq", count, 0), blocks["start"], [], blocks["keep"], [])
        )
        b = Builder(InsertPoint.at_end(blocks["keep"]))
        self.memory.write(b, I64, count, words)
        b.insert(tensor.ReturnOp())
        b = Builder(InsertPoint.at_end(blocks["start"]))
        self.memory.write(b, I64, Splat(0, I64), words)
        b.insert(tensor.BrOp(loop, [box]))
        b = Builder(InsertPoint.at_end(loop))
        (head,) = loop.args
        b.insert(tensor.CondBrOp(_compare(b, "eq", head, 0), blocks["done"], [], pop, []))
        Builder(InsertPoint.at_end(blocks["done"])).insert(tensor.ReturnOp())
        self._pop(region, pop, head, loop)
        return func

    def _pop(self, region: Region, pop: Block, head: SSAValue, loop: Block) -> None:
        """Free the list's first box after releasing each box address its body holds."""
        b = Builder(InsertPoint.at_end(pop))
        header = self.memory.read(b, TensorType((2,), "i64"), self.memory.allocation(b, head, 16))
        rest = _element(b, header, 0)
        kind = _element(b, header, 1)
        done = Block(arg_types=[I64])
        region.add_block(done)
        for k, name in enumerate(self.kinds):
            body_type = enum_body(NominalType(name, "enum"), self.symbols)
            offsets = box_offsets(body_type, self.symbols)
            this, other = Block(), Block()
            region.add_block(this)
            region.add_block(other)
            b.insert(tensor.CondBrOp(_compare(b, "eq", kind, k + 1), this, [], other, []))
            b = Builder(InsertPoint.at_end(this))
            current: SSAValue = rest
            for offset in offsets:
                b, current = self._drop_child(b, region, head, offset, current)
            b.insert(tensor.BrOp(done, [current]))
            b = Builder(InsertPoint.at_end(other))
        b.insert(tensor.BrOp(done, [rest]))  # no other kinds exist
        b = Builder(InsertPoint.at_end(done))
        b.insert(tm.HeapFreeOp(head))
        self.count_boxes(b, -1)
        b.insert(tensor.BrOp(loop, list(done.args)))

    def _drop_child(
        self, b: Builder, region: Region, box: SSAValue, offset: int, rest: SSAValue
    ) -> tuple[Builder, SSAValue]:
        """Release the child at body `offset` of `box`; a child that dies joins the list
        `rest`. Returns the builder after it and the list."""
        at = i64_op(b, "add", box, ENUM_BOX_HEADER + offset)
        child = _value(b, self.memory.read(b, I64, self.memory.allocation(b, at, 8)))
        dec, dead, alive, join = Block(), Block(), Block(), Block(arg_types=[I64])
        for block in (dec, dead, alive, join):
            region.add_block(block)
        b.insert(tensor.CondBrOp(_compare(b, "eq", child, 0), join, [rest], dec, []))
        b = Builder(InsertPoint.at_end(dec))
        words = self.memory.allocation(b, child, 8)
        count = _value(b, i64_op(b, "add", self.memory.read(b, I64, words), -1))
        b.insert(tensor.CondBrOp(_compare(b, "eq", count, 0), dead, [], alive, []))
        b = Builder(InsertPoint.at_end(dead))
        self.memory.write(b, I64, rest, words)
        b.insert(tensor.BrOp(join, [child]))
        b = Builder(InsertPoint.at_end(alive))
        self.memory.write(b, I64, count, words)
        b.insert(tensor.BrOp(join, [rest]))
        return Builder(InsertPoint.at_end(join)), join.args[0]


def _pair(b: Builder, first: int, second: int) -> SSAValue:
    t = TensorType((2,), "i64")

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        return s.select(s.cmpi("eq", i[0], s.index(0)), s.index(first), s.index(second))

    return build_compute(b, t, body).result


def _element(b: Builder, pair: Lowered, k: int) -> SSAValue:
    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        return s.read(pair, [s.index(k)])

    return build_compute(b, I64, body).result
