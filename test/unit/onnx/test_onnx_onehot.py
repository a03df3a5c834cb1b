"""ONNX OneHot and EyeLike, compiled by dlc and interpreted, against onnx's reference
implementation; the refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, node, run

import dlc.onnx
from dlc.onnx import OnnxImportError


def _one_hot(index_type, shape, depth, values_type=TensorProto.FLOAT, values=None, **attrs):
    inits = [numpy_helper.from_array(np.asarray(depth), "depth")]
    if values is not None:
        inits.append(numpy_helper.from_array(values, "values"))
    inputs = [helper.make_tensor_value_info("i", index_type, shape)]
    if values is None:
        inputs.append(helper.make_tensor_value_info("values", values_type, [2]))
    graph = helper.make_graph(
        [node("OneHot", ["i", "depth", "values"], ["y"], **attrs)], "g", inputs,
        [helper.make_tensor_value_info("y", values_type, None)], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def _check(model: onnx.ModelProto, *args: np.ndarray) -> None:
    names = [i.name for i in model.graph.input]
    (want,) = ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))
    np.testing.assert_array_equal(run(model, *args), want)
    np.testing.assert_array_equal(interpret(model, *args), want)


def test_one_hot_wraps_negative_indices_and_ignores_out_of_range():
    i = np.array([[0, -1, 4], [-5, 5, -6]], np.int64)
    values = np.array([-2.0, 7.5], np.float32)
    _check(_one_hot(TensorProto.INT64, (2, 3), np.float32(5), axis=1), i, values)


def test_one_hot_with_float_indices_and_constant_integer_values():
    i = np.array([1.0, 2.5, -3.0, 9.0], np.float16)
    values = np.array([1, 4], np.int32)
    model = _one_hot(TensorProto.FLOAT16, (4,), np.int64(10), TensorProto.INT32, values, axis=0)
    _check(model, i)


def test_one_hot_of_u8_indices_deeper_than_their_range():
    i = np.array([0, 44, 255], np.uint8)
    values = np.array([0, 1], np.int64)
    model = _one_hot(TensorProto.UINT8, (3,), np.int64(300), TensorProto.INT64, values)
    y = run(model, i)
    assert y.shape == (3, 300) and y.sum() == 3 and y[2, 255] == 1 and y[1, 300 - 256] == 1


@pytest.mark.parametrize(("shape", "k", "dtype"), [((4, 4), 0, None), ((3, 5), -1, 11)])
def test_eye_like(shape, k, dtype):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    out_type = TensorProto.INT32 if dtype is None else dtype
    graph = helper.make_graph(
        [node("EyeLike", ["x"], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, shape)],
        [helper.make_tensor_value_info("y", out_type, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    _check(model, np.zeros(shape, np.int32))


@pytest.mark.parametrize(
    ("depth", "values", "message"),
    [
        (np.float32(2.5), None, "depth must be a positive integer, got 2.5"),
        (np.int64(3), np.zeros(3, np.float32), "values must have shape (2,), got (3,)"),
    ],
)
def test_one_hot_refusals(depth, values, message):
    model = _one_hot(TensorProto.INT64, (2,), depth, values=values)
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' (OneHot): {message}"]


def test_eye_like_needs_a_matrix():
    graph = helper.make_graph(
        [node("EyeLike", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 2, 2))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]))
    assert info.value.problems == [
        "node 'y' (EyeLike): the input must be a matrix, got shape (2, 2, 2)"
    ]
