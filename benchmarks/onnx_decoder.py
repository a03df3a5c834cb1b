"""A small GPT-2-style decoder step with a KV cache, built with `onnx.helper` and random
weights (`tools/bench_decoder.py`, the dynamic-shapes tests).

One call is one generation step: the new token (`input_ids` [1, 1] and its
`position_ids` [1, 1]) and every layer's cache `past_key_L` / `past_value_L` [1, heads,
past_sequence_length, head] in; the next token's `logits` [1, 1, vocab] and the grown
caches `present_key_L` / `present_value_L` [1, heads, past_sequence_length + 1, head]
out, in that order (as transformers' exports name them). A layer is pre-LayerNorm
GPT-2: LayerNorm, attention (one projection to queries, keys and values, `Split` in
three, heads by `Reshape` and `Transpose`) whose keys and values are the past ones
concatenated with the token's (`Concat` along the sequence axis), a residual add, LayerNorm, a GELU
feed-forward layer (4 × hidden, the erf form), a residual add; a final LayerNorm and a
projection to the vocabulary. A token attends to every cached position, so a prompt
fed token by token needs no mask.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper
from onnx_workloads import _gelu, _Graph

PAST = "past_sequence_length"


def _attention_step(g: _Graph, x: str, p: str, hidden: int, heads: int) -> tuple[str, str, str]:
    """Self-attention of one token over its layer's cache: the output [1, 1, hidden]
    and the present keys and values."""
    head = hidden // heads
    qkv = g.dense(x, f"{p}attn.c_attn", hidden, 3 * hidden)  # GPT-2's fused projection
    sizes = g.const(f"{p}attn.split", np.array([hidden] * 3, np.int64))
    parts = [f"{p}attn.{n}" for n in "qkv"]
    g.nodes.append(helper.make_node("Split", [qkv, sizes], parts, name=f"{p}attn.split", axis=-1))
    split = g.const(f"{p}heads_shape", np.array([1, 1, heads, head], np.int64))
    q, k, v = (
        g.op("Transpose", [g.op("Reshape", [part, split])], perm=[0, 2, 1, 3]) for part in parts
    )
    keys = g.op("Concat", [f"past_key_{p[:-1]}", k], axis=2)
    values = g.op("Concat", [f"past_value_{p[:-1]}", v], axis=2)
    scale = g.const(f"{p}attn.scale", np.array(1 / math.sqrt(head), np.float32))
    scores = g.op("MatMul", [q, g.op("Transpose", [keys], perm=[0, 1, 3, 2])])
    probs = g.op("Softmax", [g.op("Mul", [scores, scale])], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, values])], perm=[0, 2, 1, 3])
    flat = g.const(f"{p}hidden_shape", np.array([1, 1, hidden], np.int64))
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
    """The decoder step (module doc): `layers` layers `hidden` wide with `heads`
    attention heads, a `vocab`-word table, `positions` learned positions."""
    g = _Graph(np.random.default_rng(seed))
    tokens = g.op("Gather", [g.weight("wte", (vocab, hidden), 0.1), "input_ids"], axis=0)
    places = g.op("Gather", [g.weight("wpe", (positions, hidden), 0.1), "position_ids"], axis=0)
    x = g.op("Add", [tokens, places])
    presents: list[str] = []
    for layer in range(layers):
        p = f"{layer}."
        out, keys, values = _attention_step(g, g.layer_norm(x, f"{p}ln1", hidden), p, hidden, heads)
        presents += [keys, values]
        x = g.op("Add", [x, out])
        inner = _gelu(
            g, g.dense(g.layer_norm(x, f"{p}ln2", hidden), f"{p}mlp.in", hidden, 4 * hidden)
        )
        x = g.op("Add", [x, g.dense(inner, f"{p}mlp.out", 4 * hidden, hidden)])
    logits = g.op(
        "MatMul", [g.layer_norm(x, "ln_f", hidden), g.weight("lm_head", (hidden, vocab), 0.5)]
    )
    cache = [1, heads, PAST, hidden // heads]
    grown = [1, heads, f"{PAST} + 1", hidden // heads]
    int64 = [
        helper.make_tensor_value_info(n, TensorProto.INT64, [1, 1])
        for n in ("input_ids", "position_ids")
    ]
    pasts = [
        helper.make_tensor_value_info(f"past_{kind}_{layer}", TensorProto.FLOAT, cache)
        for layer in range(layers)
        for kind in ("key", "value")
    ]
    outputs = [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 1, vocab])]
    outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, grown) for n in presents]
    graph = helper.make_graph(g.nodes, "gpt2_decoder", [*int64, *pasts], outputs, g.inits)
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
