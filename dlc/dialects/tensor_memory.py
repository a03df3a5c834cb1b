"""Memory ops of the `tensor` dialect (DLVM memory, aggregates in memory, bitCast).

Addresses are `i64` scalar tensors (`!graph.tensor<i64>`); a pointer of the graph level
is three of them (address, lower bound, upper bound: see dlc/dialects/layout.py). The
ops have side effects and keep their program order; their results are fresh tensors.

    %p = tensor.heap_alloc %nbytes
    tensor.mem_write %x, %p, %p, %end : !graph.tensor<2xf32>
    %y = tensor.mem_read %p, %p, %end : !graph.tensor<2xf32>
    tensor.heap_free %p
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr, StringAttr, SymbolNameConstraint, UnitAttr
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
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.formats import Int
from dlc.dialects.graph_types import TensorType

I64 = TensorType((), "i64")
"""The type of addresses and sizes."""


@irdl_op_definition
class MemReadOp(IRDLOperation):
    """`tensor.mem_read %addr, %lo, %hi : T`: the bytes at `addr` as a tensor of type T
    (a copy); the access must lie within [lo, hi) (checked in bounds-check builds)."""

    name = "tensor.mem_read"
    addr = operand_def(I64)
    lo = operand_def(I64)
    hi = operand_def(I64)
    result = result_def(TensorType)
    assembly_format = "$addr `,` $lo `,` $hi attr-dict `:` type($result)"

    def __init__(self, addr: SSAValue, lo: SSAValue, hi: SSAValue, result_type: Attribute):
        super().__init__(operands=[addr, lo, hi], result_types=[result_type])


@irdl_op_definition
class MemWriteOp(IRDLOperation):
    """`tensor.mem_write %value, %addr, %lo, %hi : T`: store the bytes of a tensor."""

    name = "tensor.mem_write"
    value = operand_def(TensorType)
    addr = operand_def(I64)
    lo = operand_def(I64)
    hi = operand_def(I64)
    assembly_format = "$value `,` $addr `,` $lo `,` $hi attr-dict `:` type($value)"

    def __init__(self, value: SSAValue, addr: SSAValue, lo: SSAValue, hi: SSAValue):
        super().__init__(operands=[value, addr, lo, hi])


@irdl_op_definition
class MemCopyOp(IRDLOperation):
    """`tensor.mem_copy %dst, %dlo, %dhi, %src, %slo, %shi, %nbytes`: memmove."""

    name = "tensor.mem_copy"
    args = var_operand_def(I64)
    assembly_format = "$args attr-dict"

    def __init__(self, args: Sequence[SSAValue]):
        super().__init__(operands=[list(args)])

    def verify_(self) -> None:
        if len(self.args) != 7:
            raise VerifyException("tensor.mem_copy: expects 7 operands")


@irdl_op_definition
class GlobalAddressOp(IRDLOperation):
    """`tensor.global_address @g size 16`: the address of a module variable's storage
    (`size` zero-initialized bytes owned by the runtime)."""

    name = "tensor.global_address"
    sym_name = prop_def(SymbolNameConstraint())
    size = prop_def(IntAttr)
    result = result_def(I64)
    custom_directives = (Int,)
    assembly_format = "$sym_name `size` custom<Int>($size) attr-dict"

    def __init__(self, name: str, size: int):
        super().__init__(
            properties={"sym_name": StringAttr(name), "size": IntAttr(size)}, result_types=[I64]
        )


@irdl_op_definition
class HeapAllocOp(IRDLOperation):
    """`tensor.heap_alloc %nbytes`: the address of zeroed heap memory (calloc)."""

    name = "tensor.heap_alloc"
    nbytes = operand_def(I64)
    result = result_def(I64)
    assembly_format = "$nbytes attr-dict"

    def __init__(self, nbytes: SSAValue):
        super().__init__(operands=[nbytes], result_types=[I64])


@irdl_op_definition
class HeapFreeOp(IRDLOperation):
    """`tensor.heap_free %addr`: free heap memory (`raw`: memory
    without the heap header of `heap_alloc`, such as a stack's data)."""

    name = "tensor.heap_free"
    addr = operand_def(I64)
    raw = opt_prop_def(UnitAttr)
    assembly_format = "(`raw` $raw^)? $addr attr-dict"

    def __init__(self, addr: SSAValue, *, raw: bool = False):
        super().__init__(operands=[addr], properties={"raw": UnitAttr()} if raw else {})


@irdl_op_definition
class StackAllocOp(IRDLOperation):
    """`tensor.stack_alloc size 16`: the address of zeroed memory of the function's
    frame (one slot per op, reused when executed again), released when the function
    returns."""

    name = "tensor.stack_alloc"
    size = prop_def(IntAttr)
    result = result_def(I64)
    custom_directives = (Int,)
    assembly_format = "`size` custom<Int>($size) attr-dict"

    def __init__(self, size: int):
        super().__init__(properties={"size": IntAttr(size)}, result_types=[I64])


@irdl_op_definition
class BitCastOp(IRDLOperation):
    """`tensor.bitcast %x : T to R`: the same bytes as another tensor type (equal size)."""

    name = "tensor.bitcast"
    source = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"

    def __init__(self, source: SSAValue, result_type: Attribute):
        super().__init__(operands=[source], result_types=[result_type])


@irdl_op_definition
class StackPushOp(IRDLOperation):
    """`tensor.stack_push %header nbytes 4 item "f32"`: reserve `nbytes` at the top of a
    growable stack (header `[data, size, capacity]`, realloc when full) and record the
    item's type above them (a tag of `item`, the type's text); the address of the
    reserved bytes. Pushing to a destroyed stack traps."""

    name = "tensor.stack_push"
    header = operand_def(I64)
    nbytes = prop_def(IntAttr)
    item = prop_def(StringAttr)
    result = result_def(I64)
    custom_directives = (Int,)
    assembly_format = "$header `nbytes` custom<Int>($nbytes) `item` $item attr-dict"

    def __init__(self, header: SSAValue, nbytes: int, item: str):
        props: dict[str, Attribute] = {"nbytes": IntAttr(nbytes), "item": StringAttr(item)}
        super().__init__(operands=[header], properties=props, result_types=[I64])


@irdl_op_definition
class StackPopOp(IRDLOperation):
    """`tensor.stack_pop %header nbytes 4 item "f32"`: drop the top item of a stack; the
    address of its `nbytes` (valid until the next push). The item must have been pushed
    with the same type `item`, else a trap: the bytes of one type are never read back
    as another (a `<3 x i64>` as a pointer). An empty or destroyed stack traps too."""

    name = "tensor.stack_pop"
    header = operand_def(I64)
    nbytes = prop_def(IntAttr)
    item = prop_def(StringAttr)
    result = result_def(I64)
    custom_directives = (Int,)
    assembly_format = "$header `nbytes` custom<Int>($nbytes) `item` $item attr-dict"

    def __init__(self, header: SSAValue, nbytes: int, item: str):
        props: dict[str, Attribute] = {"nbytes": IntAttr(nbytes), "item": StringAttr(item)}
        super().__init__(operands=[header], properties=props, result_types=[I64])


@irdl_op_definition
class IndexCheckOp(IRDLOperation):
    """`tensor.index_check %index count 4 what "key"`: a value key `index` (i64 scalar)
    must lie in [0, count); bounds-check builds raise IndexError naming the op's
    location and `what` otherwise; other builds do nothing (the users clamp).

    `from -4` moves the range to [from, count) (gathers: negative indices count from
    the end); `always` checks in every build (gathers and scatters: an index out of
    range is an error, not undefined behavior)."""

    name = "tensor.index_check"
    index = operand_def(I64)
    count = prop_def(IntAttr)
    lower = opt_prop_def(IntAttr)
    what = prop_def(StringAttr)
    always = opt_prop_def(UnitAttr)
    custom_directives = (Int,)
    assembly_format = (
        "$index `count` custom<Int>($count) (`from` custom<Int>($lower)^)? `what` $what "
        "(`always` $always^)? attr-dict"
    )

    def __init__(
        self, index: SSAValue, count: int, what: str, *, lower: int = 0, always: bool = False
    ):
        props: dict[str, Attribute] = {"count": IntAttr(count), "what": StringAttr(what)}
        if lower:
            props["lower"] = IntAttr(lower)
        if always:
            props["always"] = UnitAttr()
        super().__init__(operands=[index], properties=props)


MEMORY_OPS: list[type[Operation]] = [
    IndexCheckOp,
    MemReadOp,
    MemWriteOp,
    MemCopyOp,
    GlobalAddressOp,
    HeapAllocOp,
    HeapFreeOp,
    StackAllocOp,
    BitCastOp,
    StackPushOp,
    StackPopOp,
]
