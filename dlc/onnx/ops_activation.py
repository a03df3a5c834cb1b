"""ONNX activation functions and inverse hyperbolics, composed of graph element-wise ops.

Each composition follows the formula of the ONNX operator's definition (given in its
docstring); ops that take a threshold compare with it the way the definition does.
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import SelectOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result


def _float_input(node: Node) -> tuple[Emitter, SSAValue, str]:
    x = node.input(0)
    dt = tensor_type(x).dt
    if dt not in ("f16", "bf16", "f32", "f64"):
        raise ImportProblem(f"{node.op_type} on {dt} is not supported")
    return node.emit, x, dt


def _select(e: Emitter, a: SSAValue, b: SSAValue, mask: SSAValue) -> SSAValue:
    """a where mask, else b (ranks extended as NumPy does)."""
    rank = max(len(shape_of(v)) for v in (a, b, mask))
    return e.op(SelectOp, [e.to_rank(v, rank) for v in (a, b, mask)])


def _exp_minus_one(e: Emitter, x: SSAValue, dt: str) -> SSAValue:
    return e.binary("subtract", e.unary("exp", x), e.scalar(1.0, dt))


def elu(node: Node) -> list[Result]:
    """x < 0 ? alpha (exp(x) - 1) : x"""
    e, x, dt = _float_input(node)
    alpha = e.scalar(node.attr("alpha", 1.0), dt)
    negative = e.binary("multiply", alpha, _exp_minus_one(e, x, dt))
    return [_select(e, negative, x, e.binary("lessThan", x, e.scalar(0.0, dt)))]


def selu(node: Node) -> list[Result]:
    """gamma (x <= 0 ? alpha (exp(x) - 1) : x)"""
    e, x, dt = _float_input(node)
    alpha = e.scalar(node.attr("alpha", 1.67326319217681884765625), dt)
    gamma = e.scalar(node.attr("gamma", 1.05070102214813232421875), dt)
    negative = e.binary("multiply", alpha, _exp_minus_one(e, x, dt))
    y = _select(e, negative, x, e.binary("lessThanOrEqual", x, e.scalar(0.0, dt)))
    return [e.binary("multiply", gamma, y)]


def celu(node: Node) -> list[Result]:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))"""
    e, x, dt = _float_input(node)
    alpha = e.scalar(node.attr("alpha", 1.0), dt)
    zero = e.scalar(0.0, dt)
    scaled = e.binary("multiply", alpha, _exp_minus_one(e, e.binary("divide", x, alpha), dt))
    return [e.binary("add", e.binary("max", x, zero), e.binary("min", scaled, zero))]


def _hard_sigmoid(e: Emitter, x: SSAValue, dt: str, alpha: float, beta: float) -> SSAValue:
    """max(0, min(1, alpha x + beta))"""
    y = e.binary("add", e.binary("multiply", x, e.scalar(alpha, dt)), e.scalar(beta, dt))
    return e.binary("max", e.binary("min", y, e.scalar(1.0, dt)), e.scalar(0.0, dt))


def hard_sigmoid(node: Node) -> list[Result]:
    e, x, dt = _float_input(node)
    return [_hard_sigmoid(e, x, dt, node.attr("alpha", 0.2), node.attr("beta", 0.5))]


def hard_swish(node: Node) -> list[Result]:
    """x hardSigmoid(x) with alpha 1/6, beta 1/2"""
    e, x, dt = _float_input(node)
    return [e.binary("multiply", x, _hard_sigmoid(e, x, dt, 1 / 6, 0.5))]


def _softplus(e: Emitter, x: SSAValue, dt: str) -> SSAValue:
    """log(exp(x) + 1)"""
    return e.unary("log", e.binary("add", e.unary("exp", x), e.scalar(1.0, dt)))


def softplus(node: Node) -> list[Result]:
    e, x, dt = _float_input(node)
    return [_softplus(e, x, dt)]


def softsign(node: Node) -> list[Result]:
    """x / (1 + |x|)"""
    e, x, dt = _float_input(node)
    magnitude = _select(e, e.unary("negate", x), x, e.binary("lessThan", x, e.scalar(0.0, dt)))
    return [e.binary("divide", x, e.binary("add", e.scalar(1.0, dt), magnitude))]


def mish(node: Node) -> list[Result]:
    """x tanh(softplus(x))"""
    e, x, dt = _float_input(node)
    return [e.binary("multiply", x, e.unary("tanh", _softplus(e, x, dt)))]


def _sigmoid(e: Emitter, x: SSAValue, dt: str) -> SSAValue:
    one = e.scalar(1.0, dt)
    return e.binary("divide", one, e.binary("add", one, e.unary("exp", e.unary("negate", x))))


def swish(node: Node) -> list[Result]:
    """x sigmoid(alpha x)"""
    e, x, dt = _float_input(node)
    scaled = e.binary("multiply", x, e.scalar(node.attr("alpha", 1.0), dt))
    return [e.binary("multiply", x, _sigmoid(e, scaled, dt))]


def gelu(node: Node) -> list[Result]:
    """x/2 (1 + erf(x / sqrt 2)), or with approximate="tanh"
    x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"""
    e, x, dt = _float_input(node)
    approximate = node.require("approximate", ("none", "tanh"), "none")
    if approximate == "none":
        inner = e.unary("erf", e.binary("multiply", x, e.scalar(1 / math.sqrt(2), dt)))
    else:
        cube = e.binary("multiply", e.binary("multiply", x, x), x)
        poly = e.binary("add", x, e.binary("multiply", e.scalar(0.044715, dt), cube))
        inner = e.unary("tanh", e.binary("multiply", e.scalar(math.sqrt(2 / math.pi), dt), poly))
    half = e.binary("multiply", x, e.scalar(0.5, dt))
    return [e.binary("multiply", half, e.binary("add", e.scalar(1.0, dt), inner))]


def thresholded_relu(node: Node) -> list[Result]:
    """x > alpha ? x : 0"""
    e, x, dt = _float_input(node)
    above = e.binary("greaterThan", x, e.scalar(node.attr("alpha", 1.0), dt))
    return [_select(e, x, e.scalar(0.0, dt), above)]


def prelu(node: Node) -> list[Result]:
    """x < 0 ? slope x : x (slope broadcast to x; before opset 7 a 1-D slope is
    per channel, dimension 1)"""
    e, x, dt = _float_input(node)
    slope = node.input(1)
    node.attr("consumed_inputs")
    dims, sdims = shape_of(x), shape_of(slope)
    if node.opset < 7 and len(sdims) == 1 and len(dims) >= 2 and sdims[0] == dims[1] > 1:
        slope = e.reshape(slope, (1, dims[1]) + (1,) * (len(dims) - 2))
    negative = e.binary("multiply", x, slope)
    return [_select(e, negative, x, e.binary("lessThan", x, e.scalar(0.0, dt)))]


def shrink(node: Node) -> list[Result]:
    """x < -lambd ? x + bias : (x > lambd ? x - bias : 0)"""
    e, x, dt = _float_input(node)
    bias, lambd = e.scalar(node.attr("bias", 0.0), dt), node.attr("lambd", 0.5)
    upper = _select(
        e, e.binary("subtract", x, bias), e.scalar(0.0, dt),
        e.binary("greaterThan", x, e.scalar(lambd, dt)),
    )  # fmt: skip
    lower = e.binary("lessThan", x, e.scalar(-lambd, dt))
    return [_select(e, e.binary("add", x, bias), upper, lower)]


def asinh(node: Node) -> list[Result]:
    """sign(x) log(|x| + sqrt(x² + 1)) (odd, so no cancellation for negative x)"""
    e, x, dt = _float_input(node)
    negative = e.binary("lessThan", x, e.scalar(0.0, dt))
    magnitude = _select(e, e.unary("negate", x), x, negative)
    root = e.unary("sqrt", e.binary("add", e.binary("multiply", x, x), e.scalar(1.0, dt)))
    y = e.unary("log", e.binary("add", magnitude, root))
    return [_select(e, e.unary("negate", y), y, negative)]


def acosh(node: Node) -> list[Result]:
    """log(x + sqrt(x² - 1))"""
    e, x, dt = _float_input(node)
    root = e.unary("sqrt", e.binary("subtract", e.binary("multiply", x, x), e.scalar(1.0, dt)))
    return [e.unary("log", e.binary("add", x, root))]


def atanh(node: Node) -> list[Result]:
    """log((1 + x) / (1 - x)) / 2"""
    e, x, dt = _float_input(node)
    one = e.scalar(1.0, dt)
    ratio = e.binary("divide", e.binary("add", one, x), e.binary("subtract", one, x))
    return [e.binary("multiply", e.unary("log", ratio), e.scalar(0.5, dt))]


CONVERTERS: dict[str, Converter] = {
    "Elu": elu,
    "Selu": selu,
    "Celu": celu,
    "HardSigmoid": hard_sigmoid,
    "HardSwish": hard_swish,
    "Softplus": softplus,
    "Softsign": softsign,
    "Mish": mish,
    "Swish": swish,
    "Gelu": gelu,
    "ThresholdedRelu": thresholded_relu,
    "PRelu": prelu,
    "Shrink": shrink,
    "Asinh": asinh,
    "Acosh": acosh,
    "Atanh": atanh,
}
