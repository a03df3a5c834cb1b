"""Whole ONNX models through dlc: an MLP and a small CNN end to end (f32 within rtol
1e-4 / atol 1e-5 of a float64 NumPy forward pass), the entry function's name and
parameters, multiple outputs, files, and printing the imported module."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx_models import conv, make, node, pool, randn

import dlc
import dlc.onnx
from dlc.semantics.interpreter import run_function

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _mlp() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    weights = {
        "w1": randn(8, 16, seed=1),
        "b1": randn(16, seed=2),
        "w2": randn(16, 4, seed=3),
        "b2": randn(4, seed=4),
    }
    nodes = [
        node("MatMul", ["input.1", "w1"], ["h"]),
        node("Add", ["h", "b1"], ["hb"]),
        node("Tanh", ["hb"], ["t"]),
        node("Gemm", ["t", "w2", "b2"], ["logits"]),
        node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    return make(nodes, {"input.1": (5, 8)}, {"probs": (5, 4)}, weights, opset=13), weights


def test_mlp_end_to_end():
    model, w = _mlp()
    x = randn(5, 8, seed=9)
    logits = np.tanh(x.astype(np.float64) @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    mod = dlc.compile_onnx(model)
    np.testing.assert_allclose(mod.g(x), expected, **TOL)
    np.testing.assert_allclose(mod["g"](**{"input.1": x}), expected, **TOL)  # by input name
    np.testing.assert_allclose(run_function(dlc.onnx.load(model), "g", [x]), expected, **TOL)


def _cnn() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    weights = {
        "k": randn(4, 3, 3, 3, seed=1) * 0.3,
        "kb": randn(4, seed=2),
        "fc": randn(10, 64, seed=3) * 0.1,
        "fb": randn(10, seed=4),
    }
    nodes = [
        node("Conv", ["image", "k", "kb"], ["c"], pads=[1, 1, 1, 1]),
        node("Relu", ["c"], ["r"]),
        node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Flatten", ["p"], ["f"]),
        node("Gemm", ["f", "fc", "fb"], ["logits"], transB=1),
        node("Softmax", ["logits"], ["probs"]),
    ]
    return make(
        nodes, {"image": ("batch", 3, 8, 8)}, {"probs": ("batch", 10)}, weights, opset=13
    ), weights


def test_small_cnn_end_to_end():
    model, w = _cnn()
    x = randn(2, 3, 8, 8, seed=9)
    c = conv(x, w["k"], [1, 1], [(1, 1), (1, 1)], [1, 1]) + w["kb"].reshape(1, 4, 1, 1)
    p = pool(np.maximum(c, 0), [2, 2], [2, 2], [(0, 0), (0, 0)], "max")
    logits = p.reshape(2, 64) @ w["fc"].T + w["fb"]
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    mod = dlc.compile_onnx(model, input_shapes={"image": (2, 3, 8, 8)}, opt_level=3)
    np.testing.assert_allclose(mod.g(x), expected, **TOL)


def test_model_file_and_entry_function(tmp_path):
    model, _ = _mlp()
    model.graph.name = "torch-jit export"
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    module = dlc.onnx.load(path)
    text = dlc.print_module(module)
    assert 'module "torch-jit export"' in text
    assert "func @torch_jit_export: (<5 x 8 x f32>) -> <5 x 4 x f32>" in text
    assert "'entry(%input.1: <5 x 8 x f32>):" in text
    assert dlc.print_module(dlc.parse(text)) == text  # DLVM text round-trips
    mod = dlc.compile_onnx(str(path))
    assert mod.torch_jit_export(randn(5, 8)).shape == (5, 4)


def test_imported_module_prints_as_mlir():
    model, _ = _mlp()
    assert "graph.dot" in str(dlc.onnx.load(model))  # xDSL's generic MLIR syntax


def test_several_outputs_return_a_tuple():
    x = randn(2, 3)
    model = make(
        [node("Relu", ["x"], ["r"]), node("Neg", ["x"], ["n"])],
        {"x": (2, 3)},
        {"r": (2, 3), "n": (2, 3)},
    )
    r, n = dlc.compile_onnx(model).g(x)
    np.testing.assert_array_equal(r, np.maximum(x, 0))
    np.testing.assert_array_equal(n, -x)


def test_f64_models():
    x = np.random.default_rng(0).standard_normal((2, 3))
    model = make(
        [node("Sigmoid", ["x"], ["y"])], {"x": (2, 3)}, {"y": (2, 3)}, dtype=onnx.TensorProto.DOUBLE
    )
    np.testing.assert_allclose(dlc.compile_onnx(model).g(x), 1 / (1 + np.exp(-x)), rtol=1e-12)


def test_splat_weights_print_as_one_scalar():
    model = make(
        [node("Mul", ["x", "w"], ["y"])],
        {"x": (64, 64)},
        {"y": None},
        {"w": np.full((64, 64), 0.5, np.float32)},
    )
    assert "literal 0.5: <64 x 64 x f32>" in dlc.print_module(dlc.onnx.load(model))


@pytest.mark.parametrize("value", [None, "model.onnx", 3])
def test_load_rejects_what_is_no_model(value, tmp_path):
    if value is None:
        with pytest.raises(TypeError, match="expected an onnx.ModelProto or a path, got NoneType"):
            dlc.onnx.load(value)
    elif value == "model.onnx":
        path = tmp_path / value
        path.write_bytes(b"\xff\xff not protobuf")
        with pytest.raises(dlc.DiagnosticError, match="cannot read .* as an ONNX model"):
            dlc.onnx.load(path)
    else:
        with pytest.raises(TypeError, match="input_shapes: expected a mapping, got int"):
            dlc.onnx.load(_mlp()[0], value)
