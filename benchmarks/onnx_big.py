"""ONNX models whose weights dominate a compile's memory, built with `onnx.helper` and
random weights (no torch needed), for `tools/bench_compile.py`:

- AlexNet (batch 1, 224×224; 61 M parameters, 244 MB of f32), laid out as
  `torch.onnx.export` writes torchvision's model: Conv + Relu, MaxPool, Flatten and
  `Gemm(transB=1)` classifier layers whose weights are stored [out, in];
- an ALBERT-base-like encoder (sequence 128, hidden 768, 12 layers): one layer's
  weights shared by all 12 layers, as ALBERT's export writes them (every weight is read
  by 12 nodes), after the factorized embedding's 128 -> 768 projection; and ALBERT
  xxlarge (transformers' default configuration, two layers: 0.8 GB of weights);
- an MLP of four 4096-wide `MatMul` layers (4096 -> 4096 ×4 -> 1000; 54 M parameters).
"""

from __future__ import annotations

import math

import numpy as np
from onnx import ModelProto
from onnx_workloads import _attention, _gelu, _Graph
from onnx_zoo import _finish

ALEXNET_FEATURES = [(3, 64, 11, 4, 2, True), (64, 192, 5, 1, 2, True), (192, 384, 3, 1, 1, False),
                    (384, 256, 3, 1, 1, False), (256, 256, 3, 1, 1, True)]  # fmt: skip
"""(in, out, kernel, stride, pad, max-pool after) of AlexNet's convolutions."""


def _linear(g: _Graph, x: str, name: str, n_in: int, n_out: int, relu: bool) -> str:
    """torch.nn.Linear as exported: Gemm with the weight [out, in] and transB=1."""
    w = g.weight(f"{name}.weight", (n_out, n_in), 1 / math.sqrt(n_in))
    b = g.weight(f"{name}.bias", (n_out,), 0.02)
    y = g.op("Gemm", [x, w, b], transB=1)
    return g.op("Relu", [y]) if relu else y


def alexnet(seed: int = 21) -> ModelProto:
    """AlexNet: input [1, 3, 224, 224] -> logits [1, 1000]."""
    g = _Graph(np.random.default_rng(seed))
    x = "input"
    for i, (c_in, c_out, k, stride, pad, pool) in enumerate(ALEXNET_FEATURES):
        w = g.weight(f"features.{i}.weight", (c_out, c_in, k, k), math.sqrt(2 / (c_in * k * k)))
        b = g.weight(f"features.{i}.bias", (c_out,), 0.02)
        x = g.op("Relu", [g.op("Conv", [x, w, b], strides=[stride] * 2, pads=[pad] * 4)])
        if pool:
            x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    x = g.op("Flatten", [x], axis=1)
    x = _linear(g, x, "classifier.1", 256 * 6 * 6, 4096, True)
    x = _linear(g, x, "classifier.4", 4096, 4096, True)
    y = _linear(g, x, "classifier.6", 4096, 1000, False)
    return _finish(g, "alexnet", "input", [1, 3, 224, 224], y, [1, 1000])


class _SharedGraph(_Graph):
    """A graph whose weights and constants of the same name are one initializer."""

    def weight(self, name: str, shape: tuple[int, ...], scale: float) -> str:
        if any(init.name == name for init in self.inits):
            return name
        return super().weight(name, shape, scale)

    def const(self, name: str, value: np.ndarray) -> str:
        if any(init.name == name for init in self.inits):
            return name
        return super().const(name, value)


ALBERT_EMBED = 128


def albert(
    seed: int = 22,
    hidden: int = 768,
    heads: int = 12,
    ffn: int = 3072,
    layers: int = 12,
    tokens: int = 128,
) -> ModelProto:
    """ALBERT-like: token embeddings [1, tokens, 128] (the table lookup done outside)
    -> hidden states [1, tokens, hidden]; `layers` layers sharing one layer's weights.
    The defaults are ALBERT-base; `albert_xxlarge` is transformers' default
    configuration."""
    g = _SharedGraph(np.random.default_rng(seed))
    position = g.weight("embeddings.position", (1, tokens, ALBERT_EMBED), 0.02)
    x = g.op("Add", ["embedded", position])
    x = g.dense(x, "embeddings.project", ALBERT_EMBED, hidden)
    for _ in range(layers):
        attention = _attention(g, x, "shared.", tokens, hidden, heads)
        x = g.layer_norm(g.op("Add", [x, attention]), "shared.attn.norm", hidden)
        inner = _gelu(g, g.dense(x, "shared.ffn.in", hidden, ffn))
        out = g.dense(inner, "shared.ffn.out", ffn, hidden)
        x = g.layer_norm(g.op("Add", [x, out]), "shared.ffn.norm", hidden)
    return _finish(g, "albert", "embedded", [1, tokens, ALBERT_EMBED], x, [1, tokens, hidden])


def albert_xxlarge() -> ModelProto:
    """transformers' default `AlbertConfig` (xxlarge: hidden 4096, 64 heads, FFN
    16384; 0.8 GB of weights) with two layers and 32 tokens, as tools/model_zoo.py
    exports it."""
    return albert(hidden=4096, heads=64, ffn=16384, layers=2, tokens=32)


def mlp(seed: int = 23, width: int = 4096, layers: int = 4) -> ModelProto:
    """An MLP: input [1, width] -> logits [1, 1000] through `layers` ReLU layers."""
    g = _Graph(np.random.default_rng(seed))
    x = "input"
    for i in range(layers):
        x = g.op("Relu", [g.dense(x, f"fc{i}", width, width)])
    y = g.dense(x, "head", width, 1000)
    return _finish(g, "mlp", "input", [1, width], y, [1, 1000])


BUILDERS = {"alexnet": alexnet, "albert": albert, "albert_xxlarge": albert_xxlarge, "mlp_4096": mlp}
