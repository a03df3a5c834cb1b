"""Memory, stack, box and random ops of the `graph` dialect.

Void instructions have no results. Calls and aggregates (`apply`, `extract`, `insert`,
element keys, `elementPointer`) live in `graph_aggregate.py` and are re-exported here so
`graph_memory.ApplyOp` etc. keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from dlc.dialects.graph_aggregate import (
    ApplyIndirectOp,
    ApplyOp,
    ElementPointerOp,
    ExtractOp,
    InsertOp,
    Key,
    element_type,
    keys_of,
    pointer_operand,
)
from dlc.dialects.graph_module import GraphInstruction, InferenceError, Props, Symbols
from dlc.dialects.graph_types import (
    BoxType,
    PointerType,
    StackType,
    TensorType,
    dtype_is_numeric,
    format_type,
    scalar,
)


def _box(opcode: str, t: Attribute) -> BoxType:
    if not isinstance(t, BoxType):
        raise InferenceError(f"{opcode}: operand must be a box, got {format_type(t)}")
    return t


def _stack(opcode: str, t: Attribute) -> None:
    if not isinstance(t, StackType):
        raise InferenceError(f"{opcode}: operand must be a stack, got {format_type(t)}")


def _i64(opcode: str, t: Attribute, what: str) -> None:
    if t != scalar("i64"):
        raise InferenceError(f"{opcode}: {what} must be i64, got {format_type(t)}")


@irdl_op_definition
class CreateStackOp(GraphInstruction):
    """`createStack` -> stack"""

    name = "graph.create_stack"
    OPCODE: ClassVar[str] = "createStack"
    result = result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        return [StackType()]


@irdl_op_definition
class DestroyStackOp(GraphInstruction):
    """`destroyStack %s: stack`"""

    name = "graph.destroy_stack"
    OPCODE: ClassVar[str] = "destroyStack"
    stack = operand_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        _stack("destroyStack", operand_types[0])
        return []


@irdl_op_definition
class PushOp(GraphInstruction):
    """`push %v: T to %s: stack`"""

    name = "graph.push"
    OPCODE: ClassVar[str] = "push"
    value = operand_def()
    stack = operand_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        _stack("push", operand_types[1])
        return []


@irdl_op_definition
class PopOp(GraphInstruction):
    """`pop T from %s: stack` -> T"""

    name = "graph.pop"
    OPCODE: ClassVar[str] = "pop"
    stack = operand_def()
    elem_type = prop_def(Attribute)
    result = result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        _stack("pop", operand_types[0])
        return [props["elem_type"]]


@irdl_op_definition
class AllocateStackOp(GraphInstruction):
    """`allocateStack T count 4` -> *T"""

    name = "graph.allocate_stack"
    OPCODE: ClassVar[str] = "allocateStack"
    elem_type = prop_def(Attribute)
    count = prop_def(IntAttr)
    result = result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        count = props["count"]
        assert isinstance(count, IntAttr)
        if count.data <= 0:
            raise InferenceError(f"allocateStack: count must be positive, got {count.data}")
        return [PointerType(props["elem_type"])]


@irdl_op_definition
class AllocateHeapOp(GraphInstruction):
    """`allocateHeap T count %n: i64` -> *T"""

    name = "graph.allocate_heap"
    OPCODE: ClassVar[str] = "allocateHeap"
    count = operand_def()
    elem_type = prop_def(Attribute)
    result = result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        _i64("allocateHeap", operand_types[0], "count")
        return [PointerType(props["elem_type"])]


@irdl_op_definition
class AllocateBoxOp(GraphInstruction):
    """`allocateBox T` -> box{T}"""

    name = "graph.allocate_box"
    OPCODE: ClassVar[str] = "allocateBox"
    elem_type = prop_def(Attribute)
    result = result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        return [BoxType(props["elem_type"])]


@irdl_op_definition
class ProjectBoxOp(GraphInstruction):
    """`projectBox %b: box{T}` -> *T"""

    name = "graph.project_box"
    OPCODE: ClassVar[str] = "projectBox"
    box = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        return [PointerType(_box("projectBox", operand_types[0]).element)]


class _BoxEffectOp(GraphInstruction):
    box = operand_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        _box(cls.OPCODE, operand_types[0])
        return []


@irdl_op_definition
class RetainOp(_BoxEffectOp):
    """`retain %b: box{T}`"""

    name = "graph.retain"
    OPCODE: ClassVar[str] = "retain"


@irdl_op_definition
class ReleaseOp(_BoxEffectOp):
    """`release %b: box{T}`"""

    name = "graph.release"
    OPCODE: ClassVar[str] = "release"


@irdl_op_definition
class DeallocateOp(GraphInstruction):
    """`deallocate %p: *T` (or a box)"""

    name = "graph.deallocate"
    OPCODE: ClassVar[str] = "deallocate"
    pointer = operand_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        if not isinstance(operand_types[0], PointerType | BoxType):
            raise InferenceError(
                f"deallocate: operand must be a pointer or box, got {format_type(operand_types[0])}"
            )
        return []


@irdl_op_definition
class LoadOp(GraphInstruction):
    """`load %p: *T` -> T"""

    name = "graph.load"
    OPCODE: ClassVar[str] = "load"
    pointer = operand_def()
    result = result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        return [pointer_operand("load", operand_types[0]).pointee]


@irdl_op_definition
class StoreOp(GraphInstruction):
    """`store %v: T to %p: *T`"""

    name = "graph.store"
    OPCODE: ClassVar[str] = "store"
    value = operand_def()
    pointer = operand_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        ptr = pointer_operand("store", operand_types[1])
        if ptr.pointee != operand_types[0]:
            raise InferenceError(
                f"store: cannot store {format_type(operand_types[0])} to {format_type(ptr)}"
            )
        return []


@irdl_op_definition
class CopyOp(GraphInstruction):
    """`copy from %p: *T to %q: *T count %n: i64`"""

    name = "graph.copy"
    OPCODE: ClassVar[str] = "copy"
    source = operand_def()
    dest = operand_def()
    count = operand_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        src, dst, count = operand_types
        _i64("copy", count, "count")
        same = src == dst and isinstance(src, PointerType | BoxType)
        if not same:
            raise InferenceError(
                f"copy: operands {format_type(src)} and {format_type(dst)} must be equal pointer types"
            )
        return []


@irdl_op_definition
class TrapOp(GraphInstruction):
    """`trap`: aborts the call (a Python exception from compiled code)."""

    name = "graph.trap"
    OPCODE: ClassVar[str] = "trap"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        return []


@irdl_op_definition
class RandomOp(GraphInstruction):
    """`random 2 x 3 from %lo: f32 upto %hi: f32` -> <2 x 3 x f32> (uniform in [lo, hi))."""

    name = "graph.random"
    OPCODE: ClassVar[str] = "random"
    low = operand_def()
    high = operand_def()
    shape = prop_def(ArrayAttr[IntAttr])
    result = result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        lo, hi = operand_types
        if not (isinstance(lo, TensorType) and lo.is_scalar) or not (
            isinstance(hi, TensorType) and hi.is_scalar
        ):
            raise InferenceError("random: bounds must be scalars")
        if lo != hi:
            raise InferenceError(
                f"random: bounds differ in type: {format_type(lo)} and {format_type(hi)}"
            )
        if not dtype_is_numeric(lo.dt):
            raise InferenceError(f"random: bounds must be numeric, got {lo.dt}")
        shape = props["shape"]
        assert isinstance(shape, ArrayAttr)
        return [TensorType([d.data for d in shape.data], lo.dt)]


OPS: list[type[Operation]] = [
    ExtractOp,
    InsertOp,
    ApplyOp,
    ApplyIndirectOp,
    CreateStackOp,
    DestroyStackOp,
    PushOp,
    PopOp,
    AllocateStackOp,
    AllocateHeapOp,
    AllocateBoxOp,
    ProjectBoxOp,
    RetainOp,
    ReleaseOp,
    DeallocateOp,
    LoadOp,
    StoreOp,
    ElementPointerOp,
    CopyOp,
    TrapOp,
    RandomOp,
]

__all__ = [
    "ApplyIndirectOp",
    "ApplyOp",
    "ElementPointerOp",
    "ExtractOp",
    "InsertOp",
    "Key",
    "element_type",
    "keys_of",
]
