"""Raw-memory ops of the `loop` dialect: addresses are `i64` values.

They implement DLVM pointers, globals and allocations below the buffer (memref) model:
`loop.raw_load`/`loop.raw_store` copy whole buffers from/to an address, `loop.raw_check`
is the bounds check of the bounds-checking build (a no-op otherwise).

    %h = loop.raw_alloc %nbytes
    loop.raw_check %h, %nbytes, %lo, %hi access "store"
    loop.raw_store %buf to %h : memref<2xf32>
    %top = loop.stack_push %h nbytes 4 item "f32"
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    IntAttr,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)

from dlc.dialects.formats import Int


@irdl_op_definition
class AddressOp(IRDLOperation):
    """`loop.address %buf : memref<...>`: the address of a buffer's first element."""

    name = "loop.address"
    buffer = operand_def(MemRefType)
    res = result_def(i64)
    assembly_format = "$buffer attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue):
        super().__init__(operands=[buffer], result_types=[i64])


@irdl_op_definition
class GlobalAddressOp(IRDLOperation):
    """`loop.global_address @g size 16`: the address of module variable storage; the
    address lives in the i64 global `_dlc_var_<g>`, set by the runtime after JIT."""

    name = "loop.global_address"
    sym_name = prop_def(SymbolNameConstraint())
    size = prop_def(IntAttr)
    res = result_def(i64)
    custom_directives = (Int,)
    assembly_format = "$sym_name `size` custom<Int>($size) attr-dict"

    def __init__(self, name: str, size: int):
        super().__init__(
            properties={"sym_name": StringAttr(name), "size": IntAttr(size)}, result_types=[i64]
        )


@irdl_op_definition
class RawLoadOp(IRDLOperation):
    """`loop.raw_load %addr into %buf : memref<...>`: copy the buffer's byte size from
    `addr` into it."""

    name = "loop.raw_load"
    addr = operand_def(i64)
    buffer = operand_def(MemRefType)
    assembly_format = "$addr `into` $buffer attr-dict `:` type($buffer)"

    def __init__(self, addr: SSAValue, buffer: SSAValue):
        super().__init__(operands=[addr, buffer])


@irdl_op_definition
class RawStoreOp(IRDLOperation):
    """`loop.raw_store %buf to %addr : memref<...>`: copy the buffer's bytes to `addr`."""

    name = "loop.raw_store"
    buffer = operand_def(MemRefType)
    addr = operand_def(i64)
    assembly_format = "$buffer `to` $addr attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue, addr: SSAValue):
        super().__init__(operands=[buffer, addr])


@irdl_op_definition
class RawCopyOp(IRDLOperation):
    """`loop.raw_copy %dst, %src, %nbytes` (memmove)."""

    name = "loop.raw_copy"
    dst = operand_def(i64)
    src = operand_def(i64)
    nbytes = operand_def(i64)
    assembly_format = "$dst `,` $src `,` $nbytes attr-dict"

    def __init__(self, dst: SSAValue, src: SSAValue, nbytes: SSAValue):
        super().__init__(operands=[dst, src, nbytes])


@irdl_op_definition
class RawCheckOp(IRDLOperation):
    """`loop.raw_check %addr, %nbytes, %lo, %hi access "load"`: in bounds-check builds, an
    access of `nbytes` at `addr` outside [lo, hi) records the op's location in the
    status word and returns from the function (Python raises IndexError).

    `offset -4` compares `addr - offset` (a signed index range moved to start at 0) but
    reports `addr`; `always` checks in every build."""

    name = "loop.raw_check"
    addr = operand_def(i64)
    nbytes = operand_def(i64)
    lo = operand_def(i64)
    hi = operand_def(i64)
    access = prop_def(StringAttr)
    offset = opt_prop_def(IntAttr)
    always = opt_prop_def(UnitAttr)
    custom_directives = (Int,)
    assembly_format = (
        "$addr `,` $nbytes `,` $lo `,` $hi `access` $access "
        "(`offset` custom<Int>($offset)^)? (`always` $always^)? attr-dict"
    )

    def __init__(
        self, args: Sequence[SSAValue], access: str, *, offset: int = 0, always: bool = False
    ):
        props: dict[str, Attribute] = {"access": StringAttr(access)}
        if offset:
            props["offset"] = IntAttr(offset)
        if always:
            props["always"] = UnitAttr()
        super().__init__(operands=list(args), properties=props)


@irdl_op_definition
class RawAllocOp(IRDLOperation):
    """`loop.raw_alloc %nbytes`: the address of zeroed heap memory (calloc)."""

    name = "loop.raw_alloc"
    nbytes = operand_def(i64)
    res = result_def(i64)
    assembly_format = "$nbytes attr-dict"

    def __init__(self, nbytes: SSAValue):
        super().__init__(operands=[nbytes], result_types=[i64])


@irdl_op_definition
class RawFreeOp(IRDLOperation):
    """`loop.raw_free %addr` (free; `raw`: memory without the
    heap header of `raw_alloc`)."""

    name = "loop.raw_free"
    addr = operand_def(i64)
    raw = opt_prop_def(UnitAttr)
    assembly_format = "(`raw` $raw^)? $addr attr-dict"

    def __init__(self, addr: SSAValue, *, raw: bool = False):
        super().__init__(operands=[addr], properties={"raw": UnitAttr()} if raw else {})


@irdl_op_definition
class StackAllocOp(IRDLOperation):
    """`loop.stack_alloc size 16`: the address of an `alloca` of the function's entry
    block, zeroed where the op stands."""

    name = "loop.stack_alloc"
    size = prop_def(IntAttr)
    res = result_def(i64)
    custom_directives = (Int,)
    assembly_format = "`size` custom<Int>($size) attr-dict"

    def __init__(self, size: int):
        super().__init__(properties={"size": IntAttr(size)}, result_types=[i64])


@irdl_op_definition
class StackPushOp(IRDLOperation):
    """`loop.stack_push %header nbytes 4 item "f32"`: grow the stack whose header
    `[data, size, capacity]` is at `header` by `nbytes` plus an 8-byte tag of the type
    `item` (realloc to max(2 capacity, size + nbytes + 8, 64) when full); the address
    of the new item's bytes. Capacity -1 marks a destroyed stack: a trap."""

    name = "loop.stack_push"
    header = operand_def(i64)
    nbytes = prop_def(IntAttr)
    item = prop_def(StringAttr)
    res = result_def(i64)
    custom_directives = (Int,)
    assembly_format = "$header `nbytes` custom<Int>($nbytes) `item` $item attr-dict"

    def __init__(self, header: SSAValue, nbytes: int, item: str):
        props: dict[str, Attribute] = {"nbytes": IntAttr(nbytes), "item": StringAttr(item)}
        super().__init__(operands=[header], properties=props, result_types=[i64])


@irdl_op_definition
class StackPopOp(IRDLOperation):
    """`loop.stack_pop %header nbytes 4 item "f32"`: shrink the stack by its top item;
    the address of the removed bytes. Traps when the stack is empty or destroyed, or
    when the top item's tag is not `item`'s (it was pushed with another type)."""

    name = "loop.stack_pop"
    header = operand_def(i64)
    nbytes = prop_def(IntAttr)
    item = prop_def(StringAttr)
    res = result_def(i64)
    custom_directives = (Int,)
    assembly_format = "$header `nbytes` custom<Int>($nbytes) `item` $item attr-dict"

    def __init__(self, header: SSAValue, nbytes: int, item: str):
        props: dict[str, Attribute] = {"nbytes": IntAttr(nbytes), "item": StringAttr(item)}
        super().__init__(operands=[header], properties=props, result_types=[i64])


@irdl_op_definition
class ScalarCallOp(IRDLOperation):
    """`loop.scalar_call @f(%a, %b) : (T, T) -> T`: call the loop function `f` whose inputs and
    output are rank-0 buffers with scalars (function combinators of reductions); the
    scalars go through stack slots. A trap in the callee returns at once."""

    name = "loop.scalar_call"
    callee = prop_def(SymbolNameConstraint())
    args = var_operand_def()
    res = result_def()
    assembly_format = "$callee `(` $args `)` attr-dict `:` functional-type($args, $res)"

    def __init__(self, callee: str, args: Sequence[SSAValue], result_type: Attribute):
        super().__init__(
            operands=[list(args)],
            properties={"callee": StringAttr(callee)},
            result_types=[result_type],
        )


MEMORY_OPS: list[type[Operation]] = [
    AddressOp,
    GlobalAddressOp,
    RawLoadOp,
    RawStoreOp,
    RawCopyOp,
    RawCheckOp,
    RawAllocOp,
    RawFreeOp,
    StackAllocOp,
    StackPushOp,
    StackPopOp,
    ScalarCallOp,
]
