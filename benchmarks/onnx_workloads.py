"""The ONNX models of benchmarks W8 and W9, built on demand (not committed: they are
tens of megabytes of random weights).

- W8: ResNet-50, batch 1, 224×224: the graph of onnx's `light_resnet50.onnx` (the
  model zoo's ResNet-50 whose weights onnx replaced by `ConstantOfShape` fills) with
  random weights (`randomized`);
- W9: one BERT-base encoder layer (sequence 128, hidden 768, 12 heads, FFN 3072):
  token-embedding Gather from a 30522×768 table plus position embeddings, LayerNorm,
  self-attention, GELU (the erf form), LayerNorm, built with `onnx.helper`
  (`bert_layer`).

    python benchmarks/onnx_workloads.py OUT_DIR    # writes resnet50.onnx, bert_layer.onnx, ...

- W13: MobileNetV2 1.0 (batch 1, 224×224) built with `onnx.helper`: batch norms
  folded into the convolutions (as torch.onnx.export writes them), ReLU6 as Clip,
  depthwise 3×3 convolutions (`mobilenet_v2`).

`*_fill` variants replace the weights by constant fills (`ConstantOfShape`, one scalar
each): the same computation without tens of millions of weight elements to import
and compile.

`randomized` also gives the random-weight variants of every light model the model
tests compare with onnxruntime.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
"""onnx's light models: `light_<name>.onnx`."""

SEQUENCE, HIDDEN, HEADS, FFN, VOCAB = 128, 768, 12, 3072, 30522
MAX_POSITIONS = 512
"""The position table of a model with a symbolic sequence length (`bert_layer(dynamic=True)`)."""


def light_model(name: str) -> ModelProto:
    """onnx's `light_<name>.onnx` (resnet50, squeezenet, ...)."""
    return onnx.load(str(LIGHT / f"light_{name}.onnx"))


def _consumers(model: ModelProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, k))
    return uses


def _role(name: str, uses: dict[str, list[tuple[onnx.NodeProto, int]]]) -> tuple[str, int]:
    """The op and input index that reads `name` (through Unsqueeze and Reshape)."""
    for _ in range(4):
        readers = uses.get(name, [])
        if not readers:
            return "", 0
        node, k = readers[0]
        if node.op_type not in ("Unsqueeze", "Reshape") or k != 0:
            return node.op_type, k
        name = node.output[0]
    return "", 0


def _weights(
    op: str, k: int, shape: tuple[int, ...], trans_b: bool, rng: np.random.Generator
) -> np.ndarray:
    """Random values that keep activations of order one through deep networks: He
    normal weights, batch norms near the identity, small biases."""
    if op in ("Conv", "Gemm", "MatMul") and k == 1 and len(shape) >= 2:
        fan_in = int(np.prod(shape[1:])) if op == "Conv" else shape[1 if trans_b else 0]
        return rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)
    if (op == "BatchNormalization" and k in (1, 4)) or op == "Mul":
        return rng.uniform(0.5, 1.5, shape)
    return rng.uniform(-0.2, 0.2, shape)


def randomized(model: ModelProto, seed: int = 0) -> ModelProto:
    """`model` with every `ConstantOfShape` fill (the light models' weights) replaced
    by an initializer of random float32 values suited to the op that reads it."""
    out = ModelProto()
    out.CopyFrom(model)
    rng = np.random.default_rng(seed)
    shapes = {i.name: numpy_helper.to_array(i) for i in out.graph.initializer}
    uses = _consumers(out)
    kept = []
    for node in out.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        op, k = _role(node.output[0], uses)
        reader = uses[node.output[0]][0][0] if node.output[0] in uses else None
        trans_b = bool(reader and any(a.name == "transB" and a.i for a in reader.attribute))
        value = _weights(op, k, shape, trans_b, rng).astype(np.float32)
        out.graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.ir_version = max(out.ir_version, 4)  # initializers that are not graph inputs
    return out


def resnet50() -> ModelProto:
    """W8: ResNet-50 (batch 1, 3×224×224 input, 1000 classes) with random weights."""
    return randomized(light_model("resnet50"), seed=8)


# ---- W9: a BERT-base encoder layer ------------------------------------------------


class _Graph:
    """Nodes and initializers of a graph under construction; with `fill`, weights are
    `ConstantOfShape` fills of `scale` (as in onnx's light models) instead of random
    initializers."""

    def __init__(self, rng: np.random.Generator, fill: bool = False):
        self.rng, self.nodes, self.inits = rng, [], []
        self.count, self.fill = 0, fill

    def weight(self, name: str, shape: tuple[int, ...], scale: float) -> str:
        if self.fill:
            dims = self.const(f"{name}.shape", np.array(shape, np.int64))
            value = helper.make_tensor("value", TensorProto.FLOAT, [1], [scale])
            self.nodes.append(helper.make_node("ConstantOfShape", [dims], [name], value=value))
            return name
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: object) -> str:
        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def dense(self, x: str, name: str, n_in: int, n_out: int) -> str:
        w = self.weight(f"{name}.weight", (n_in, n_out), 1 / math.sqrt(n_in))
        b = self.weight(f"{name}.bias", (n_out,), 0.02)
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, name: str, hidden: int = HIDDEN) -> str:
        """A LayerNormalization node over the last axis (`hidden` wide): gamma 1, beta 0."""
        gamma = self.const(f"{name}.gamma", np.ones(hidden, np.float32))
        beta = self.const(f"{name}.beta", np.zeros(hidden, np.float32))
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)


def _attention(
    g: _Graph,
    x: str,
    prefix: str = "",
    tokens: int = SEQUENCE,  # -1: as long as the input
    hidden: int = HIDDEN,
    heads: int = HEADS,
) -> str:
    """Multi-head self-attention: [1, tokens, hidden] -> [1, tokens, hidden]."""
    shape = g.const(f"{prefix}heads_shape", np.array([1, tokens, heads, hidden // heads], np.int64))
    # tokens -1: the sequence length of the input (a model with a symbolic length)
    q, k, v = (
        g.op("Transpose", [g.op("Reshape", [g.dense(x, f"{prefix}attn.{n}", hidden, hidden), shape])],
             perm=[0, 2, 1, 3])
        for n in "qkv"
    )  # fmt: skip
    scale = g.const(f"{prefix}attn.scale", np.array(1 / math.sqrt(hidden // heads), np.float32))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    probs = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, kt]), scale])], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    flat = g.const(f"{prefix}hidden_shape", np.array([1, tokens, hidden], np.int64))
    return g.dense(g.op("Reshape", [context, flat]), f"{prefix}attn.out", hidden, hidden)


def _gelu(g: _Graph, x: str) -> str:
    """0.5 · x · (1 + erf(x / √2))."""
    root2 = g.const(f"{x}.sqrt2", np.array(math.sqrt(2.0), np.float32))
    one = g.const(f"{x}.one", np.array(1.0, np.float32))
    half = g.const(f"{x}.half", np.array(0.5, np.float32))
    erf = g.op("Erf", [g.op("Div", [x, root2])])
    return g.op("Mul", [g.op("Mul", [x, half]), g.op("Add", [erf, one])])


def bert_layer(
    seed: int = 9,
    fill: bool = False,
    layers: int = 1,
    dynamic: bool = False,
    *,
    hidden: int = HIDDEN,
    heads: int = HEADS,
    ffn: int = FFN,
    vocab: int = VOCAB,
    positions: int = MAX_POSITIONS,
) -> ModelProto:
    """W9: input_ids int64 [1, 128] -> hidden states f32 [1, 128, 768]; `fill`:
    constant-filled weights instead of random ones; `layers` encoder layers (BERT-base:
    12, `bert_base`). `dynamic`: the sequence length is the symbolic dimension `seq`
    (up to `positions`), the model takes `position_ids` [1, seq] too (as BERT exports
    may) and gathers their embeddings, its reshapes say -1 for the length. The sizes
    default to BERT-base's: `hidden` wide, `heads` attention heads, `ffn` wide
    feed-forward layers, a `vocab`-word table (small ones make test models)."""
    g = _Graph(np.random.default_rng(seed), fill)
    table = g.weight("embeddings.word", (vocab, hidden), 0.02)
    tokens: int | str = "seq" if dynamic else SEQUENCE
    if dynamic:
        table_p = g.weight("embeddings.position", (positions, hidden), 0.02)
        places = g.op("Gather", [table_p, "position_ids"], axis=0)
    else:
        places = g.weight("embeddings.position", (1, SEQUENCE, hidden), 0.02)
    embedded = g.op("Add", [g.op("Gather", [table, "input_ids"], axis=0), places])
    x = g.layer_norm(embedded, "embeddings.norm", hidden)
    for layer in range(layers):
        p = f"layer{layer}." if layers > 1 else ""
        attention = _attention(g, x, p, -1 if dynamic else SEQUENCE, hidden, heads)
        x = g.layer_norm(g.op("Add", [x, attention]), f"{p}attn.norm", hidden)
        inner = _gelu(g, g.dense(x, f"{p}ffn.in", hidden, ffn))
        out = g.dense(inner, f"{p}ffn.out", ffn, hidden)
        x = g.layer_norm(g.op("Add", [x, out]), f"{p}ffn.norm", hidden)
    graph = helper.make_graph(
        g.nodes,
        "bert_layer" if layers == 1 else "bert",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, [1, tokens])
            for name in ("input_ids", "position_ids")[: 2 if dynamic else 1]
        ],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, tokens, hidden])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime release accepts for opset 17
    onnx.checker.check_model(model)
    return model


def bert_base(seed: int = 9, dynamic: bool = False) -> ModelProto:
    """BERT-base: 12 encoder layers, sequence 128 or symbolic (random weights)."""
    return bert_layer(seed, layers=12, dynamic=dynamic)


def bert_inputs(seed: int = 0, length: int = SEQUENCE) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, (1, length), dtype=np.int64)


# ---- W13: MobileNetV2 ---------------------------------------------------------------

MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip
"""Inverted residual stages of MobileNetV2 1.0: (expansion t, channels c, blocks n,
first stride s)."""


def _conv(g: _Graph, x: str, ci: int, co: int, k: int, stride: int = 1, groups: int = 1,
          relu6: bool = True) -> str:  # fmt: skip
    """Conv with bias (batch norm folded into it, as torch.onnx.export writes it), then
    ReLU6 (Clip to [0, 6]) unless `relu6` is False."""
    fan_in = ci // groups * k * k
    w = g.weight(f"conv{g.count}.weight", (co, ci // groups, k, k), math.sqrt(2 / fan_in))
    b = g.weight(f"conv{g.count}.bias", (co,), 0.02)
    pad = k // 2
    y = g.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4,
             group=groups)  # fmt: skip
    if not relu6:
        return y
    lo, hi = (
        g.const(f"{y}.lo", np.array(0, np.float32)),
        g.const(f"{y}.hi", np.array(6, np.float32)),
    )
    return g.op("Clip", [y, lo, hi])


def mobilenet_v2(seed: int = 13, fill: bool = False) -> ModelProto:
    """W13: MobileNetV2 1.0 (batch 1, 3×224×224, 1000 classes) with random weights,
    built with `onnx.helper` in the form torch.onnx.export gives it: batch norms folded
    into the convolutions' biases, ReLU6 as Clip, residual Adds where a block keeps its
    shape; depthwise 3×3 convolutions (group = channels) between 1×1 expansions and
    projections; `fill`: constant-filled weights."""
    g = _Graph(np.random.default_rng(seed), fill)
    x = _conv(g, "image", 3, 32, 3, stride=2)
    channels = 32
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = channels * t
            y = _conv(g, x, channels, hidden, 1) if t != 1 else x
            y = _conv(g, y, hidden, hidden, 3, stride=stride, groups=hidden)
            y = _conv(g, y, hidden, c, 1, relu6=False)
            x = g.op("Add", [x, y]) if stride == 1 and channels == c else y
            channels = c
    x = _conv(g, x, channels, 1280, 1)
    flat = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    w = g.weight("classifier.weight", (1000, 1280), 1 / math.sqrt(1280))
    logits = g.op("Gemm", [flat, w, g.weight("classifier.bias", (1000,), 0.02)], transB=1)
    graph = helper.make_graph(
        g.nodes,
        "mobilenet_v2",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 1000])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def resnet50_fill() -> ModelProto:
    """W8's graph with onnx's `ConstantOfShape` weight fills (light_resnet50.onnx)."""
    return light_model("resnet50")


def bert_layer_fill() -> ModelProto:
    return bert_layer(fill=True)


def mobilenet_v2_fill() -> ModelProto:
    return mobilenet_v2(fill=True)


BUILDERS = {
    "resnet50": resnet50,
    "bert_layer": bert_layer,
    "resnet50_fill": resnet50_fill,
    "bert_layer_fill": bert_layer_fill,
    "bert_base": bert_base,
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v2_fill": mobilenet_v2_fill,
}


def ensure(name: str, directory: Path) -> Path:
    """`directory/<name>.onnx`, built when missing."""
    path = directory / f"{name}.onnx"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        onnx.save(BUILDERS[name](), str(tmp))
        tmp.replace(path)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python benchmarks/onnx_workloads.py OUT_DIR")
    for model_name in BUILDERS:
        print(ensure(model_name, Path(sys.argv[1])))
