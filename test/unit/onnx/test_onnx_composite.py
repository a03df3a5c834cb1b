"""ONNX Einsum and TopK through the graph dialect's einsum and top-k ops: compiled by
dlc and interpreted, against onnx's reference implementation; the refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, node, run

import dlc.onnx
from dlc.onnx import OnnxImportError


def _model(op, inputs, outputs, inits=(), opset=18, **attrs) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node(op, list(inputs) + [n for n, _ in inits], list(outputs), **attrs)], "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
        [numpy_helper.from_array(v, n) for n, v in inits],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, *args: np.ndarray, rtol: float = 1e-5) -> None:
    names = [i.name for i in model.graph.input]
    want = ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))
    for got in (run(model, *args), interpret(model, *args)):
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=1e-6
            )


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),  # implicit result, broadcast ellipsis
        ("b i j , b j k -> b k i", [(2, 3, 4), (2, 4, 5)]),
        ("ii...->i", [(3, 3, 2)]),
        ("i,j,k->ijk", [(2,), (3,), (2,)]),
    ],
)
def test_einsum_matches_onnx_reference(equation, shapes):
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    inputs = {f"x{i}": (TensorProto.FLOAT, s) for i, s in enumerate(shapes)}
    _check(_model("Einsum", inputs, {"y": TensorProto.FLOAT}, equation=equation), *args)


def test_f16_einsum_sums_in_f32():
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal((4, 64)).astype(np.float16) for _ in range(2))
    model = _model("Einsum", {"a": (TensorProto.FLOAT16, (4, 64)), "b": (TensorProto.FLOAT16, (4, 64))},
                   {"y": TensorProto.FLOAT16}, equation="ij,kj->ik")  # fmt: skip
    want = (a.astype(np.float32) @ b.astype(np.float32).T).astype(np.float16)
    np.testing.assert_array_equal(run(model, a, b), want)


@pytest.mark.parametrize(("largest", "axis"), [(1, -1), (0, 0)])
def test_top_k_values_and_indices(largest, axis):
    x = np.array([[3, 1, 3, np.nan], [2, 2, -np.inf, 0], [1, 5, 0, 0]], np.float32)
    model = _model("TopK", {"x": (TensorProto.FLOAT, (3, 4))},
                   {"v": TensorProto.FLOAT, "i": TensorProto.INT64},
                   [("k", np.array([2], np.int64))], largest=largest, axis=axis)  # fmt: skip
    _check(model, x)


def test_top_k_of_opset_1_with_only_indices_read():
    x = np.arange(12, dtype=np.int32).reshape(3, 4) % 5
    graph = helper.make_graph(
        [node("TopK", ["x"], ["", "i"], k=3)], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, (3, 4))],
        [helper.make_tensor_value_info("i", TensorProto.INT64, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 1)])
    want = np.argsort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(run(model, x), want)


@pytest.mark.parametrize(
    ("op", "inputs", "inits", "attrs", "message"),
    [
        ("TopK", {"x": (TensorProto.FLOAT, (2, 3))}, [("k", np.array([0], np.int64))], {},
         "topK: count 0 must be in [1, 3] for <2 x 3 x f32> along 1"),
        ("Einsum", {"x": (TensorProto.FLOAT, (2, 3))}, [], {"equation": "ij,jk->ik"},
         "equation 'ij,jk->ik' has 2 terms for 1 inputs"),
        ("Einsum", {"x": (TensorProto.FLOAT, (2, 3))}, [], {"equation": "ijk->i"},
         "equation 'ijk->i' does not fit the inputs' ranks"),
        ("Einsum", {"x": (TensorProto.FLOAT, (2, 3))}, [], {"equation": "ij->k"},
         "einsum: result index 'k' is in no operand"),
    ],
)  # fmt: skip
def test_refusals_say_why(op, inputs, inits, attrs, message):
    model = _model(op, inputs, {"y": TensorProto.FLOAT}, inits, **attrs)
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' ({op}): {message}"]
