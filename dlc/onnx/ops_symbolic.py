"""Converters used only when a node's input has a symbolic dimension (`dynamic=True`):
operators whose standard function body computes with `Shape` values (LayerNormalization
reshapes through `Shape`, `Slice` and `Concat` of its input's shape), which a symbolic
dimension leaves unknown at import time. Static models keep the function body."""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

from dlc.onnx.emitter import ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node


def layer_norm(node: Node) -> list[SSAValue]:
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the axes from `axis` on, as
    the operator's function body computes it (mean and variance are ReduceMeans, the
    inverse standard deviation a reciprocal); the reduced axes must be static."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    axis = node.axis(node.attr("axis", -1), len(dims))
    epsilon = float(node.attr("epsilon", 1e-5))
    if node.attr("stash_type", 1) != 1 or tensor_type(x).dt != "f32":
        raise ImportProblem("LayerNormalization with symbolic dimensions: f32 only (yet)")
    if len([n for n in node.proto.output if n]) > 1:
        raise ImportProblem(
            "LayerNormalization with symbolic dimensions: Mean and InvStdDev outputs are not supported yet"
        )
    axes = list(range(axis, len(dims)))
    reduced = [dims[a] for a in axes]
    if any(isinstance(d, str) for d in reduced):
        raise ImportProblem(
            f"LayerNormalization over symbolic dimension %{reduced[0]}: not supported yet"
        )
    count = e.scalar(float(math.prod(int(d) for d in reduced)), "f32")
    mean = e.binary("divide", e.reduce(x, "add", 0.0, axes, keepdims=True), count)
    centered = e.binary("subtract", x, mean)
    square = e.binary("multiply", centered, centered)
    variance = e.binary("divide", e.reduce(square, "add", 0.0, axes, keepdims=True), count)
    deviation = e.unary("sqrt", e.binary("add", variance, e.scalar(epsilon, "f32")))
    inverse = e.binary("divide", e.scalar(1.0, "f32"), deviation)
    y = e.binary("multiply", e.binary("multiply", centered, inverse), node.input(1))
    bias = node.optional(2)
    return [y if bias is None else e.binary("add", y, bias)]


CONVERTERS: dict[str, Converter] = {"LayerNormalization": layer_norm}
"""Operators converted so when an input has a symbolic dimension."""
