"""A small GPT-2-style decoder with a KV cache, built with `onnx.helper` and random
weights (`tools/bench_decoder.py`, the dynamic-shapes tests).

One call runs `sequence_length` new tokens (a whole prompt, or one generated token):
`input_ids` and `position_ids` [1, sequence_length], the additive `attention_bias` [1,
1, sequence_length, past_sequence_length + sequence_length] (0 where a token may look,
a large negative number where it may not: `causal_bias`) and every layer's cache
`past_key_L` / `past_value_L` [1, heads, past_sequence_length, head] in; the `logits`
[1, sequence_length, vocab] and the grown caches `present_key_L` / `present_value_L`
[1, heads, past_sequence_length + sequence_length, head] out, in that order (as
transformers' exports name them). A layer is pre-LayerNorm GPT-2: LayerNorm,
attention (one projection to queries, keys and values, `Split` in three, heads by
`Reshape` and `Transpose`) whose keys and values are the past ones concatenated with
the new tokens' (`Concat` along the sequence axis), a residual add, LayerNorm, a GELU
feed-forward layer (4 × hidden, the erf form), a residual add; a final LayerNorm and a
projection to the vocabulary.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper
from onnx_workloads import _gelu, _Graph

PAST, SEQ = "past_sequence_length", "sequence_length"
MASKED = -1e9
"""The bias of a position a token may not attend to."""


def _attention(g: _Graph, x: str, p: str, hidden: int, heads: int) -> tuple[str, str, str]:
    """Self-attention of the new tokens over their layer's cache and themselves: the
    output [1, seq, hidden] and the present keys and values."""
    head = hidden // heads
    qkv = g.dense(x, f"{p}attn.c_attn", hidden, 3 * hidden)  # GPT-2's fused projection
    sizes = g.const(f"{p}attn.split", np.array([hidden] * 3, np.int64))
    parts = [f"{p}attn.{n}" for n in "qkv"]
    g.nodes.append(helper.make_node("Split", [qkv, sizes], parts, name=f"{p}attn.split", axis=-1))
    split = g.const(f"{p}heads_shape", np.array([1, -1, heads, head], np.int64))
    q, k, v = (
        g.op("Transpose", [g.op("Reshape", [part, split])], perm=[0, 2, 1, 3]) for part in parts
    )
    keys = g.op("Concat", [f"past_key_{p[:-1]}", k], axis=2)
    values = g.op("Concat", [f"past_value_{p[:-1]}", v], axis=2)
    scale = g.const(f"{p}attn.scale", np.array(1 / math.sqrt(head), np.float32))
    scores = g.op("MatMul", [q, g.op("Transpose", [keys], perm=[0, 1, 3, 2])])
    biased = g.op("Add", [g.op("Mul", [scores, scale]), "attention_bias"])
    probs = g.op("Softmax", [biased], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, values])], perm=[0, 2, 1, 3])
    flat = g.const(f"{p}hidden_shape", np.array([1, -1, hidden], np.int64))
    out = g.dense(g.op("Reshape", [context, flat]), f"{p}attn.out", hidden, hidden)
    return out, keys, values


def gpt2_decoder(
    seed: int = 21,
    layers: int = 4,
    hidden: int = 256,
    heads: int = 4,
    vocab: int = 1000,
    positions: int = 512,
) -> ModelProto:
    """The decoder (module doc): `layers` layers `hidden` wide with `heads` attention
    heads, a `vocab`-word table, `positions` learned positions."""
    g = _Graph(np.random.default_rng(seed))
    tokens = g.op("Gather", [g.weight("wte", (vocab, hidden), 0.1), "input_ids"], axis=0)
    places = g.op("Gather", [g.weight("wpe", (positions, hidden), 0.1), "position_ids"], axis=0)
    x = g.op("Add", [tokens, places])
    presents: list[str] = []
    for layer in range(layers):
        p = f"{layer}."
        out, keys, values = _attention(g, g.layer_norm(x, f"{p}ln1", hidden), p, hidden, heads)
        presents += [keys, values]
        x = g.op("Add", [x, out])
        inner = _gelu(
            g, g.dense(g.layer_norm(x, f"{p}ln2", hidden), f"{p}mlp.in", hidden, 4 * hidden)
        )
        x = g.op("Add", [x, g.dense(inner, f"{p}mlp.out", 4 * hidden, hidden)])
    logits = g.op(
        "MatMul", [g.layer_norm(x, "ln_f", hidden), g.weight("lm_head", (hidden, vocab), 0.5)]
    )
    total = f"{PAST} + {SEQ}"
    value = helper.make_tensor_value_info
    inputs = [value(n, TensorProto.INT64, [1, SEQ]) for n in ("input_ids", "position_ids")]
    inputs.append(value("attention_bias", TensorProto.FLOAT, [1, 1, SEQ, total]))
    inputs += [
        value(f"past_{kind}_{layer}", TensorProto.FLOAT, [1, heads, PAST, hidden // heads])
        for layer in range(layers)
        for kind in ("key", "value")
    ]
    outputs = [value(logits, TensorProto.FLOAT, [1, SEQ, vocab])]
    outputs += [value(n, TensorProto.FLOAT, [1, heads, total, hidden // heads]) for n in presents]
    graph = helper.make_graph(g.nodes, "gpt2_decoder", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime release accepts for opset 17
    onnx.checker.check_model(model)
    return model


def empty_cache(model: ModelProto) -> list[np.ndarray]:
    """Each `past_*` input of decoder `model` with no position yet (sequence 0)."""
    shapes = [
        [d.dim_value if d.HasField("dim_value") else 0 for d in v.type.tensor_type.shape.dim]
        for v in model.graph.input
        if v.name.startswith("past_")
    ]
    return [np.zeros(shape, np.float32) for shape in shapes]


def step_inputs(tokens: list[int], past: int) -> list[np.ndarray]:
    """`input_ids`, `position_ids` and `attention_bias` of `tokens` following `past`
    cached ones: each token sees the cache and the tokens up to itself."""
    seq = len(tokens)
    ids = np.array([tokens], np.int64)
    positions = np.arange(past, past + seq, dtype=np.int64)[None]
    later = np.arange(past + seq)[None, :] > np.arange(past, past + seq)[:, None]
    bias = np.where(later, MASKED, 0.0).astype(np.float32)[None, None]
    return [ids, positions, bias]
