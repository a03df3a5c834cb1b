"""ONNX models of the compile-time benchmark (`tools/bench_compile.py`) that neither
onnx's light models nor `onnx_workloads.py` provide, built with `onnx.helper` and
random weights (no torch needed): MobileNetV2 (224×224, width 1.0, batch-norm folded
into the convolutions' biases) and ViT-B/16 (224×224, 16×16 patches, 12 layers of
12-head attention over 197 tokens, hidden 768, MLP 3072 with the erf GELU).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper
from onnx_workloads import _attention, _gelu, _Graph, light_model, randomized


def _finish(
    g: _Graph, name: str, x_name: str, x_shape: list[int], y: str, y_shape: list[int]
) -> ModelProto:
    graph = helper.make_graph(
        g.nodes,
        name,
        [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, y_shape)],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _conv(g: _Graph, x: str, name: str, c_in: int, c_out: int, k: int, stride: int = 1,
          group: int = 1, relu6: bool = True) -> str:  # fmt: skip
    w = g.weight(f"{name}.w", (c_out, c_in // group, k, k), math.sqrt(2 / (c_in // group * k * k)))
    b = g.weight(f"{name}.b", (c_out,), 0.02)
    pad = k // 2
    y = g.op("Conv", [x, w, b], strides=[stride, stride], pads=[pad] * 4, group=group)
    if not relu6:
        return y
    low = g.const(f"{name}.lo", np.array(0.0, np.float32))
    high = g.const(f"{name}.hi", np.array(6.0, np.float32))
    return g.op("Clip", [y, low, high])


MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip
"""(expansion t, channels c, repeats n, first stride s) of each stage."""


def mobilenet_v2(seed: int = 11) -> ModelProto:
    """MobileNetV2: input [1, 3, 224, 224] -> logits [1, 1000]."""
    g = _Graph(np.random.default_rng(seed))
    x = _conv(g, "input", "stem", 3, 32, 3, 2)
    c_in, k = 32, 0
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            k += 1
            hidden, block = c_in * t, x
            if t != 1:
                x = _conv(g, x, f"b{k}.expand", c_in, hidden, 1)
            x = _conv(g, x, f"b{k}.dw", hidden, hidden, 3, s if i == 0 else 1, group=hidden)
            x = _conv(g, x, f"b{k}.project", hidden, c, 1, relu6=False)
            if i > 0:  # stride 1 and the same channels: a residual connection
                x = g.op("Add", [x, block])
            c_in = c
    x = _conv(g, x, "head", c_in, 1280, 1)
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    w = g.weight("fc.w", (1280, 1000), 1 / math.sqrt(1280))
    b = g.weight("fc.b", (1000,), 0.02)
    y = g.op("Gemm", [x, w, b])
    return _finish(g, "mobilenet_v2", "input", [1, 3, 224, 224], y, [1, 1000])


VIT_HIDDEN, VIT_HEADS, VIT_MLP, VIT_LAYERS, VIT_TOKENS = 768, 12, 3072, 12, 197


def _vit_norm(g: _Graph, x: str, name: str) -> str:
    gamma = g.const(f"{name}.gamma", np.ones(VIT_HIDDEN, np.float32))
    beta = g.const(f"{name}.beta", np.zeros(VIT_HIDDEN, np.float32))
    return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-6)


def vit_b16(seed: int = 12) -> ModelProto:
    """ViT-B/16: input [1, 3, 224, 224] -> logits [1, 1000]."""
    g = _Graph(np.random.default_rng(seed))
    w = g.weight("patch.w", (VIT_HIDDEN, 3, 16, 16), 1 / math.sqrt(3 * 256))
    b = g.weight("patch.b", (VIT_HIDDEN,), 0.02)
    patches = g.op("Conv", ["input", w, b], strides=[16, 16])
    shape = g.const("patch.shape", np.array([1, VIT_HIDDEN, VIT_TOKENS - 1], np.int64))
    tokens = g.op("Transpose", [g.op("Reshape", [patches, shape])], perm=[0, 2, 1])
    cls = g.weight("cls", (1, 1, VIT_HIDDEN), 0.02)
    x = g.op("Concat", [cls, tokens], axis=1)
    x = g.op("Add", [x, g.weight("position", (1, VIT_TOKENS, VIT_HIDDEN), 0.02)])
    for layer in range(VIT_LAYERS):
        p = f"l{layer}."
        x = g.op(
            "Add",
            [x, _attention(g, _vit_norm(g, x, f"{p}norm1"), p, VIT_TOKENS, VIT_HIDDEN, VIT_HEADS)],
        )
        hidden = _gelu(g, g.dense(_vit_norm(g, x, f"{p}norm2"), f"{p}fc1", VIT_HIDDEN, VIT_MLP))
        x = g.op("Add", [x, g.dense(hidden, f"{p}fc2", VIT_MLP, VIT_HIDDEN)])
    x = _vit_norm(g, x, "norm")
    first = g.const("cls.index", np.array(0, np.int64))
    x = g.op("Gather", [x, first], axis=1)
    y = g.dense(x, "head", VIT_HIDDEN, 1000)
    return _finish(g, "vit_b16", "input", [1, 3, 224, 224], y, [1, 1000])


def densenet121() -> ModelProto:
    """DenseNet-121 (onnx's light model) with random weights."""
    return randomized(light_model("densenet121"), seed=13)


BUILDERS = {"mobilenet_v2": mobilenet_v2, "vit_b16": vit_b16, "densenet121": densenet121}
