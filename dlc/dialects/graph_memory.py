"""Calls, aggregates, memory, stack, box and random ops of the `graph` dialect.

Element keys (`extract 0, #w from %s`) are stored in the `keys` property: an `IntAttr`
is an index, a `StringAttr` a struct field, and an empty `ArrayAttr` takes the next
value operand of `key_values` (a dynamic index). Void instructions have no results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_op_definition,
    operand_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from dlc.dialects.graph import GraphInstruction, InferenceError, Props, Symbols, is_void
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    dtype_is_int,
    dtype_is_numeric,
    format_type,
    scalar,
)

Key = int | str | None  # index, field, dynamic (value operand)


def keys_of(props: Props) -> list[Key]:
    attr = props["keys"]
    assert isinstance(attr, ArrayAttr)
    out: list[Key] = []
    for k in attr.data:
        if isinstance(k, IntAttr):
            out.append(k.data)
        elif isinstance(k, StringAttr):
            out.append(k.data)
        else:
            out.append(None)
    return out


def element_type(
    opcode: str,
    container: Attribute,
    keys: Sequence[Key],
    key_types: Sequence[Attribute],
    symbols: Symbols | None,
) -> Attribute:
    """DLVM's elementType(T, keys), one key at a time (shared/DLVM.md §2.1)."""
    if not keys:
        raise InferenceError(f"{opcode}: needs at least one key")
    dynamic = iter(key_types)
    t = container
    for key in keys:
        if key is None:
            kt = next(dynamic)
            if not (isinstance(kt, TensorType) and kt.is_scalar and dtype_is_int(kt.dt)):
                raise InferenceError(
                    f"{opcode}: a value key must be an integer scalar, got {format_type(kt)}"
                )
        t = _element_step(opcode, t, key, symbols)
    return t


def _element_step(opcode: str, t: Attribute, key: Key, symbols: Symbols | None) -> Attribute:
    bad = InferenceError(f"{opcode}: key {_key_text(key)} does not index into {format_type(t)}")
    if isinstance(key, str):
        if not (isinstance(t, NominalType) and t.kind.data == "struct" and symbols is not None):
            raise bad
        for name, ft in symbols.structs.get(t.ident, []):
            if name == key:
                return ft
        raise bad
    if isinstance(t, PointerType):
        return t.pointee
    if isinstance(t, TupleType):
        if key is None or not 0 <= key < len(t.types):
            raise bad
        return t.types[key]
    if isinstance(t, ArrayType):
        if key is not None and not 0 <= key < t.count.data:
            raise bad
        return t.element
    if isinstance(t, TensorType) and t.rank >= 1:
        if key is not None and not 0 <= key < t.dims[0]:
            raise bad
        return t.with_shape(t.dims[1:])
    raise bad


def _key_text(key: Key) -> str:
    if key is None:
        return "(value)"
    return f"#{key}" if isinstance(key, str) else str(key)


@irdl_op_definition
class ExtractOp(GraphInstruction):
    """`extract 0, #w from %x: T`"""

    name = "graph.extract"
    OPCODE: ClassVar[str] = "extract"
    NEEDS_SYMBOLS: ClassVar[bool] = True
    operand = operand_def()
    key_values = var_operand_def()
    keys = prop_def(ArrayAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        return [
            element_type("extract", operand_types[0], keys_of(props), operand_types[1:], symbols)
        ]


@irdl_op_definition
class InsertOp(GraphInstruction):
    """`insert %v: E to %x: T at 0, #w` -> T"""

    name = "graph.insert"
    OPCODE: ClassVar[str] = "insert"
    NEEDS_SYMBOLS: ClassVar[bool] = True
    source = operand_def()
    dest = operand_def()
    key_values = var_operand_def()
    keys = prop_def(ArrayAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        value, dest = operand_types[0], operand_types[1]
        elem = element_type("insert", dest, keys_of(props), operand_types[2:], symbols)
        if elem != value:
            raise InferenceError(
                f"insert: value of type {format_type(value)} does not match element type {format_type(elem)}"
            )
        return [dest]


@irdl_op_definition
class ApplyOp(GraphInstruction):
    """`apply @f(%a: A, …): (A, …) -> R` (a direct call)."""

    name = "graph.apply"
    OPCODE: ClassVar[str] = "apply"
    NEEDS_SYMBOLS: ClassVar[bool] = True
    args = var_operand_def()
    callee = prop_def(StringAttr)
    callee_type = prop_def(FunctionType)
    result = opt_result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        fn = props["callee_type"]
        callee = props["callee"]
        assert isinstance(fn, FunctionType) and isinstance(callee, StringAttr)
        if symbols is not None:
            real = symbols.functions.get(callee.data)
            if real is None:
                raise InferenceError(f"apply: @{callee.data} is not a function")
            if real != fn:
                raise InferenceError(
                    f"apply: @{callee.data} has type {format_type(real)}, not {format_type(fn)}"
                )
        return _call_result("apply", fn, operand_types)


def _call_result(opcode: str, fn: FunctionType, arg_types: Sequence[Attribute]) -> list[Attribute]:
    if list(arg_types) != list(fn.args):
        got = ", ".join(format_type(t) for t in arg_types)
        raise InferenceError(f"{opcode}: arguments ({got}) do not match {format_type(fn)}")
    return [] if is_void(fn.output) else [fn.output]


@irdl_op_definition
class ApplyIndirectOp(GraphInstruction):
    """`apply %fp(%a: A): *(A) -> R`: a call through a function value or pointer."""

    name = "graph.apply_indirect"
    OPCODE: ClassVar[str] = "apply"
    callee = operand_def()
    args = var_operand_def()
    result = opt_result_def()

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        fn = operand_types[0]
        if isinstance(fn, PointerType):
            fn = fn.pointee
        if not isinstance(fn, FunctionType):
            raise InferenceError(
                f"apply: callee of type {format_type(operand_types[0])} is not a function"
            )
        return _call_result("apply", fn, operand_types[1:])


def _pointer(opcode: str, t: Attribute) -> PointerType:
    if not isinstance(t, PointerType):
        raise InferenceError(f"{opcode}: operand must be a pointer, got {format_type(t)}")
    return t


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
        return [_pointer("load", operand_types[0]).pointee]


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
        ptr = _pointer("store", operand_types[1])
        if ptr.pointee != operand_types[0]:
            raise InferenceError(
                f"store: cannot store {format_type(operand_types[0])} to {format_type(ptr)}"
            )
        return []


@irdl_op_definition
class ElementPointerOp(GraphInstruction):
    """`elementPointer %p: *T at 0, #w` -> *elementType(T, keys)"""

    name = "graph.element_pointer"
    OPCODE: ClassVar[str] = "elementPointer"
    NEEDS_SYMBOLS: ClassVar[bool] = True
    pointer = operand_def()
    key_values = var_operand_def()
    keys = prop_def(ArrayAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        ptr = _pointer("elementPointer", operand_types[0])
        keys = keys_of(props)
        return [
            PointerType(
                element_type("elementPointer", ptr.pointee, keys, operand_types[1:], symbols)
            )
        ]


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
        return [TensorType([d.data for d in shape.data], lo.dt)]  # type: ignore[union-attr]


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

__all__ = ["AttrSizedOperandSegments"]
