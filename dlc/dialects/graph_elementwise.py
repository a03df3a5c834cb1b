"""Element-wise ops of the `graph` dialect: unary, binary, boolean, compare, select, cast.

Type rules (docs/reference/language.md), with DLVM's intent where its code is buggy:
numeric unary ops need a numeric tensor (DLVM accepts bool; dlc does not), binary ops
broadcast (scalar to anything, else equal rank with 1s stretching), compares yield bool,
`select %a, %b by %m` takes `%a` where `%m` is true.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from dlc.dialects.graph_canonicalization import GraphCanonicalization
from dlc.dialects.graph_module import GraphInstruction, InferenceError, Props, Symbols
from dlc.dialects.graph_types import (
    TensorType,
    broadcast_shapes,
    dtype_is_bool,
    dtype_is_float,
    dtype_is_int,
    dtype_is_numeric,
    format_type,
    is_dtype,
)


def tensor_operand(opcode: str, t: Attribute, what: str = "operand") -> TensorType:
    if not isinstance(t, TensorType):
        raise InferenceError(f"{opcode}: {what} must be a tensor, got {format_type(t)}")
    return t


def broadcast_or_fail(opcode: str, lhs: TensorType, rhs: TensorType) -> tuple[int, ...]:
    shape = broadcast_shapes(lhs.dims, rhs.dims)
    if shape is None:
        raise InferenceError(
            f"{opcode}: shapes {format_type(lhs)} and {format_type(rhs)} are not broadcastable"
        )
    return shape


class UnaryOp(GraphInstruction):
    """Base of the numeric unary ops: `exp %x: T` has type T."""

    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    def __init__(self, operand: SSAValue, result_type: Attribute | None = None):
        super().__init__(operands=[operand], result_types=[result_type or operand.type])

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        (t,) = operand_types
        x = tensor_operand(cls.OPCODE, t)
        if cls.OPCODE in INTEGER_UNARY:
            if not dtype_is_numeric(x.dt):
                raise InferenceError(f"{cls.OPCODE}: operand must be numeric, got {format_type(x)}")
        elif not dtype_is_float(x.dt):
            raise InferenceError(
                f"{cls.OPCODE}: operand must be a float tensor, got {format_type(x)}"
            )
        return [x]


# Unary ops defined on integers too; every other unary op needs a float tensor.
INTEGER_UNARY = ("negate", "sign", "square")

_UNARY = (
    "sinh cosh tanh log exp negate sign square sqrt round rsqrt ceil floor tan cos sin "
    "acos asin atan lgamma digamma erf erfc rint"
).split()


def _camel(word: str) -> str:
    return word[0].upper() + word[1:]


def _make_unary(opcode: str) -> type[UnaryOp]:
    cls = type(
        f"{_camel(opcode)}Op",
        (UnaryOp,),
        {
            "name": f"graph.{opcode}",
            "OPCODE": opcode,
            "__annotations__": {"OPCODE": ClassVar[str], "FAMILY": ClassVar[str]},
            "__doc__": f"`{opcode} %x: T` -> T",
        },
    )
    return irdl_op_definition(cls)


UNARY_OPS: dict[str, type[UnaryOp]] = {op: _make_unary(op) for op in _UNARY}


class BinaryOp(GraphInstruction):
    """Base of the binary ops: `add %x: A, %y: B` has the broadcast shape of A and B."""

    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())
    # "numeric", "boolean" or "compare"
    FAMILY: ClassVar[str] = "numeric"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None):
        if result_type is None:
            result_type = type(self).infer([lhs.type, rhs.type], {})[0]
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        lt, rt = operand_types
        lhs = tensor_operand(cls.OPCODE, lt, "lhs")
        rhs = tensor_operand(cls.OPCODE, rt, "rhs")
        if lhs.dt != rhs.dt:
            raise InferenceError(
                f"{cls.OPCODE}: data types differ: {format_type(lhs)} and {format_type(rhs)}"
            )
        if cls.FAMILY == "numeric" and not dtype_is_numeric(lhs.dt):
            raise InferenceError(f"{cls.OPCODE}: operands must be numeric, got {lhs.dt}")
        if cls.FAMILY == "boolean" and not (dtype_is_bool(lhs.dt) or dtype_is_int(lhs.dt)):
            raise InferenceError(f"{cls.OPCODE}: operands must be bool or integers, got {lhs.dt}")
        if cls.FAMILY == "shift" and not dtype_is_int(lhs.dt):
            raise InferenceError(f"{cls.OPCODE}: operands must be integers, got {lhs.dt}")
        if cls.FAMILY == "compare" and not dtype_is_numeric(lhs.dt):
            raise InferenceError(f"{cls.OPCODE}: operands must be numeric, got {lhs.dt}")
        shape = broadcast_or_fail(cls.OPCODE, lhs, rhs)
        return [TensorType(shape, "bool" if cls.FAMILY == "compare" else lhs.dt)]


def _make_binary(opcode: str, family: str) -> type[BinaryOp]:
    cls = type(
        f"{_camel(opcode)}Op",
        (BinaryOp,),
        {
            "name": f"graph.{opcode}",
            "OPCODE": opcode,
            "__annotations__": {"OPCODE": ClassVar[str], "FAMILY": ClassVar[str]},
            "FAMILY": family,
            "__doc__": f"`{opcode} %x, %y` ({family})",
        },
    )
    return irdl_op_definition(cls)


_NUMERIC_BINARY = (
    "add subtract multiply divide min max truncateDivide floorDivide modulo power".split()
)
_COMPARE = "lessThan lessThanOrEqual greaterThan greaterThanOrEqual equal notEqual".split()

BINARY_OPS: dict[str, type[BinaryOp]] = {op: _make_binary(op, "numeric") for op in _NUMERIC_BINARY}
# `and`, `or`, `xor` are logical on bool and bitwise on integers (dlc adds integers and
# `xor`); `shiftLeft` / `shiftRight` (dlc's) shift integers, arithmetically right for
# signed ones; an amount outside [0, width) gives 0 (right: the sign fill), as ONNX's
# BitShift.
for _op in ("and", "or", "xor"):
    BINARY_OPS[_op] = _make_binary(_op, "boolean")
for _op in ("shiftLeft", "shiftRight"):
    BINARY_OPS[_op] = _make_binary(_op, "shift")
COMPARE_OPS: dict[str, type[BinaryOp]] = {op: _make_binary(op, "compare") for op in _COMPARE}
BINARY_OPS.update(COMPARE_OPS)

AddOp = BINARY_OPS["add"]
SubtractOp = BINARY_OPS["subtract"]
MultiplyOp = BINARY_OPS["multiply"]
DivideOp = BINARY_OPS["divide"]
PowerOp = BINARY_OPS["power"]
ExpOp = UNARY_OPS["exp"]
LogOp = UNARY_OPS["log"]
NegateOp = UNARY_OPS["negate"]


@irdl_op_definition
class NotOp(GraphInstruction):
    """`not %m: <… x bool>`: logical not, or bitwise on integers (dlc's addition)."""

    name = "graph.not"
    OPCODE: ClassVar[str] = "not"
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue):
        super().__init__(operands=[operand], result_types=[operand.type])

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("not", operand_types[0])
        if not (dtype_is_bool(x.dt) or dtype_is_int(x.dt)):
            raise InferenceError(f"not: operand must be bool or integer, got {format_type(x)}")
        return [x]


@irdl_op_definition
class SelectOp(GraphInstruction):
    """`select %a, %b by %m`: `%a` where `%m` is true, else `%b` (broadcasting all three)."""

    name = "graph.select"
    OPCODE: ClassVar[str] = "select"
    lhs = operand_def()
    rhs = operand_def()
    mask = operand_def()
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, mask: SSAValue):
        result = self.infer([lhs.type, rhs.type, mask.type], {})[0]
        super().__init__(operands=[lhs, rhs, mask], result_types=[result])

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        lhs = tensor_operand("select", operand_types[0], "lhs")
        rhs = tensor_operand("select", operand_types[1], "rhs")
        mask = tensor_operand("select", operand_types[2], "mask")
        if lhs.dt != rhs.dt:
            raise InferenceError(
                f"select: data types differ: {format_type(lhs)} and {format_type(rhs)}"
            )
        if not dtype_is_bool(mask.dt):
            raise InferenceError(f"select: mask must be bool, got {format_type(mask)}")
        shape = broadcast_or_fail("select", lhs, rhs)
        shape = broadcast_or_fail("select", TensorType(shape, lhs.dt), mask)
        return [TensorType(shape, lhs.dt)]


@irdl_op_definition
class DataTypeCastOp(GraphInstruction):
    """`dataTypeCast %x: <… x f32> to f64`: any data type to any other (DLVM's canCast
    allowed widening within one base; dlc casts across int/float/bool, ONNX's rules):
    floats round to nearest (narrowing included, which the adjoint of a widening float
    cast needs); integers wrap (extended by the source's signedness); int → float
    rounds to nearest; float → int truncates toward zero and saturates at the target's
    range, NaN giving 0; bool → number is 0 or 1; number → bool is `x != 0` (NaN:
    true)."""

    name = "graph.data_type_cast"
    OPCODE: ClassVar[str] = "dataTypeCast"
    operand = operand_def()
    dtype = prop_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    def __init__(self, operand: SSAValue, dtype: str):
        props: Props = {"dtype": StringAttr(dtype)}
        result = self.infer([operand.type], props)[0]
        super().__init__(operands=[operand], result_types=[result], properties=props)

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("dataTypeCast", operand_types[0])
        target = props["dtype"]
        assert isinstance(target, StringAttr)
        to = target.data
        if not is_dtype(to):
            raise InferenceError(f"dataTypeCast: unknown data type {to}")
        return [x.with_dtype(to)]


def is_float_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType) and dtype_is_float(t.dt)


OPS: list[type[Operation]] = [
    *UNARY_OPS.values(),
    *BINARY_OPS.values(),
    NotOp,
    SelectOp,
    DataTypeCastOp,
]
