"""ONNX element-wise, matrix-product, softmax and reduction ops as graph ops."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import DataTypeCastOp, SelectOp
from dlc.dialects.graph_tensor import DotOp
from dlc.dialects.graph_types import dtype_holds_floats
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node

BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power"}
UNARY = {
    "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Neg": "negate",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Sinh": "sinh", "Cosh": "cosh",
    "Asin": "asin", "Acos": "acos", "Atan": "atan", "Erf": "erf", "Sign": "sign",
    "Floor": "floor", "Ceil": "ceil", "Round": "rint",  # ONNX rounds half to even
}  # fmt: skip


def binary(node: Node) -> list[SSAValue]:
    a, b = node.input(0), node.input(1)
    if node.opset < 7:
        b = legacy_broadcast(node, a, b)
    if node.op_type == "Pow" and tensor_type(a).dt != tensor_type(b).dt:
        return [_mixed_power(node, a, b)]
    return [node.emit.binary(BINARY[node.op_type], a, b)]


def legacy_broadcast(node: Node, a: SSAValue, b: SSAValue) -> SSAValue:
    """Opset < 7 broadcasting: without `broadcast=1` the shapes are equal; with it, B's
    dimensions match A's from `axis` (default: A's last ones) and B is reshaped to A's
    rank with 1s around them."""
    node.attr("consumed_inputs")
    da, db = shape_of(a), shape_of(b)
    if not node.attr("broadcast", 0):
        if da != db:
            raise ImportProblem(f"shapes {list(da)} and {list(db)} differ without broadcast=1")
        return b
    axis = node.attr("axis", len(da) - len(db))
    axis = axis + len(da) if axis < 0 else axis
    fits = 0 <= axis <= len(da) - len(db)
    if not fits or any(d not in (1, a) for d, a in zip(db, da[axis:], strict=False)):
        raise ImportProblem(f"broadcast=1 cannot place {list(db)} in {list(da)} at axis {axis}")
    dims = (1,) * axis + tuple(db) + (1,) * (len(da) - len(db) - axis)
    return node.emit.reshape(b, dims)


def _mixed_power(node: Node, a: SSAValue, b: SSAValue) -> SSAValue:
    """Pow with differently typed base and exponent, as onnx's reference
    (`np.power(a, b).astype(a.dtype)`): a float base takes the exponent in its type; an
    integer base with a float exponent computes in f64 and truncates back."""
    e = node.emit
    at, bt = tensor_type(a).dt, tensor_type(b).dt
    cast = lambda x, dt: e.op(DataTypeCastOp, [x], dtype=StringAttr(dt))  # noqa: E731
    if dtype_holds_floats(bt) and not dtype_holds_floats(at):
        return cast(e.binary("power", cast(a, "f64"), cast(b, "f64")), at)
    return e.binary("power", a, cast(b, at))


def unary(node: Node) -> list[SSAValue]:
    return [node.emit.unary(UNARY[node.op_type], node.input(0))]


def reciprocal(node: Node) -> list[SSAValue]:
    x = node.input(0)
    return [node.emit.binary("divide", node.emit.scalar(1.0, tensor_type(x).dt), x)]


def variadic(node: Node) -> list[SSAValue]:
    """Max, Min, Sum, Mean of one or more inputs, broadcast together."""
    e = node.emit
    opcode = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}[node.op_type]
    count = len(node.names)
    y = node.input(0)
    for i in range(1, count):
        y = e.binary(opcode, y, node.input(i))
    if node.op_type == "Mean" and count > 1:
        y = e.binary("divide", y, e.scalar(float(count), tensor_type(y).dt))
    return [y]


def relu(node: Node) -> list[SSAValue]:
    x = node.input(0)
    return [node.emit.binary("max", x, node.emit.scalar(0.0, tensor_type(x).dt))]


def sigmoid(node: Node) -> list[SSAValue]:
    """1 / (1 + exp(-x))"""
    e, x = node.emit, node.input(0)
    dt = tensor_type(x).dt
    denominator = e.binary("add", e.scalar(1.0, dt), e.unary("exp", e.unary("negate", x)))
    return [e.binary("divide", e.scalar(1.0, dt), denominator)]


def _negative_select(node: Node, negative: SSAValue, x: SSAValue) -> SSAValue:
    """select(negative, x by x < 0): NaN takes the x branch."""
    e = node.emit
    is_negative = e.binary("lessThan", x, e.scalar(0.0, tensor_type(x).dt))
    return e.op(SelectOp, [negative, x, is_negative])


def abs_(node: Node) -> list[SSAValue]:
    x = node.input(0)
    return [_negative_select(node, node.emit.unary("negate", x), x)]


def leaky_relu(node: Node) -> list[SSAValue]:
    x = node.input(0)
    alpha = node.emit.scalar(node.attr("alpha", 0.01), tensor_type(x).dt)
    return [_negative_select(node, node.emit.binary("multiply", x, alpha), x)]


def clip(node: Node) -> list[SSAValue]:
    """min(max(x, lo), hi); bounds are attributes before opset 11, inputs after (a
    bound computed at run time is a tensor operand)."""
    e, x = node.emit, node.input(0)
    dt = tensor_type(x).dt
    if node.opset < 11:
        lo, hi = node.attr("min", -math.inf), node.attr("max", math.inf)
        bounds = [(lo, "max", -math.inf), (hi, "min", math.inf)]
    else:
        bounds = [(_bound(node, 1), "max", -math.inf), (_bound(node, 2), "min", math.inf)]
    for bound, opcode, none in bounds:
        if isinstance(bound, SSAValue):
            x = e.binary(opcode, x, bound)
        elif bound != none:
            x = e.binary(opcode, x, e.scalar(bound, dt))
    return [x]


def _bound(node: Node, i: int) -> float | SSAValue:
    """Clip's input i: a float when constant, a tensor otherwise; ±inf when omitted."""
    if i >= len(node.names) or not node.names[i]:
        return -math.inf if i == 1 else math.inf
    value = node.constants[i]
    if value is None:
        return node.input(i)
    if value.size != 1:
        raise ImportProblem(f"Clip bounds must be scalars, input {i} has shape {value.shape}")
    return float(value.reshape(-1)[0])


def matmul(node: Node) -> list[SSAValue]:
    return [matmul_of(node.emit, node.input(0), node.input(1))]


def matmul_of(e: Emitter, a: SSAValue, b: SSAValue) -> SSAValue:
    """NumPy matmul: 1-D operands gain a dimension that is dropped afterwards, batch
    dimensions broadcast."""
    a_vector, b_vector = len(shape_of(a)) == 1, len(shape_of(b)) == 1
    rows = _shared_weight_rows(a, b)
    if rows is not None:
        y = e.op(DotOp, [e.reshape(a, (rows, shape_of(a)[-1])), b])
        return e.reshape(y, (*shape_of(a)[:-1], shape_of(b)[-1]))
    if a_vector:
        a = e.reshape(a, (1, *shape_of(a)))
    if b_vector:
        b = e.reshape(b, (*shape_of(b), 1))
    a, b = e.rank_extended(a, b)
    sa, sb = shape_of(a), shape_of(b)
    try:
        batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        raise ImportProblem(f"batch dimensions of {sa} and {sb} do not broadcast") from None
    a = e.broadcast_to(a, (*batch, *sa[-2:]))
    b = e.broadcast_to(b, (*batch, *sb[-2:]))
    y = e.op(DotOp, [a, b])
    dims = list(shape_of(y))
    if b_vector:
        dims.pop()
    if a_vector:
        dims.pop(-1 if b_vector else -2)
    return e.reshape(y, dims)


def _shared_weight_rows(a: SSAValue, b: SSAValue) -> int | None:
    """The rows of `a` as one matrix when `a` has batch dimensions and `b` is one
    matrix shared by all of them (static shapes): [..., m, k] · [k, n] is then the
    product of the [(...·m), k] rows with `b`, reshaped, as one tiled matrix product
    instead of a batch of small ones over a broadcast `b` (sequence-first attention
    layouts: [seq, 1, hidden] · [hidden, 3·hidden]). None for a batch of one."""
    sa, sb = shape_of(a), shape_of(b)
    if len(sa) < 3 or len(sb) != 2 or not all(isinstance(d, int) for d in (*sa, *sb)):
        return None
    if int(np.prod(sa[:-2])) == 1:
        return None  # a batch of one product: already one matrix product
    return int(np.prod(sa[:-1]))


def gemm(node: Node) -> list[SSAValue]:
    """alpha · op(A) · op(B) + beta · C, C broadcast to the result."""
    e = node.emit
    a, b = (_transposed(node, i, node.attr(flag, 0)) for i, flag in ((0, "transA"), (1, "transB")))
    y = e.op(DotOp, [a, b])
    dt = tensor_type(y).dt
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if node.opset < 7:
        node.attr("broadcast")
    if alpha != 1.0:
        y = e.binary("multiply", y, e.scalar(alpha, dt))
    c = node.optional(2)
    if c is None or beta == 0.0:
        return [y]
    if beta != 1.0:
        c = e.binary("multiply", c, e.scalar(beta, dt))
    return [e.binary("add", y, c)]


def _transposed(node: Node, i: int, transpose: int) -> SSAValue:
    """Gemm's input i, transposed if asked: a constant (a weight) at import time,
    copied once into the bytes its literal keeps, and the untransposed weight never
    made a literal (torch's Linear layers: `transB=1`; the weights are most of a
    model's memory)."""
    value = node.constants[i] if transpose and i < len(node.constants) else None
    dims = value.shape if value is not None else shape_of(node.input(i))
    if len(dims) != 2:
        raise ImportProblem(f"Gemm needs 2-D A and B, got {list(dims)}")
    if value is not None:
        weight = value

        def make() -> SSAValue:
            data = np.frombuffer(weight.T.tobytes(), weight.dtype)  # row-major: transposed
            return node.emit.constant(data.reshape(dims[::-1]))

        return node.derived(i, "transpose", make)
    x = node.input(i)
    return node.emit.transpose(x, (1, 0)) if transpose else x


def softmax(node: Node) -> list[SSAValue]:
    """exp(x - max) / sum(exp(x - max)) along `axis` (opset ≥ 13) or over the 2-D
    coercion [prod(dims[:axis]), prod(dims[axis:])] (opset < 13); LogSoftmax is
    x - max - log(sum(exp(x - max)))."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    axis = node.axis(node.attr("axis", -1 if node.opset >= 13 else 1), max(len(dims), 1))
    if node.opset < 13:
        flat = (int(np.prod(dims[:axis])), int(np.prod(dims[axis:])))
        y = _softmax(node, e.reshape(x, flat), 1)
        return [e.reshape(y, dims)]
    return [_softmax(node, x, axis)]


def _softmax(node: Node, x: SSAValue, axis: int) -> SSAValue:
    e = node.emit
    peak = e.reduce(x, "max", -math.inf, [axis], keepdims=True)
    shifted = e.binary("subtract", x, peak)
    exp = e.unary("exp", shifted)
    total = e.reduce(exp, "add", 0.0, [axis], keepdims=True)
    if node.op_type == "LogSoftmax":
        return e.binary("subtract", shifted, e.unary("log", total))
    return e.binary("divide", exp, total)


REDUCTIONS = {
    "ReduceSum": ("add", 0.0),
    "ReduceMean": ("add", 0.0),
    "ReduceMax": ("max", -math.inf),
    "ReduceMin": ("min", math.inf),
    "ReduceProd": ("multiply", 1.0),
}


DERIVED_REDUCTIONS = {  # op: (element-wise before, reduction, element-wise after)
    "ReduceL1": ("abs", "ReduceSum", None),
    "ReduceL2": ("square", "ReduceSum", "sqrt"),
    "ReduceSumSquare": ("square", "ReduceSum", None),
    "ReduceLogSum": (None, "ReduceSum", "log"),
    "ReduceLogSumExp": ("exp", "ReduceSum", "log"),  # as ONNX defines it, unshifted
}


def reduce(node: Node) -> list[SSAValue]:
    """Axes are an attribute (an input for ReduceSum from opset 13, the others from
    18); no axes reduce everything unless noop_with_empty_axes."""
    e, x = node.emit, node.input(0)
    rank = len(shape_of(x))
    axes_input = node.opset >= (13 if node.op_type == "ReduceSum" else 18)
    if axes_input:
        value = node.constant(1, "axes")
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    else:
        axes = node.attr("axes")
    keepdims = bool(node.attr("keepdims", 1))
    noop = node.attr("noop_with_empty_axes", 0)
    before, kind, after = DERIVED_REDUCTIONS.get(node.op_type, (None, node.op_type, None))
    if not axes:
        if noop and kind != node.op_type:
            raise ImportProblem("noop_with_empty_axes=1 is not supported")
        if noop:
            return [x]
        axes = list(range(rank))
    axes = sorted({node.axis(a, rank) for a in axes})
    x = _elementwise(node, before, x)
    combinator, init = REDUCTIONS[kind]
    if tensor_type(x).dt == "bool" and kind in ("ReduceMax", "ReduceMin"):
        combinator, init = ("or", False) if kind == "ReduceMax" else ("and", True)
    y = e.reduce(x, combinator, init, axes, keepdims)
    if kind == "ReduceMean":
        count = int(np.prod([shape_of(x)[a] for a in axes]))
        y = e.binary("divide", y, e.scalar(float(count), tensor_type(x).dt))
    return [_elementwise(node, after, y)]


def _elementwise(node: Node, opcode: str | None, x: SSAValue) -> SSAValue:
    if opcode is None:
        return x
    if opcode == "abs":
        return _negative_select(node, node.emit.unary("negate", x), x)
    if opcode == "square":
        return node.emit.binary("multiply", x, x)
    return node.emit.unary(opcode, x)


def lp_normalization(node: Node) -> list[SSAValue]:
    """x / ||x||_p along `axis` (p 1 or 2), 0 where the norm is 0."""
    e, x = node.emit, node.input(0)
    dt = tensor_type(x).dt
    axis = node.axis(node.attr("axis", -1), len(shape_of(x)))
    p = node.require("p", (1, 2), 2)
    size = _elementwise(node, "abs" if p == 1 else "square", x)
    norm = e.reduce(size, "add", 0.0, [axis], keepdims=True)
    if p == 2:
        norm = e.unary("sqrt", norm)
    zero = e.scalar(0.0, dt)
    y = e.binary("divide", x, norm)
    y, is_zero = e.rank_extended(y, e.binary("equal", norm, zero))
    return [e.op(SelectOp, [e.to_rank(zero, len(shape_of(y))), y, is_zero])]


CONVERTERS: dict[str, Converter] = {
    **dict.fromkeys(BINARY, binary),
    **dict.fromkeys(UNARY, unary),
    "Reciprocal": reciprocal,
    **dict.fromkeys(("Max", "Min", "Sum", "Mean"), variadic),
    "Relu": relu,
    "Sigmoid": sigmoid,
    "Abs": abs_,
    "LeakyRelu": leaky_relu,
    "Clip": clip,
    "MatMul": matmul,
    "Gemm": gemm,
    "Softmax": softmax,
    "LogSoftmax": softmax,
    "LpNormalization": lp_normalization,
    **dict.fromkeys(REDUCTIONS, reduce),
    **dict.fromkeys(DERIVED_REDUCTIONS, reduce),
}
