"""ONNX operators with a training mode or random values: Dropout (inference, and
training with a seed), BatchNormalization's training mode, and the random
generators, which are refused.

onnx's reference implementation draws Dropout's mask from NumPy's
`RandomState(seed).uniform`; with a `seed` that stream is deterministic, so the
importer draws it at import time and the mask is the same on every call, as in the
reference. Without a seed (and for RandomUniform(Like), RandomNormal(Like),
Bernoulli and Multinomial, whose node tests compare values drawn from NumPy's global
generator) no implementation can reproduce the values: they are refused.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from dlc.onnx.emitter import ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.promote import cast, promoted

MAX_MASK = 1 << 20
"""Elements of the largest Dropout mask drawn at import time (a literal)."""


def _training(node: Node) -> bool:
    """Whether Dropout runs in training mode (opset 12: the training_mode input; opset
    < 7: is_test=0, refused: no seed)."""
    node.attr("consumed_inputs")
    if node.opset < 7 and not node.attr("is_test", 0):
        raise ImportProblem("is_test=0 (training) is not supported")
    node.attr("is_test")
    if node.opset < 12:
        return False
    training = node.constant(2, "training_mode")
    return training is not None and bool(training.any())


def dropout(node: Node) -> list[Result]:
    """Identity in inference (its mask all ones: bool from opset 10, the input's type
    before); in training, y = x · mask / (1 - ratio) with mask = U >= ratio, U drawn
    from `RandomState(seed).uniform(0, 1)` at import (f64, compared in f64)."""
    e, x = node.emit, node.input(0)
    t = tensor_type(x)
    given = node.opset >= 12 and len(node.names) > 1 and bool(node.names[1])
    constant_ratio = node.constants[1] if given else node.attr("ratio", 0.5)
    seed = node.attr("seed")
    if not _training(node) or (constant_ratio is not None and not np.any(constant_ratio)):
        if len(node.proto.output) < 2 or not node.proto.output[1]:
            return [x]
        mask_dt = "bool" if node.opset >= 10 else t.dt
        return [x, e.splat(True if mask_dt == "bool" else 1.0, t.dims, mask_dt)]
    if seed is None:
        raise ImportProblem("training_mode=true without a seed draws random numbers")
    if t.num_elements > MAX_MASK:
        raise ImportProblem(f"a training mask of more than {MAX_MASK} elements")
    uniform = np.random.RandomState(int(seed)).uniform(0, 1.0, t.dims)
    if given:
        ratio = e.reshape(node.input(1), ())
        rt = tensor_type(ratio).dt
    else:  # 0.5 or the attribute, a Python float (NumPy keeps x's type)
        ratio, rt = e.scalar(float(node.attr("ratio", 0.5)), t.dt), t.dt
    if constant_ratio is not None:
        mask = e.constant(uniform >= np.asarray(constant_ratio).reshape(()))
    else:
        mask = e.binary("greaterThanOrEqual", e.constant(uniform), cast(e, ratio, "f64"))
    scale = e.binary("divide", e.scalar(1.0, rt), e.binary("subtract", e.scalar(1.0, rt), ratio))
    wide = promoted(t.dt, rt)
    y = e.binary("multiply", cast(e, x, wide), cast(e, mask, wide))  # x · 0 keeps x's sign
    y = cast(e, e.binary("multiply", y, cast(e, scale, wide)), t.dt)
    return [y, mask]


def batch_norm_training(node: Node) -> list[Result]:
    """BatchNormalization with training_mode=1 (opset ≥ 14): normalized by the batch's
    mean and (biased) variance over all axes but 1, and the running statistics
    mean · momentum + batch_mean · (1 - momentum) (likewise the variance)."""
    e, x = node.emit, node.input(0)
    if node.opset < 14:
        raise ImportProblem("training outputs before opset 14 are not supported")
    dims, dt = shape_of(x), tensor_type(x).dt
    momentum, eps = node.attr("momentum", 0.9), node.attr("epsilon", 1e-5)
    axes = [a for a in range(len(dims)) if a != 1]
    count = e.scalar(float(np.prod([dims[a] for a in axes])), dt)
    mean = e.binary("divide", e.reduce(x, "add", 0.0, axes, keepdims=True), count)
    centered = e.binary("subtract", x, mean)
    squares = e.reduce(e.unary("square", centered), "add", 0.0, axes, keepdims=True)
    var = e.binary("divide", squares, count)
    channel = (1, dims[1]) + (1,) * (len(dims) - 2)
    scale, bias, running_mean, running_var = (
        e.reshape(node.input(i), channel) for i in range(1, 5)
    )
    std = e.unary("sqrt", e.binary("add", var, e.scalar(eps, dt)))
    y = e.binary("add", e.binary("divide", e.binary("multiply", scale, centered), std), bias)
    outputs: list[Result] = [y]
    for old, batch in ((running_mean, mean), (running_var, var)):
        kept = e.binary("multiply", old, e.scalar(momentum, dt))
        new = e.binary("multiply", batch, e.scalar(1 - momentum, dt))
        outputs.append(e.reshape(e.binary("add", kept, new), (dims[1],)))
    return outputs


def random_values(node: Node) -> list[SSAValue]:
    raise ImportProblem("random values are not supported (onnx's tests compare NumPy's draws)")


CONVERTERS: dict[str, Converter] = {
    "Dropout": dropout,
    "RandomUniform": random_values,
    "RandomUniformLike": random_values,
    "RandomNormal": random_values,
    "RandomNormalLike": random_values,
    "Bernoulli": random_values,
    "Multinomial": random_values,
}
