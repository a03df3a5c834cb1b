"""Vector ops of the `loop` dialect: whole SIMD registers of a buffer's elements.

`loop.vload` reads W consecutive elements along a buffer's last dimension, starting
at an index; `loop.vstore` writes them; `loop.broadcast` copies a scalar into every
lane; `loop.shuffle` picks lanes of two vectors into a new one (a narrower piece of a
vector, or pieces put together); `loop.vcmpf` compares two float vectors lane by lane
(a `vector<W x i1>`: xDSL's `arith.cmpf` only gives one i1) and `loop.vselect` picks
lanes by such a mask (`arith.select` takes one i1 for the whole vector). Other
arithmetic on vectors is `arith`/`math` on `vector<W x T>` values. The nest builder
emits these where a schedule vectorizes a register tile (`vectorize`) or its
epilogue, `math-approx` in its vector expansions.

    %b = loop.vload %w[%k, %j] : memref<64x64xf32> -> vector<16xf32>
    %a = loop.broadcast %s : f32 -> vector<16xf32>
    loop.vstore %acc, %out[%i, %j] : vector<16xf32>, memref<64x64xf32>
    %p = loop.shuffle %acc, %acc [8, 9, 10, 11] : vector<16xf32> -> vector<4xf32>
    %m = loop.vcmpf olt, %a, %b : vector<16xf32>
    %r = loop.vselect %m, %a, %b : vector<16xf32>
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, MemRefType, VectorType, i1, i32, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.formats import parse_operands_colon
from dlc.dialects.loop_buffer import check_indices


def _check_vector(value_type: Attribute, mtype: MemRefType, what: str) -> None:
    if (
        not isinstance(value_type, VectorType)
        or len(value_type.get_shape()) != 1
        or value_type.element_type != mtype.element_type
    ):
        raise VerifyException(
            f"{what}: expected a 1-D vector of {mtype.element_type}, got {value_type}"
        )
    if len(mtype.get_shape()) == 0:
        raise VerifyException(f"{what}: a vector access needs a buffer of rank >= 1")


@irdl_op_definition
class VLoadOp(IRDLOperation):
    """`loop.vload %buf[%i, %j] : memref<...> -> vector<W x T>`: the W elements
    `buf[i, j .. j + W - 1]` (the last index walks; it must stay in bounds)."""

    name = "loop.vload"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(i64)
    res = result_def(VectorType)
    assembly_format = "$buffer `[` $indices `]` attr-dict `:` type($buffer) `->` type($res)"

    def __init__(
        self, buffer: SSAValue | Operation, indices: Sequence[SSAValue | Operation], lanes: int
    ) -> None:
        mtype = SSAValue.get(buffer).type
        assert isinstance(mtype, MemRefType)
        vtype = VectorType(mtype.element_type, [lanes])
        super().__init__(operands=[buffer, list(indices)], result_types=[vtype])

    def verify_(self) -> None:
        mtype = check_indices(self.buffer, self.indices, self.name)
        _check_vector(self.res.type, mtype, self.name)


@irdl_op_definition
class VStoreOp(IRDLOperation):
    """`loop.vstore %v, %buf[%i, %j] : vector<W x T>, memref<...>`: writes the W lanes
    to `buf[i, j .. j + W - 1]`."""

    name = "loop.vstore"
    value = operand_def(VectorType)
    buffer = operand_def(MemRefType)
    indices = var_operand_def(i64)
    assembly_format = (
        "$value `,` $buffer `[` $indices `]` attr-dict `:` type($value) `,` type($buffer)"
    )

    def __init__(
        self,
        value: SSAValue | Operation,
        buffer: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
    ) -> None:
        super().__init__(operands=[value, buffer, list(indices)])

    def verify_(self) -> None:
        mtype = check_indices(self.buffer, self.indices, self.name)
        _check_vector(self.value.type, mtype, self.name)


@irdl_op_definition
class BroadcastOp(IRDLOperation):
    """`loop.broadcast %s : T -> vector<W x T>`: `s` in every lane."""

    name = "loop.broadcast"
    source = operand_def()
    res = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `->` type($res)"

    def __init__(self, source: SSAValue | Operation, lanes: int) -> None:
        scalar = SSAValue.get(source).type
        super().__init__(operands=[source], result_types=[VectorType(scalar, [lanes])])

    def verify_(self) -> None:
        vtype = self.res.type
        assert isinstance(vtype, VectorType)
        if vtype.element_type != self.source.type or len(vtype.get_shape()) != 1:
            raise VerifyException(f"{self.name}: {self.source.type} cannot fill {vtype}")


@irdl_op_definition
class ShuffleOp(IRDLOperation):
    """`loop.shuffle %a, %b [m0, m1, ...] : vector<W x T> -> vector<M x T>`: lane `i`
    of the result is lane `m_i` of `a ++ b` (LLVM's `shufflevector`; both operands
    have one type, each `m_i` is below 2 W)."""

    name = "loop.shuffle"
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    mask = prop_def(DenseArrayBase)
    res = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(
        self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, mask: Sequence[int]
    ) -> None:
        vtype = SSAValue.get(lhs).type
        assert isinstance(vtype, VectorType)
        result = VectorType(vtype.element_type, [len(mask)])
        super().__init__(
            operands=[lhs, rhs],
            result_types=[result],
            properties={"mask": DenseArrayBase.from_list(i32, list(mask))},
        )

    def verify_(self) -> None:
        vtype = self.lhs.type
        assert isinstance(vtype, VectorType) and isinstance(self.res.type, VectorType)
        if self.rhs.type != vtype or self.res.type.element_type != vtype.element_type:
            raise VerifyException(f"{self.name}: operands and result must be vectors of one type")
        lanes = 2 * vtype.get_shape()[0]
        mask = self.mask.get_values()
        if len(mask) != self.res.type.get_shape()[0] or any(not 0 <= m < lanes for m in mask):
            raise VerifyException(f"{self.name}: each mask entry must be in [0, {lanes})")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_string(f" [{', '.join(map(str, self.mask.get_values()))}]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.res.type)

    @classmethod
    def parse(cls, parser: Parser) -> ShuffleOp:
        start = parser.pos
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        square = parser.Delimiter.SQUARE
        mask = parser.parse_comma_separated_list(square, lambda: parser.parse_integer(False))
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        vtype = parser.parse_type()
        parser.parse_punctuation("->")
        end = parser.pos
        result = parser.parse_type()
        a, b = parser.resolve_operands([lhs, rhs], [vtype, vtype], parser.pos)
        op = cls(a, b, mask)
        op.attributes.update(attrs)
        if op.res.type != result:
            message = f"loop.shuffle: the result of {len(mask)} lanes is {op.res.type}"
            parser.raise_error(message, start, end)
        return op


CMPF_PREDICATES = (
    *("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord"),
    *("ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true"),
)
"""`arith.cmpf`'s predicates by number (LLVM's `fcmp` numbering)."""


def _mask_type(vtype: Attribute) -> VectorType:
    assert isinstance(vtype, VectorType)
    return VectorType(i1, vtype.get_shape())


@irdl_op_definition
class VCmpfOp(IRDLOperation):
    """`loop.vcmpf olt, %a, %b : vector<W x T>`: lane `i` of the `vector<W x i1>`
    result is `a[i] olt b[i]` (`arith.cmpf`'s predicates, lane by lane)."""

    name = "loop.vcmpf"
    predicate = prop_def(IntegerAttr)
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    res = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, predicate: str, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        vtype = SSAValue.get(lhs).type
        super().__init__(
            operands=[lhs, rhs],
            result_types=[_mask_type(vtype)],
            properties={"predicate": IntegerAttr(CMPF_PREDICATES.index(predicate), i64)},
        )

    @property
    def predicate_name(self) -> str:
        return CMPF_PREDICATES[self.predicate.value.data]

    def verify_(self) -> None:
        vtype = self.lhs.type
        if self.rhs.type != vtype or self.res.type != _mask_type(vtype):
            raise VerifyException(
                f"{self.name}: operands must be one vector type and the result its i1 mask"
            )
        if not 0 <= self.predicate.value.data < len(CMPF_PREDICATES):
            raise VerifyException(f"{self.name}: unknown predicate {self.predicate.value.data}")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.predicate_name}, ")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)

    @classmethod
    def parse(cls, parser: Parser) -> VCmpfOp:
        start = parser.pos
        predicate = parser.parse_identifier()
        if predicate not in CMPF_PREDICATES:
            parser.raise_error(f"loop.vcmpf: unknown predicate {predicate!r}", start, parser.pos)
        parser.parse_punctuation(",")
        (lhs, rhs), attrs = parse_operands_colon(parser, 2)
        vtype = parser.parse_type()
        a, b = parser.resolve_operands([lhs, rhs], [vtype, vtype], parser.pos)
        op = cls(predicate, a, b)
        op.attributes.update(attrs)
        return op


@irdl_op_definition
class VSelectOp(IRDLOperation):
    """`loop.vselect %m, %a, %b : vector<W x T>`: lane `i` is `a[i]` where `m[i]`
    (a `vector<W x i1>`), else `b[i]`."""

    name = "loop.vselect"
    mask = operand_def(VectorType)
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    res = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(
        self, mask: SSAValue | Operation, lhs: SSAValue | Operation, rhs: SSAValue | Operation
    ):
        super().__init__(operands=[mask, lhs, rhs], result_types=[SSAValue.get(lhs).type])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)

    @classmethod
    def parse(cls, parser: Parser) -> VSelectOp:
        unresolved, attrs = parse_operands_colon(parser, 3)
        start = parser.pos
        vtype = parser.parse_type()
        if not isinstance(vtype, VectorType):
            parser.raise_error(
                f"loop.vselect: expected a vector type, got {vtype}", start, parser.pos
            )
        types = [_mask_type(vtype), vtype, vtype]
        mask, a, b = parser.resolve_operands(unresolved, types, parser.pos)
        op = cls(mask, a, b)
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        vtype = self.lhs.type
        if self.rhs.type != vtype or self.res.type != vtype:
            raise VerifyException(f"{self.name}: both choices and the result need one type")
        if self.mask.type != _mask_type(vtype):
            raise VerifyException(f"{self.name}: the mask must be {_mask_type(vtype)}")


VECTOR_OPS: list[type[Operation]] = [VLoadOp, VStoreOp, BroadcastOp, ShuffleOp, VCmpfOp, VSelectOp]
