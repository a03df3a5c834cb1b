"""A small GPT-2-style decoder step with a KV cache (`benchmarks/onnx_decoder.py`)
imported with `dynamic=True`: the caches' `past_sequence_length` is symbolic, the
`Concat` of the past keys and the new token's makes `%past_sequence_length+1`, and one
compile generates token after token, each matching onnxruntime."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.onnx import load
from dlc.parser import print_module
from dlc.runtime import jit

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import onnx_decoder  # noqa: E402

VOCAB = 50


def test_a_decoder_generates_with_one_compile():
    model = onnx_decoder.gpt2_decoder(layers=2, hidden=32, heads=4, vocab=VOCAB, positions=16)
    before = jit.NATIVE_COMPILES[0]
    module = dlc.compile_onnx(model, dynamic=True)
    assert jit.NATIVE_COMPILES[0] == before + 1
    step = module.gpt2_decoder
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    ours, theirs = onnx_decoder.empty_cache(model), onnx_decoder.empty_cache(model)
    prompt, token = [3, 41, 7], 3
    for position in range(8):
        ids, place = np.array([[token]], np.int64), np.array([[position]], np.int64)
        got = step(ids, place, *ours)
        want = session.run(None, dict(zip(names, [ids, place, *theirs], strict=True)))
        assert len(got) == 5 and got[1].shape == (1, 4, position + 1, 8)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))
        assert int(np.argmax(got[0])) == int(np.argmax(want[0]))
        ours, theirs = list(got[1:]), list(want[1:])
        token = prompt[position + 1] if position + 1 < len(prompt) else int(np.argmax(got[0]))
    assert jit.NATIVE_COMPILES[0] == before + 1  # no step compiled anything
    stats = module.stats("gpt2_decoder")
    assert stats["compiles"] == 1 and stats["sizes_called"] == 8


def test_the_grown_cache_prints_as_a_sum():
    model = onnx_decoder.gpt2_decoder(layers=1, hidden=16, heads=2, vocab=VOCAB, positions=4)
    text = print_module(load(model, dynamic=True))
    assert "%past_key_0: <1 x 2 x %past_sequence_length x 8 x f32>" in text
    assert "(<1 x 1 x 50 x f32>, <1 x 2 x %past_sequence_length+1 x 8 x f32>, " in text


def _split_model(op_type: str) -> onnx.ModelProto:
    """x [seq, 6] -> Split along axis 1 into [2, 4], concatenated back as [4 | 2]; or
    with `op_type` "Slice", x[:1] (rows of the symbolic axis)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 6])
    consts = [helper.make_tensor(n, TensorProto.INT64, [len(v)], v) for n, v in
              [("sizes", [2, 4]), ("zero", [0]), ("one", [1])]]  # fmt: skip
    if op_type == "Split":
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


def test_slice_along_a_symbolic_axis_is_reported():
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile_onnx(_split_model("Slice"), dynamic=True)
    assert "node #0 (Slice)" in str(info.value)
    assert "Slice along symbolic dimension %seq: not supported yet" in str(info.value)
