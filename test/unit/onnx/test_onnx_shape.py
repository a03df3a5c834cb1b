"""ONNX shape ops, identities and constants, compiled by dlc and compared with NumPy
(exactly: they move values without arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx_models import interpret, make, node, randn, run

import dlc
import dlc.onnx


@pytest.mark.parametrize(
    ("target", "expected"),
    [([6, 4], (6, 4)), ([0, -1], (2, 12)), ([-1], (24,)), ([2, 0, 2, 2], (2, 3, 2, 2))],
)
def test_reshape_with_zero_and_minus_one(target, expected):
    x = randn(2, 3, 4)
    model = make(
        [node("Reshape", ["x", "shape"], ["y"])],
        {"x": (2, 3, 4)},
        {"y": None},
        {"shape": np.array(target, np.int64)},
    )
    np.testing.assert_array_equal(run(model, x), x.reshape(expected))


def test_reshape_allowzero_keeps_a_zero_dimension():
    x = np.zeros((0, 3), np.float32)
    model = make(
        [node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
        {"x": (0, 3)},
        {"y": None},
        {"shape": np.array([3, 0], np.int64)},
        opset=14,
    )
    assert interpret(model, x).shape == (3, 0)


def test_reshape_shape_from_a_constant_node():
    x = randn(2, 6)
    shape = helper.make_tensor("s", 7, [2], [3, 4])  # INT64
    model = make(
        [node("Constant", [], ["shape"], value=shape), node("Reshape", ["x", "shape"], ["y"])],
        {"x": (2, 6)},
        {"y": (3, 4)},
    )
    np.testing.assert_array_equal(run(model, x), x.reshape(3, 4))
    assert "i64" not in dlc.print_module(dlc.onnx.load(model))  # the shape is no literal


@pytest.mark.parametrize(
    ("axis", "expected"), [(0, (1, 24)), (1, (2, 12)), (-1, (6, 4)), (3, (24, 1))]
)
def test_flatten(axis, expected):
    x = randn(2, 3, 4)
    model = make([node("Flatten", ["x"], ["y"], axis=axis)], {"x": (2, 3, 4)}, {"y": None})
    np.testing.assert_array_equal(interpret(model, x), x.reshape(expected))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    a, b = randn(2, 3), randn(2, 3, seed=1)
    model = make(
        [node("Concat", ["a", "b", "a"], ["y"], axis=axis)], {"a": (2, 3), "b": (2, 3)}, {"y": None}
    )
    np.testing.assert_array_equal(run(model, a, b), np.concatenate([a, b, a], axis=axis))


def test_squeeze_and_unsqueeze_attribute_and_input_forms():
    x = randn(1, 3, 1, 2)
    old = make(
        [node("Squeeze", ["x"], ["s"], axes=[0, -2]), node("Unsqueeze", ["s"], ["y"], axes=[1])],
        {"x": (1, 3, 1, 2)},
        {"y": (3, 1, 2)},
        opset=11,
    )
    np.testing.assert_array_equal(interpret(old, x), x.reshape(3, 1, 2))
    new = make(
        [node("Squeeze", ["x"], ["s"]), node("Unsqueeze", ["s", "axes"], ["y"])],
        {"x": (1, 3, 1, 2)},
        {"y": (1, 3, 2, 1)},
        {"axes": np.array([0, -1], np.int64)},
        opset=13,
    )
    np.testing.assert_array_equal(interpret(new, x), x.reshape(1, 3, 2, 1))


@pytest.mark.parametrize("opset", [7, 12])
def test_identity_and_dropout_pass_values_through(opset):
    x = randn(2, 3)
    model = make(
        [node("Dropout", ["x"], ["d"], ratio=0.5), node("Identity", ["d"], ["y"])],
        {"x": (2, 3)},
        {"y": (2, 3)},
        opset=opset,
    )
    np.testing.assert_array_equal(run(model, x), x)


@pytest.mark.parametrize(
    ("attribute", "value", "expected"),
    [
        (
            "value",
            numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3)),
            np.arange(6).reshape(2, 3),
        ),
        ("value_float", 2.5, np.float32(2.5)),
        ("value_floats", [1.0, 2.0, 3.0], np.array([1, 2, 3])),
    ],
)
def test_constant_node(attribute, value, expected):
    x = randn(2, 3)
    model = make(
        [node("Constant", [], ["c"], **{attribute: value}), node("Add", ["x", "c"], ["y"])],
        {"x": (2, 3)},
        {"y": (2, 3)},
    )
    np.testing.assert_allclose(run(model, x), x + expected.astype(np.float32))


def test_graph_output_that_is_an_initializer():
    w = randn(2, 2)
    model = make([node("Identity", ["x"], ["y"])], {"x": (2,)}, {"y": (2,), "w": (2, 2)}, {"w": w})
    y, out = run(model, np.ones(2, np.float32))
    np.testing.assert_array_equal(out, w)


@pytest.mark.parametrize(
    ("op", "shape", "attrs"),
    [
        ("DepthToSpace", (2, 12, 3, 5), {"blocksize": 2}),
        ("DepthToSpace", (2, 12, 3, 5), {"blocksize": 2, "mode": "DCR"}),
        ("DepthToSpace", (1, 18, 2, 3), {"blocksize": 3, "mode": "CRD"}),
        ("SpaceToDepth", (2, 3, 4, 6), {"blocksize": 2}),
        ("SpaceToDepth", (1, 2, 6, 3), {"blocksize": 3}),
        ("SpaceToDepth", (1, 2, 6, 3), {"blocksize": 3, "mode": "CRD"}),
    ],
)
def test_depth_to_space_and_back_match_onnx(op, shape, attrs):
    from onnx.reference import ReferenceEvaluator

    x = randn(*shape)
    model = make([node(op, ["x"], ["y"], **attrs)], {"x": shape}, {"y": None})
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(run(model, x), want)
    np.testing.assert_array_equal(interpret(model, x), want)


@pytest.mark.parametrize(
    ("op", "shape", "attrs", "message"),
    [
        ("DepthToSpace", (1, 6, 2, 2), {"blocksize": 2}, "6 channels are not a multiple of blocksize^2 = 4"),
        ("DepthToSpace", (1, 8, 2, 2), {"blocksize": 2, "mode": "XYZ"}, "mode='XYZ' is not supported"),
        ("DepthToSpace", (8, 2, 2), {"blocksize": 2}, "the input has rank 3, expected 4 (N, C, H, W)"),
        ("SpaceToDepth", (1, 1, 4, 3), {"blocksize": 2}, "the spatial size 4 x 3 is not a multiple of blocksize 2"),
        ("SpaceToDepth", (1, 1, 4, 4), {"blocksize": 0}, "blocksize 0 must be positive"),
    ],
)  # fmt: skip
def test_depth_to_space_refusals(op, shape, attrs, message):
    from dlc.onnx import OnnxImportError

    model = make([node(op, ["x"], ["y"], **attrs)], {"x": shape}, {"y": None})
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' ({op}): {message}"]
