"""A small GPT-2-style decoder with a KV cache (`benchmarks/onnx_decoder.py`) imported
with `dynamic=True`: the caches' `past_sequence_length` and the new tokens'
`sequence_length` are symbolic, the `Concat` of the past keys and the new ones makes
`%past_sequence_length+%sequence_length`, and one compile runs a prompt and then
generates token after token, each matching onnxruntime. Slice and Split of static axes
with symbolic ones elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.onnx import load
from dlc.parser import print_module
from dlc.runtime import jit
from dlc.runtime.symbolic import ShapeError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import onnx_decoder  # noqa: E402

VOCAB = 50


def test_a_decoder_generates_with_one_compile():
    """A prompt of 3 tokens in one call (`%sequence_length` 3, a causal bias), then 7
    tokens one by one, each the argmax of the last logits."""
    model = onnx_decoder.gpt2_decoder(layers=2, hidden=32, heads=4, vocab=VOCAB, positions=16)
    before = jit.NATIVE_COMPILES[0]
    module = dlc.compile_onnx(model, dynamic=True)
    assert jit.NATIVE_COMPILES[0] == before + 1
    step = module.gpt2_decoder
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    ours, theirs = onnx_decoder.empty_cache(model), onnx_decoder.empty_cache(model)
    tokens, past = [3, 41, 7], 0
    for _ in range(8):
        args = onnx_decoder.step_inputs(tokens, past)
        got = step(*args, *ours)
        want = session.run(None, dict(zip(names, [*args, *theirs], strict=True)))
        past += len(tokens)
        assert len(got) == 5 and got[1].shape == (1, 4, past, 8)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))
        tokens = [int(np.argmax(got[0][0, -1]))]
        assert tokens[0] == int(np.argmax(want[0][0, -1]))
        ours, theirs = list(got[1:]), list(want[1:])
    assert jit.NATIVE_COMPILES[0] == before + 1  # no call compiled anything
    stats = module.stats("gpt2_decoder")
    assert stats["compiles"] == 1 and stats["sizes_called"] == 8


def test_the_grown_cache_is_a_sum():
    """`past_sequence_length + sequence_length` (a dim_param naming the others) is the
    sum of the two dimensions, in the bias the caller passes and in the caches."""
    model = onnx_decoder.gpt2_decoder(layers=1, hidden=16, heads=2, vocab=VOCAB, positions=4)
    text = print_module(load(model, dynamic=True))
    grown = "%past_sequence_length+%sequence_length"
    assert f"%attention_bias: <1 x 1 x %sequence_length x {grown} x f32>" in text
    assert f"(<1 x %sequence_length x 50 x f32>, <1 x 2 x {grown} x 8 x f32>, " in text


def test_a_bias_of_the_wrong_length_is_a_shape_error():
    model = onnx_decoder.gpt2_decoder(layers=1, hidden=16, heads=2, vocab=VOCAB, positions=4)
    step = dlc.compile_onnx(model, dynamic=True).gpt2_decoder
    ids, places, bias = onnx_decoder.step_inputs([1, 2], 0)
    with pytest.raises(ShapeError) as info:
        step(ids, places, bias[..., :1], *onnx_decoder.empty_cache(model))
    assert (
        "@gpt2_decoder: symbolic dimension %past_sequence_length+%sequence_length is 2 "
        "(%past_sequence_length = 0, %sequence_length = 2) but 1 in %attention_bias "
        "(dimension 3)"
    ) in str(info.value)


def _split_model(op_type: str) -> onnx.ModelProto:
    """x [seq, 6] -> Split along axis 1 into [2, 4], concatenated back as [4 | 2]; with
    `op_type` "SplitRows" split in two along the symbolic axis, "Slice" x[:1]."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 6])
    consts = [helper.make_tensor(n, TensorProto.INT64, [len(v)], v) for n, v in
              [("sizes", [2, 4]), ("zero", [0]), ("one", [1])]]  # fmt: skip
    if op_type == "SplitRows":
        nodes = [
            helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2),
            helper.make_node("Concat", ["b", "a"], ["y"], axis=0),
        ]
    elif op_type == "Split":
        nodes = [
            helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
            helper.make_node("Concat", ["b", "a"], ["y"], axis=1),
        ]
    else:
        nodes = [helper.make_node("Slice", ["x", "zero", "one", "zero"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_split_of_a_static_axis_with_a_symbolic_one():
    module = dlc.compile_onnx(_split_model("Split"), dynamic=True)
    for seq in (1, 9):
        x = np.arange(seq * 6, dtype=np.float32).reshape(seq, 6)
        np.testing.assert_array_equal(module.g(x), np.concatenate([x[:, 2:], x[:, :2]], 1))


@pytest.mark.parametrize(("op_type", "name"), [("Slice", "Slice"), ("SplitRows", "Split")])
def test_slice_along_a_symbolic_axis_is_reported(op_type: str, name: str):
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile_onnx(_split_model(op_type), dynamic=True)
    assert f"node #0 ({name})" in str(info.value)
    assert f"{name} along symbolic dimension %seq: not supported yet" in str(info.value)
