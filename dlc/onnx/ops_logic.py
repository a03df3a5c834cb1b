"""ONNX comparisons, logic, Where, casts, Mod and the shape queries (Shape, Size)."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import DataTypeCastOp, NotOp, SelectOp
from dlc.dialects.graph_tensor import BitCastOp
from dlc.dialects.graph_types import TensorType, dtype_bytes, dtype_is_int
from dlc.onnx.emitter import ELEMENT_TYPES, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result

COMPARES = {
    "Equal": "equal", "Less": "lessThan", "LessOrEqual": "lessThanOrEqual",
    "Greater": "greaterThan", "GreaterOrEqual": "greaterThanOrEqual",
    "And": "and", "Or": "or", "Xor": "xor",
}  # fmt: skip
BITWISE = {"BitwiseAnd": "and", "BitwiseOr": "or", "BitwiseXor": "xor"}


def compare(node: Node) -> list[Result]:
    a, b = node.input(0), node.input(1)
    if node.op_type in ("And", "Or", "Xor") and tensor_type(a).dt != "bool":
        raise ImportProblem(f"{node.op_type} needs bool operands")
    return [node.emit.binary(COMPARES[node.op_type], a, b)]


def _integers(node: Node, x: SSAValue) -> SSAValue:
    if not dtype_is_int(tensor_type(x).dt):
        raise ImportProblem(f"{node.op_type} needs integer operands")
    return x


def bitwise(node: Node) -> list[Result]:
    a, b = _integers(node, node.input(0)), node.input(1)
    return [node.emit.binary(BITWISE[node.op_type], a, b)]


def bit_shift(node: Node) -> list[Result]:
    """BitShift: `direction` LEFT or RIGHT; amounts outside [0, width) give 0."""
    direction = node.require("direction", ("LEFT", "RIGHT"), None)
    a, b = _integers(node, node.input(0)), node.input(1)
    return [node.emit.binary("shiftLeft" if direction == "LEFT" else "shiftRight", a, b)]


def not_(node: Node) -> list[Result]:
    x = node.input(0)
    if node.op_type == "Not" and tensor_type(x).dt != "bool":
        raise ImportProblem("Not needs a bool operand")
    if node.op_type == "BitwiseNot":
        _integers(node, x)
    return [node.emit.op(NotOp, [x])]


def where(node: Node) -> list[Result]:
    """select(x, y by condition), the three broadcast together."""
    e = node.emit
    cond, x, y = node.input(0), node.input(1), node.input(2)
    rank = max(len(shape_of(v)) for v in (cond, x, y))
    cond, x, y = (e.to_rank(v, rank) for v in (cond, x, y))
    return [e.op(SelectOp, [x, y, cond])]


def is_nan(node: Node) -> list[Result]:
    x = node.input(0)
    return [node.emit.binary("notEqual", x, x)]  # only NaN differs from itself


def is_inf(node: Node) -> list[Result]:
    e, x = node.emit, node.input(0)
    dt = tensor_type(x).dt
    positive, negative = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    checks = [
        e.binary("equal", x, e.scalar(bound, dt))
        for bound, on in ((math.inf, positive), (-math.inf, negative))
        if on
    ]
    if not checks:
        return [e.splat(False, shape_of(x), "bool")]
    return [checks[0] if len(checks) == 1 else e.binary("or", *checks)]


def _cast(node: Node, x: SSAValue, to: str) -> SSAValue:
    """dataTypeCast: ONNX's rules across int, float and bool (float -> int truncates
    toward zero; out of range saturates, NaN gives 0, where ONNX leaves it undefined)."""
    if tensor_type(x).dt == to:
        return x
    return node.emit.op(DataTypeCastOp, [x], dtype=StringAttr(to))


def cast(node: Node) -> list[Result]:
    to = node.attr("to")
    node.attr("saturate")  # only meaningful for float8 targets
    node.attr("round_mode")
    if not isinstance(to, int) or to not in ELEMENT_TYPES:
        name = TensorProto.DataType.Name(to) if isinstance(to, int) else to
        raise ImportProblem(f"casting to {name} is not supported")
    return [_cast(node, node.input(0), ELEMENT_TYPES[to])]


def bit_cast(node: Node) -> list[Result]:
    """BitCast (opset 26): the bits reinterpreted as `to`, of the same width (not to
    bool, whose only valid bytes are 0 and 1)."""
    x, to = node.input(0), node.attr("to")
    dt = tensor_type(x).dt
    if not isinstance(to, int) or to not in ELEMENT_TYPES:
        name = TensorProto.DataType.Name(to) if isinstance(to, int) else to
        raise ImportProblem(f"bit casting to {name} is not supported")
    target = ELEMENT_TYPES[to]
    if target == "bool" and dt != "bool":
        raise ImportProblem(f"bit casting {dt} to bool is not supported")
    if dtype_bytes(dt) != dtype_bytes(target):
        raise ImportProblem(f"bit casting {dt} to {target} changes the width")
    if dt == target:
        return [x]
    return [node.emit.op(BitCastOp, [x], target=TensorType(shape_of(x), target))]


def cast_like(node: Node) -> list[Result]:
    node.attr("saturate")
    node.attr("round_mode")
    return [_cast(node, node.input(0), tensor_type(node.input(1)).dt)]


def mod(node: Node) -> list[Result]:
    """fmod=1: C's fmod (the sign of the dividend); fmod=0: the sign of the divisor
    (NumPy's mod), r + b where r = fmod(a, b) is non-zero and differs in sign from b."""
    e, a, b = node.emit, node.input(0), node.input(1)
    dt = tensor_type(a).dt
    fmod = node.attr("fmod", 0)
    r = e.binary("modulo", a, b)
    if fmod:
        return [r]
    zero = e.scalar(0, dt)
    r_negative, b_negative = e.binary("lessThan", r, zero), e.binary("lessThan", b, zero)
    r_negative, b_negative = e.rank_extended(r_negative, b_negative)
    signs_differ = e.op(SelectOp, [e.op(NotOp, [b_negative]), b_negative, r_negative])
    flip = e.binary("and", e.binary("notEqual", r, zero), signs_differ)
    adjusted = e.binary("add", r, b)
    adjusted, r = e.rank_extended(adjusted, r)
    return [e.op(SelectOp, [adjusted, r, e.to_rank(flip, len(shape_of(r)))])]


def shape(node: Node) -> list[Result]:
    """The input's shape as an i64 constant (its start..end part, opset 15)."""
    dims = np.array(shape_of(node.input(0)), np.int64)
    start, end = node.attr("start", 0), node.attr("end")
    return [dims[start:end] if end is not None else dims[start:]]


def size(node: Node) -> list[Result]:
    return [np.array(int(np.prod(shape_of(node.input(0)))), np.int64)]


CONVERTERS: dict[str, Converter] = {
    **dict.fromkeys(COMPARES, compare),
    **dict.fromkeys(BITWISE, bitwise),
    "BitShift": bit_shift,
    "Not": not_,
    "BitwiseNot": not_,
    "Where": where,
    "IsNaN": is_nan,
    "IsInf": is_inf,
    "Cast": cast,
    "CastLike": cast_like,
    "BitCast": bit_cast,
    "Mod": mod,
    "Shape": shape,
    "Size": size,
}
