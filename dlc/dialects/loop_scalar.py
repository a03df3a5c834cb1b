"""Scalar ops of the `loop` dialect that xDSL's `arith` and `math` lack.

%r = loop.remf %a, %b : f32
%e = loop.erfc %x : f64
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import AnyFloatConstr
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    result_def,
)


@irdl_op_definition
class RemFOp(IRDLOperation):
    """`loop.remf %a, %b : f32`: float remainder with the sign of the dividend (C
    `fmod`); xDSL's arith has no remf."""

    name = "loop.remf"
    T: ClassVar = VarConstraint("T", AnyFloatConstr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    res = result_def(T)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($res)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation) -> None:
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])


@irdl_op_definition
class ErfcOp(IRDLOperation):
    """`loop.erfc %x : f32`: the complementary error function `1 - erf(x)` computed
    accurately (libm `erfc`)."""

    name = "loop.erfc"
    T: ClassVar = VarConstraint("T", AnyFloatConstr)
    operand = operand_def(T)
    res = result_def(T)
    assembly_format = "$operand attr-dict `:` type($res)"

    def __init__(self, operand: SSAValue | Operation) -> None:
        super().__init__(operands=[operand], result_types=[SSAValue.get(operand).type])


SCALAR_OPS: list[type[Operation]] = [RemFOp, ErfcOp]
