"""Buffer ops of the `loop` dialect: element loads and stores, allocation and copies of
builtin `memref` buffers (static shapes, row-major, `i64` indices).

    %buf = loop.alloc : memref<4x8xf32>
    %v = loop.load %x[%i, %j] : memref<4x8xf32>
    loop.store %v, %buf[%i, %j] : memref<4x8xf32>
    loop.copy %buf to %out : memref<4x8xf32> to memref<32xf32>
    loop.dealloc %buf : memref<4x8xf32>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseIntOrFPElementsAttr, IntAttr, MemRefType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.formats import Int


def memref_type(value: SSAValue, what: str) -> MemRefType:
    """The memref type of `value`; a verifier error naming `what` otherwise."""
    if not isinstance(value.type, MemRefType):
        raise VerifyException(f"{what}: expected a memref, got {value.type}")
    return value.type


def check_indices(buffer: SSAValue, indices: Sequence[SSAValue], what: str) -> MemRefType:
    """The memref type of `buffer`, indexed by `indices` (one per dimension)."""
    mtype = memref_type(buffer, what)
    rank = len(mtype.get_shape())
    if len(indices) != rank:
        raise VerifyException(f"{what}: {len(indices)} indices for a rank-{rank} memref {mtype}")
    return mtype


def _element_count(mtype: MemRefType) -> int:
    count = 1
    for dim in mtype.get_shape():
        count *= dim
    return count


@irdl_op_definition
class LoadOp(IRDLOperation):
    """`loop.load %buf[%i, %j] : memref<...>`: one element (row-major, i64 indices)."""

    name = "loop.load"
    T: ClassVar = VarConstraint("T", AnyAttr())
    buffer = operand_def(MemRefType.constr(T))
    indices = var_operand_def(i64)
    res = result_def(T)
    assembly_format = "$buffer `[` $indices `]` attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue | Operation, indices: Sequence[SSAValue | Operation]):
        mtype = SSAValue.get(buffer).type
        assert isinstance(mtype, MemRefType)
        super().__init__(operands=[buffer, list(indices)], result_types=[mtype.element_type])

    def verify_(self) -> None:
        check_indices(self.buffer, self.indices, "loop.load")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """`loop.store %v, %buf[%i, %j] : memref<...>`: `buffer[indices] = value`."""

    name = "loop.store"
    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    buffer = operand_def(MemRefType.constr(T))
    indices = var_operand_def(i64)
    assembly_format = "$value `,` $buffer `[` $indices `]` attr-dict `:` type($buffer)"

    def __init__(
        self,
        value: SSAValue | Operation,
        buffer: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
    ) -> None:
        super().__init__(operands=[value, buffer, list(indices)])

    def verify_(self) -> None:
        check_indices(self.buffer, self.indices, "loop.store")


@irdl_op_definition
class AllocOp(IRDLOperation):
    """`loop.alloc [align 128] : memref<...>`: a fresh intermediate buffer (aligned to
    `align` bytes, 64 unless printed); freed by `loop.dealloc`."""

    name = "loop.alloc"
    res = result_def(MemRefType)
    align = prop_def(IntAttr, default_value=IntAttr(64))
    custom_directives = (Int,)
    assembly_format = "(`align` custom<Int>($align)^)? attr-dict `:` type($res)"

    def __init__(self, mtype: MemRefType, align: int = 64) -> None:
        super().__init__(result_types=[mtype], properties={"align": IntAttr(align)})


@irdl_op_definition
class AllocSizedOp(IRDLOperation):
    """`loop.alloc_sized %count : memref<?xf32>`: a fresh buffer of `count` elements,
    a number known only at run time (symbolic dimensions), from the heap (64-byte
    aligned); freed by `loop.dealloc`."""

    name = "loop.alloc_sized"
    count = operand_def(i64)
    res = result_def(MemRefType)
    assembly_format = "$count attr-dict `:` type($res)"

    def __init__(self, count: SSAValue | Operation, mtype: MemRefType) -> None:
        super().__init__(operands=[count], result_types=[mtype])

    def verify_(self) -> None:
        if self.res.type.get_shape() != (DYNAMIC_INDEX,):
            raise VerifyException(f"loop.alloc_sized: expected a memref<?xT>, got {self.res.type}")


@irdl_op_definition
class DeallocOp(IRDLOperation):
    """`loop.dealloc %buf : memref<...>`: frees a buffer made by `loop.alloc`."""

    name = "loop.dealloc"
    buffer = operand_def(MemRefType)
    assembly_format = "$buffer attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue | Operation) -> None:
        super().__init__(operands=[buffer])


@irdl_op_definition
class CopyOp(IRDLOperation):
    """`loop.copy %src to %dst : memref<...> to memref<...>`: flat byte copy (same
    element type and element count)."""

    name = "loop.copy"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$source `to` $dest attr-dict `:` type($source) `to` type($dest)"

    def __init__(self, source: SSAValue | Operation, dest: SSAValue | Operation) -> None:
        super().__init__(operands=[source, dest])

    def verify_(self) -> None:
        src, dst = memref_type(self.source, "loop.copy"), memref_type(self.dest, "loop.copy")
        if src.element_type != dst.element_type or _element_count(src) != _element_count(dst):
            raise VerifyException(f"loop.copy: {src} and {dst} differ in element type or count")


def _check_data(
    value: DenseIntOrFPElementsAttr, buffer: SSAValue, name: str, relation: str
) -> None:
    """Literal data of `name` has the element type and shape of the memref `buffer`."""
    mtype = memref_type(buffer, name)
    data = value.get_element_type()
    if data != mtype.element_type or value.get_shape() != mtype.get_shape():
        raise VerifyException(
            f"{name}: data of {data} with shape {value.get_shape()} {relation} {mtype}"
        )


@irdl_op_definition
class ConstCopyOp(IRDLOperation):
    """`loop.const_copy dense<...> : tensor<...> to %dst : memref<...>`: fill a buffer
    with literal data, which the code generator keeps as read-only data of the object
    file and copies (one store per element compiled too slowly: a 128 x 128 weight took
    ~27 s, a 1024 x 1024 one did not finish)."""

    name = "loop.const_copy"
    value = prop_def(DenseIntOrFPElementsAttr)
    dest = operand_def(MemRefType)
    assembly_format = "$value `to` $dest attr-dict `:` type($dest)"

    def __init__(self, value: DenseIntOrFPElementsAttr, dest: SSAValue | Operation) -> None:
        super().__init__(operands=[dest], properties={"value": value})

    def verify_(self) -> None:
        _check_data(self.value, self.dest, "loop.const_copy", "does not fill")


@irdl_op_definition
class ConstBufferOp(IRDLOperation):
    """`%w = loop.const_buffer dense<...> : tensor<...> : memref<...>`: a read-only
    buffer holding literal data (read-only data of the object file, nothing copied);
    only for values that nothing writes (`lower-tensor-to-loop` uses it for the
    large literals of straight-line functions)."""

    name = "loop.const_buffer"
    value = prop_def(DenseIntOrFPElementsAttr)
    res = result_def(MemRefType)
    assembly_format = "$value attr-dict `:` type($res)"
    traits = traits_def(Pure())

    def __init__(self, value: DenseIntOrFPElementsAttr, result_type: MemRefType) -> None:
        super().__init__(result_types=[result_type], properties={"value": value})

    def verify_(self) -> None:
        _check_data(self.value, self.res, "loop.const_buffer", "is not a")


BUFFER_OPS: list[type[Operation]] = [
    LoadOp,
    StoreOp,
    AllocOp,
    AllocSizedOp,
    DeallocOp,
    CopyOp,
    ConstCopyOp,
    ConstBufferOp,
]
