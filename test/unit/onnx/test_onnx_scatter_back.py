"""ONNX Col2Im and MaxUnpool as scatters into zeros: compiled by dlc and interpreted,
against onnx's reference implementation; an infinity reaches only its own position;
the refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, node, run

import dlc.onnx
from dlc.onnx import OnnxImportError


def _col2im(shape, image, block, **attrs) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node("Col2Im", ["x", "image", "block"], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(image, np.int64), "image"),
         numpy_helper.from_array(np.asarray(block, np.int64), "block")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _check(model: onnx.ModelProto, *args: np.ndarray) -> None:
    names = [i.name for i in model.graph.input]
    (want,) = ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))
    np.testing.assert_allclose(run(model, *args), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(interpret(model, *args), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("shape", "image", "block", "attrs"),
    [
        ((2, 12, 9), [5, 4], [2, 3], {"strides": [2, 1], "pads": [1, 0, 0, 1]}),
        ((1, 8, 4), [3, 4, 5], [2, 2, 2], {"dilations": [1, 2, 3], "strides": [1, 1, 2]}),
    ],
)
def test_col2im_matches_onnx_reference(shape, image, block, attrs):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    _check(_col2im(shape, image, block, **attrs), x)


def test_col2im_keeps_an_infinity_to_its_position():
    x = np.zeros((1, 4, 4), np.float32)
    x[0, 0, 0] = np.inf
    y = run(_col2im((1, 4, 4), [3, 3], [2, 2]), x)
    assert np.isinf(y[0, 0, 0, 0]) and np.isfinite(np.delete(y.reshape(-1), 0)).all()


def _unpool(shape, output_shape=None, **attrs) -> onnx.ModelProto:
    inputs = ["x", "i"] + (["shape"] if output_shape is not None else [])
    inits = (
        []
        if output_shape is None
        else [numpy_helper.from_array(np.asarray(output_shape, np.int64), "shape")]
    )
    graph = helper.make_graph(
        [node("MaxUnpool", inputs, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("i", TensorProto.INT64, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def test_max_unpool_of_max_pool_indices_with_output_shape():
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 4)).astype(np.float32)
    pool = helper.make_model(
        helper.make_graph(
            [node("MaxPool", ["x"], ["v", "i"], kernel_shape=[2, 2], strides=[2, 2])], "p",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
             helper.make_tensor_value_info("i", TensorProto.INT64, None)],
        ), opset_imports=[helper.make_opsetid("", 11)],
    )  # fmt: skip
    values, indices = ReferenceEvaluator(pool).run(None, {"x": x})
    _check(
        _unpool(values.shape, [2, 3, 5, 5], kernel_shape=[2, 2], strides=[2, 2]), values, indices
    )
    _check(_unpool(values.shape, kernel_shape=[2, 2], strides=[2, 2]), values, indices)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_col2im((1, 4, 5), [3, 3], [2, 2]),
         "input (1, 4, 5) does not hold 4 offsets × 4 blocks"),
        (_col2im((1, 4, 4), [1, 3], [2, 2]), "the blocks [2, 2] do not fit the image [1, 3]"),
        (_unpool((1, 1, 2, 2), [1, 1, 3, 3], kernel_shape=[2, 2], strides=[2, 2]),
         "output_shape [1, 1, 3, 3] is smaller than the unpooled [1, 1, 4, 4]"),
    ],
)  # fmt: skip
def test_refusals_say_why(model, message):
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    op = model.graph.node[0].op_type
    assert info.value.problems == [f"node 'y' ({op}): {message}"]


def test_max_unpool_index_of_another_plane_is_an_error_not_a_wrap_around():
    model = _unpool((1, 2, 2, 2), kernel_shape=[1, 1])
    x = np.ones((1, 2, 2, 2), np.float32)
    indices = np.arange(8, dtype=np.int64).reshape(1, 2, 2, 2)
    np.testing.assert_array_equal(run(model, x, indices), x)
    indices[0, 1, 0, 0] = 1  # plane 0's element, from plane 1
    with pytest.raises(IndexError, match="out-of-bounds scatterElements index 4"):
        run(model, x, indices)
