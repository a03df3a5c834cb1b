"""Calls and aggregate access ops of the `graph` dialect: `apply` (direct and
indirect), `extract`, `insert`, `elementPointer`, and the element-key rules they share.

Element keys (`extract 0, #w from %s`) are stored in the `keys` property: an `IntAttr`
is an index, a `StringAttr` a struct field, and an empty `ArrayAttr` takes the next
value operand of `key_values` (a dynamic index). `pointer_operand` is shared with the
memory ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from dlc.dialects.graph_module import GraphInstruction, InferenceError, Props, Symbols, is_void
from dlc.dialects.graph_types import (
    ArrayType,
    FunctionType,
    NominalType,
    PointerType,
    TensorType,
    TupleType,
    dtype_is_int,
    format_type,
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
    """DLVM's elementType(T, keys), one key at a time (docs/reference/language.md)."""
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


def pointer_operand(opcode: str, t: Attribute) -> PointerType:
    if not isinstance(t, PointerType):
        raise InferenceError(f"{opcode}: operand must be a pointer, got {format_type(t)}")
    return t


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
        ptr = pointer_operand("elementPointer", operand_types[0])
        keys = keys_of(props)
        return [
            PointerType(
                element_type("elementPointer", ptr.pointee, keys, operand_types[1:], symbols)
            )
        ]
