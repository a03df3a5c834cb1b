"""ONNX CumSum and CumProd (`exclusive`, `reverse`, negative axes), compiled by dlc and
interpreted, against NumPy; infinities stay in the outputs that include them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_models import interpret, node, run

import dlc.onnx
from dlc.onnx import OnnxImportError


def _model(op: str, shape, axis, dtype=TensorProto.FLOAT, **attrs) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node(op, ["x", "axis"], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", dtype, shape)],
        [helper.make_tensor_value_info("y", dtype, None)],
        [numpy_helper.from_array(np.asarray(axis, np.int64), "axis")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _expected(op: str, x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    y = np.flip(x, axis) if reverse else x
    fn, init = (np.cumsum, 0) if op == "CumSum" else (np.cumprod, 1)
    y = fn(y, axis=axis, dtype=x.dtype)
    if exclusive:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        y = np.pad(y, pad, constant_values=init).take(range(x.shape[axis]), axis=axis)
    return np.flip(y, axis) if reverse else y


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumulative_matches_numpy(op, exclusive, reverse):
    x = np.random.default_rng(1).uniform(0.5, 1.5, (3, 4, 2)).astype(np.float32)
    model = _model(op, (3, 4, 2), -2, exclusive=exclusive, reverse=reverse)
    expected = _expected(op, x, 1, exclusive, reverse)
    np.testing.assert_allclose(run(model, x), expected, rtol=1e-6)
    np.testing.assert_allclose(interpret(model, x), expected, rtol=1e-6)


def test_cumsum_of_integers_is_exact():
    x = np.arange(-5, 7, dtype=np.int32).reshape(3, 4)
    model = _model("CumSum", (3, 4), [0], TensorProto.INT32)
    np.testing.assert_array_equal(run(model, x), np.cumsum(x, axis=0, dtype=np.int32))


def test_cumsum_keeps_infinity_to_its_outputs():
    x = np.array([1.0, np.inf, 2.0, 3.0], np.float32)
    y = run(_model("CumSum", (4,), 0), x)
    np.testing.assert_array_equal(y, [1.0, np.inf, np.inf, np.inf])
    y = run(_model("CumSum", (4,), 0, reverse=1), x)
    np.testing.assert_array_equal(y, [np.inf, np.inf, 5.0, 3.0])


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_model("CumSum", (2,), [0, 1]), "axis must be one integer"),
        (_model("CumSum", (2,), 1), "axis 1 is out of range for rank 1"),
        (_model("CumProd", (), 0), "CumProd needs rank ≥ 1"),
        (_model("CumSum", (2,), 0, TensorProto.BOOL), "CumSum of bool tensors is not supported"),
    ],
)
def test_cumulative_refusals(model, message):
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' ({model.graph.node[0].op_type}): {message}"]
