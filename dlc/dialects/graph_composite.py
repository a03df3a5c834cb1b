"""Einsum and top-k ops of the `graph` dialect (dlc's additions to DLVM, ONNX's Einsum
and TopK semantics). They are composites: the `decompose-composites` pass rewrites them
into DLVM ops before code generation (einsum into transposes, reshapes and `dot`s;
top-k into ranks by comparison and a gather).

    %c = einsum "bij,bjk->bik" %a: <8 x 2 x 3 x f32>, %b: <8 x 3 x 4 x f32>
    %v = topK %x: <3 x 10 x f32> count 2 along 1
    %i = topKIndices %x: <3 x 10 x f32> count 2 along 1 smallest

An einsum equation names each operand's dimensions with letters, one term per operand
(a letter repeated in a term takes that term's diagonal), and after `->` the result's;
letters missing from the result are summed over. `topK` gives the `count` largest
(`smallest`: least) elements along an axis, in order, and `topKIndices` their i64
positions; equal elements keep their order (the lower index first) and NaN counts as
larger than every number (onnx's reference, NumPy's sort order).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IntAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from dlc.dialects.graph_elementwise import tensor_operand
from dlc.dialects.graph_module import GraphInstruction, InferenceError, Props, Symbols
from dlc.dialects.graph_props import int_prop
from dlc.dialects.graph_types import TensorType, dtype_is_numeric, format_type

EQUATION = re.compile(r"[A-Za-z]*(,[A-Za-z]*)*->[A-Za-z]*")


def parse_equation(equation: str) -> tuple[list[str], str]:
    """(operand terms, result term) of an explicit equation `ij,jk->ik`."""
    if not EQUATION.fullmatch(equation):
        raise InferenceError(
            f"einsum: malformed equation '{equation}' (terms of letters separated by ',', "
            "then '->' and the result's letters)"
        )
    inputs, output = equation.split("->")
    return inputs.split(","), output


def letter_sizes(terms: Sequence[str], operands: Sequence[TensorType]) -> dict[str, int]:
    """The size of each letter, checked to agree everywhere it appears."""
    sizes: dict[str, int] = {}
    for term, t in zip(terms, operands, strict=True):
        if len(term) != t.rank:
            raise InferenceError(f"einsum: term '{term}' does not fit {format_type(t)}")
        for letter, dim in zip(term, t.dims, strict=True):
            if sizes.setdefault(letter, dim) != dim:
                raise InferenceError(
                    f"einsum: index '{letter}' is {sizes[letter]} in one place and {dim} in another"
                )
    return sizes


@irdl_op_definition
class EinsumOp(GraphInstruction):
    """`einsum "eq" %a: A, %b: B, …`: Einstein summation over the operands (ONNX
    Einsum with an explicit result, ellipses spelled out as letters)."""

    name = "graph.einsum"
    OPCODE: ClassVar[str] = "einsum"
    inputs = var_operand_def()
    equation = prop_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        operands = [tensor_operand("einsum", t) for t in operand_types]
        equation = props["equation"]
        assert isinstance(equation, StringAttr)
        terms, output = parse_equation(equation.data)
        if len(terms) != len(operands) or not operands:
            raise InferenceError(f"einsum: {len(terms)} terms for {len(operands)} operands")
        dt = operands[0].dt
        if any(t.dt != dt for t in operands) or not dtype_is_numeric(dt):
            kinds = ", ".join(format_type(t) for t in operands)
            raise InferenceError(f"einsum: operands need one numeric data type, got {kinds}")
        sizes = letter_sizes(terms, operands)
        for k, letter in enumerate(output):
            if letter in output[:k]:
                raise InferenceError(f"einsum: result index '{letter}' repeats")
            if letter not in sizes:
                raise InferenceError(f"einsum: result index '{letter}' is in no operand")
        return [operands[0].with_shape([sizes[c] for c in output])]


class _TopKBase(GraphInstruction):
    operand = operand_def()
    count = prop_def(IntAttr)
    axis = prop_def(IntAttr)
    smallest = opt_prop_def(UnitAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def operand_type(cls, operand_types: Sequence[Attribute], props: Props) -> TensorType:
        x = tensor_operand(cls.OPCODE, operand_types[0])
        axis, count = int_prop(props, "axis"), int_prop(props, "count")
        if not dtype_is_numeric(x.dt):
            raise InferenceError(f"{cls.OPCODE}: operand must be numeric, got {format_type(x)}")
        if not 0 <= axis < x.rank:
            raise InferenceError(f"{cls.OPCODE}: axis {axis} out of range for {format_type(x)}")
        if not 1 <= count <= x.dims[axis]:
            raise InferenceError(
                f"{cls.OPCODE}: count {count} must be in [1, {x.dims[axis]}] for "
                f"{format_type(x)} along {axis}"
            )
        dims = list(x.dims)
        dims[axis] = count
        return x.with_shape(dims)


@irdl_op_definition
class TopKOp(_TopKBase):
    """`topK %x count k along a [smallest]`: the k largest (least) elements along a,
    in order."""

    name = "graph.top_k"
    OPCODE: ClassVar[str] = "topK"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        return [cls.operand_type(operand_types, props)]


@irdl_op_definition
class TopKIndicesOp(_TopKBase):
    """`topKIndices %x count k along a [smallest]`: the i64 positions along a of the
    elements `topK` gives."""

    name = "graph.top_k_indices"
    OPCODE: ClassVar[str] = "topKIndices"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        t = cls.operand_type(operand_types, props)
        return [TensorType(t.dims, "i64")]


OPS: list[type[Operation]] = [EinsumOp, TopKOp, TopKIndicesOp]
