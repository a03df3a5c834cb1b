"""`llvm.fcmp` and `llvm.select` on vectors, as MLIR's LLVM dialect has them.

xDSL 0.74 types both ops for scalars only (`fcmp`'s operands `AnyFloat`, its result and
`select`'s condition `i1`), so a lane-wise compare or select that the loop level lowers
(`loop.vcmpf`, `loop.vselect`) would not verify. These subclasses keep the ops' names,
syntax and conversion to LLVM IR (xDSL's converter dispatches on the base classes) and
accept a vector of floats with a vector of `i1` of the same lane count. `LLVM` is xDSL's
dialect with the two ops replaced; dlc's contexts load it as `llvm`.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import AnyFloat, IntegerAttr, IntegerType, VectorType, i1
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.formats import parse_operands_colon


def _lanes(t: Attribute) -> int | None:
    """The lane count of a rank-1 vector type, None for a scalar."""
    if isinstance(t, VectorType):
        shape = t.get_shape()
        return shape[0] if len(shape) == 1 else -1
    return None


def _mask_type(t: Attribute) -> Attribute:
    lanes = _lanes(t)
    return i1 if lanes is None else VectorType(i1, [lanes])


def _check_mask(name: str, mask: Attribute, value: Attribute) -> None:
    """`mask` is i1 for a scalar `value`, or `vector<N x i1>` for N lanes (a scalar i1
    also selects whole vectors)."""
    if mask == i1:
        return
    lanes = _lanes(value)
    if lanes is None or lanes < 0 or mask != VectorType(i1, [lanes]):
        raise VerifyException(f"{name}: mask {mask} does not fit the operands' type {value}")


class FCmpOp(llvm.FCmpOp):
    """`llvm.fcmp` of two floats or two vectors of floats (result i1 or a vector of i1).
    A plain subclass: its `verify_` replaces the scalar-only definition's check."""

    name = "llvm.fcmp"

    def __init__(
        self,
        lhs: Operation | SSAValue,
        rhs: Operation | SSAValue,
        predicate: str | IntegerAttr[IntegerType],
        attributes: dict[str, Attribute] | None = None,
    ):
        if isinstance(predicate, str):
            predicate = IntegerAttr(llvm.FCmpPredicateFlag(predicate).to_int(), 64)
        IRDLOperation.__init__(
            self,
            operands=[lhs, rhs],
            result_types=[_mask_type(SSAValue.get(lhs).type)],
            attributes=attributes or {},
            properties={"predicate": predicate},
        )

    def verify_(self) -> None:
        t = self.lhs.type
        element = t.element_type if isinstance(t, VectorType) else t
        if not isinstance(element, AnyFloat) or _lanes(t) == -1 or self.rhs.type != t:
            raise VerifyException(
                f"llvm.fcmp: operands must be two floats or float vectors of one type, "
                f"not {t} and {self.rhs.type}"
            )
        if self.res.type != _mask_type(t):
            raise VerifyException(f"llvm.fcmp: result {self.res.type} does not fit operands {t}")
        if not 0 <= self.predicate.value.data <= 15:
            raise VerifyException(f"llvm.fcmp: predicate {self.predicate.value.data} out of range")


class SelectOp(llvm.SelectOp):
    """`llvm.select` by an i1, or lane by lane by a vector of i1."""

    name = "llvm.select"

    @classmethod
    def parse(cls, parser: Parser) -> SelectOp:
        """`llvm.select %c, %a, %b attr-dict : type(c), type(a)` (the declarative form
        of the base class would insist on an i1 condition while parsing)."""
        names, attributes = parse_operands_colon(parser, 3)
        mask = parser.parse_type()
        parser.parse_punctuation(",")
        t = parser.parse_type()
        cond, lhs, rhs = parser.resolve_operands(names, [mask, t, t], parser.pos)
        op = cls(cond, lhs, rhs)
        op.attributes.update(attributes)
        return op

    def verify_(self) -> None:
        if self.lhs.type != self.rhs.type or self.res.type != self.lhs.type:
            raise VerifyException(
                f"llvm.select: operands {self.lhs.type}, {self.rhs.type} and result "
                f"{self.res.type} must have one type"
            )
        _check_mask("llvm.select", self.cond.type, self.lhs.type)


_REPLACED: dict[str, type[Operation]] = {op.name: op for op in (FCmpOp, SelectOp)}

LLVM = Dialect(
    "llvm",
    [_REPLACED.get(op.name, op) for op in llvm.LLVM.operations],
    list(llvm.LLVM.attributes),
)

__all__ = ["LLVM", "FCmpOp", "SelectOp"]
