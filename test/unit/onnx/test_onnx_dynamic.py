"""ONNX operators with data-dependent output shapes (NonZero, Unique,
NonMaxSuppression, Compress): folded on constant inputs, Compress with a constant
condition gathered, anything else refused naming the input that decides the shape
(and not offered to the backend as a constant to compile in)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, run

import dlc.onnx
import dlc.onnx.backend as backend
from dlc.onnx import OnnxImportError


def _model(nodes, inputs, inits, opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_nonzero_of_a_constant_indexes_a_gather():
    """NonZero of a constant mask folds to constant indices a GatherND then reads."""
    mask = np.array([[True, False, True], [False, True, True]])
    nodes = [
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["at"]),
        helper.make_node("GatherND", ["x", "at"], ["y"]),
    ]
    model = _model(nodes, {"x": (TensorProto.FLOAT, (2, 3))}, {"mask": mask})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run(model, x), x[mask])


def test_unique_and_nonmaxsuppression_of_constants_are_constants():
    values = np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], np.float32)
    unique = helper.make_node("Unique", ["v"], ["y", "i", "inv", "counts"], sorted=0)
    model = _model([unique], {}, {"v": values})
    np.testing.assert_array_equal(interpret(model), ReferenceEvaluator(model).run(None, {})[0])
    inits = {
        "boxes": np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 10, 1, 11]]], np.float32),
        "scores": np.array([[[0.9, 0.75, 0.6]]], np.float32),
        "limit": np.array([2], np.int64),
        "iou": np.array([0.5], np.float32),
    }
    nms = helper.make_node("NonMaxSuppression", list(inits), ["y"])
    model = _model([nms], {}, inits)
    np.testing.assert_array_equal(interpret(model), [[0, 0, 0], [0, 0, 2]])


@pytest.mark.parametrize("axis", [None, 1, -2])
def test_compress_with_a_constant_condition_is_a_gather(axis):
    condition = np.array([False, True, True, False, True])
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("Compress", ["x", "c"], ["y"], **attrs)
    model = _model([node], {"x": (TensorProto.FLOAT, (3, 5, 2))}, {"c": condition})
    x = np.random.default_rng(0).standard_normal((3, 5, 2)).astype(np.float32)
    np.testing.assert_array_equal(interpret(model, x), np.compress(condition, x, axis=axis))
    if axis == 1:
        np.testing.assert_array_equal(run(model, x), np.compress(condition, x, axis=axis))


@pytest.mark.parametrize(
    "condition, message",
    [
        (np.zeros(3, bool), "the condition selects nothing (an empty output is not supported)"),
        (np.array([0, 0, 0, 1], bool), "condition selects position 3 of an axis of 3"),
    ],
)
def test_compress_refusals(condition, message):
    node = helper.make_node("Compress", ["x", "c"], ["y"], axis=0)
    model = _model([node], {"x": (TensorProto.FLOAT, (3, 2))}, {"c": condition})
    with pytest.raises(OnnxImportError, match=r"node #0 \(Compress\): " + re.escape(message)):
        dlc.onnx.load(model)


@pytest.mark.parametrize(
    "op, inputs, name, what",
    [
        ("NonZero", {"x": (TensorProto.FLOAT, (4,))}, "x", "the number of nonzero elements"),
        ("Unique", {"x": (TensorProto.FLOAT, (4,))}, "x", "the number of distinct values"),
        (
            "NonMaxSuppression",
            {"boxes": (TensorProto.FLOAT, (1, 3, 4)), "scores": (TensorProto.FLOAT, (1, 1, 3))},
            "boxes",
            "the number of selected boxes",
        ),
        (
            "Compress",
            {"x": (TensorProto.FLOAT, (4,)), "c": (TensorProto.BOOL, (4,))},
            "c",
            "the number of selected positions",
        ),
    ],
)
def test_data_dependent_shapes_are_refused_and_not_specialized(op, inputs, name, what):
    model = _model([helper.make_node(op, list(inputs), ["y"])], inputs, {})
    message = (
        f"node #0 ({op}): the output shape depends on the values of input '{name}' ({what}), "
        "known only at run time: dlc compiles static shapes (a constant input is folded at "
        "import)"
    )
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(model)
    assert err.value.problems == [message]
    assert err.value.wanted_constants == []
    with pytest.raises(OnnxImportError):
        backend.prepare(model)


def test_folded_empty_output_and_a_2d_condition():
    """NonZero of zeros is a (1, 0) constant, as onnx's reference gives."""
    nonzero = helper.make_node("NonZero", ["x"], ["y"])
    model = _model([nonzero], {}, {"x": np.zeros(4, np.float32)})
    assert interpret(model).shape == (1, 0)
    compress = helper.make_node("Compress", ["x", "c"], ["y"])
    model = _model([compress], {"x": (TensorProto.FLOAT, (2, 2))}, {"c": np.ones((2, 2), bool)})
    with pytest.raises(OnnxImportError, match=r"condition must be 1-D, got shape \[2, 2\]"):
        dlc.onnx.load(model)
