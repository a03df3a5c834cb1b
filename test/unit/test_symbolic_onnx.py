"""ONNX models with a symbolic batch: `compile_onnx(model, dynamic=True)` keeps each
`dim_param` as a symbolic dimension and compiles once for every batch size."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.runtime import jit

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _mlp(second: str = "MatMul", batch: str = "batch") -> tuple[object, list[np.ndarray]]:
    """x[batch, 8] -> Gemm(transB) -> Relu -> MatMul -> Add -> Sigmoid -> y[batch, 4]."""
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((16, 8)), rng.standard_normal(16)
    w2, b2 = rng.standard_normal((16, 4)), rng.standard_normal(4)
    weights = [a.astype(np.float32) for a in (w1, b1, w2, b2)]
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node(second, ["r", "w2"], ["m"]),
        helper.make_node("Add", ["m", "b2"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        [numpy_helper.from_array(a, n) for a, n in zip(weights, ("w1", "b1", "w2", "b2"))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), weights


def _reference(x: np.ndarray, w1, b1, w2, b2) -> np.ndarray:
    return 1 / (1 + np.exp(-(np.maximum(x @ w1.T + b1, 0) @ w2 + b2)))


def test_mlp_with_a_symbolic_batch_compiles_once():
    model, weights = _mlp()
    module = dlc.compile_onnx(model, dynamic=True)
    assert "<%batch x 8 x f32>" in module.ir("graph")
    compiled = jit.NATIVE_COMPILES[0]
    rng = np.random.default_rng(1)
    for n in (1, 5, 64, 300):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_allclose(module.mlp(x), _reference(x, *weights), rtol=1e-5, atol=1e-6)
    assert jit.NATIVE_COMPILES[0] == compiled
    assert module.stats("mlp")["compiles"] == 1


def test_input_shapes_still_fix_the_batch():
    model, weights = _mlp()
    module = dlc.compile_onnx(model, dynamic=True, input_shapes={"x": (3, 8)})
    assert "<3 x 8 x f32>" in module.ir("graph")
    x = np.ones((3, 8), np.float32)
    np.testing.assert_allclose(module.mlp(x), _reference(x, *weights), rtol=1e-5)


def test_without_dynamic_the_batch_must_be_given():
    model, _ = _mlp()
    with pytest.raises(dlc.DiagnosticError, match="input 'x': dynamic shape"):
        dlc.compile_onnx(model)


def test_node_outside_the_subset_names_the_dimension():
    model, _ = _mlp(second="Softsign")
    model.graph.node[2].ClearField("input")
    model.graph.node[2].input.append("r")
    model.graph.node[3].input[0] = "m"  # Add(Softsign(r)[batch, 16], b2[4]) would not fit:
    model.graph.node[3].input[1] = "b1"  # add the 16-element bias instead
    model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 16
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile_onnx(model, dynamic=True)
    assert "node #2 (Softsign)" in str(info.value)
    assert "not supported yet with symbolic dimension %batch" in str(info.value)


def test_unnamed_dynamic_dimension_is_reported():
    model, _ = _mlp(batch="")
    with pytest.raises(dlc.DiagnosticError, match="has an unnamed dynamic dimension"):
        dlc.compile_onnx(model, dynamic=True)
