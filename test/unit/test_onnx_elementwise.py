"""ONNX element-wise ops, Softmax and reductions, compiled by dlc and compared with
NumPy (f32 within rtol 1e-5 / atol 1e-6 unless stated: dlc's f32 exp, log and tanh are
within 5 ULP, sums differ from NumPy's pairwise ones by a few ULP)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_models import interpret, make, node, randn, run

TOL = {"rtol": 1e-5, "atol": 1e-6}


@pytest.mark.parametrize(
    ("op", "reference"),
    [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)],
)
@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((2, 3), (2, 3)), ((2, 3, 4), (4,)), ((3,), (2, 1, 3)), ((4, 1), (3, 1, 5)), ((2, 3), ())],
    ids=["same", "rank-extend-rhs", "rank-extend-lhs", "both-ways", "scalar"],
)
def test_binary_broadcasts_like_numpy(op, reference, a_shape, b_shape):
    a, b = randn(*a_shape), randn(*b_shape, seed=1) + 3
    model = make([node(op, ["a", "b"], ["y"])], {"a": a_shape, "b": b_shape}, {"y": None})
    np.testing.assert_allclose(run(model, a, b), reference(a, b), **TOL)


def test_binary_with_initializer_operand():
    x, bias = randn(2, 3), randn(3, seed=1)
    model = make([node("Add", ["x", "bias"], ["y"])], {"x": (2, 3)}, {"y": (2, 3)}, {"bias": bias})
    np.testing.assert_allclose(run(model, x), x + bias, **TOL)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "Relu": lambda x: np.maximum(x, 0),
    "Sigmoid": _sigmoid,
    "Tanh": np.tanh,
    "Exp": np.exp,
    "Log": lambda x: np.log(np.abs(x)),
    "Sqrt": lambda x: np.sqrt(np.abs(x)),
    "Neg": np.negative,
    "Abs": np.abs,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asin": lambda x: np.arcsin(np.tanh(x)),
    "Acos": lambda x: np.arccos(np.tanh(x)),
    "Atan": np.arctan,
    "Sign": np.sign,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,  # half to even, as ONNX
    "Reciprocal": np.reciprocal,
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    x = randn(3, 5)
    nodes = [node(op, ["x"], ["y"])]
    if op in ("Log", "Sqrt"):
        x = np.abs(x)
    if op in ("Asin", "Acos"):  # inputs in (-1, 1)
        nodes = [node("Tanh", ["x"], ["t"]), node(op, ["t"], ["y"])]
    if op == "Round":
        x = np.array(
            [[-2.5, -1.5, -0.5, 0.5, 1.5], [2.5, 0.4, -0.6, 3.7, 2.0], [0, 1, 2, 3, 4]], np.float32
        )
    model = make(nodes, {"x": (3, 5)}, {"y": (3, 5)})
    np.testing.assert_allclose(run(model, x), UNARY[op](x), rtol=2e-6, atol=1e-7)


def test_erf():
    x = np.array([-2.0, -0.5, 0.0, 0.3, 1.5], np.float32)
    expected = [-0.9953222650, -0.5204998778, 0.0, 0.3286267595, 0.9661051465]
    model = make([node("Erf", ["x"], ["y"])], {"x": (5,)}, {"y": (5,)})
    np.testing.assert_allclose(run(model, x), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    ("op", "reference"), [("Max", np.maximum), ("Min", np.minimum), ("Sum", np.add)]
)
def test_variadic(op, reference):
    a, b, c = randn(2, 3), randn(3, seed=1), randn(1, 1, seed=2)
    model = make(
        [node(op, ["a", "b", "c"], ["y"])], {"a": (2, 3), "b": (3,), "c": (1, 1)}, {"y": None}
    )
    np.testing.assert_allclose(run(model, a, b, c), reference(reference(a, b), c), **TOL)
    mean = make([node("Mean", ["a", "b"], ["y"])], {"a": (2, 3), "b": (3,)}, {"y": None})
    np.testing.assert_allclose(interpret(mean, a, b), (a + b) / 2, **TOL)


def test_pow_broadcasts():
    x, p = np.abs(randn(2, 3)) + 0.5, np.array([1.0, 2.0, 0.5], np.float32)
    model = make([node("Pow", ["x", "p"], ["y"])], {"x": (2, 3), "p": (3,)}, {"y": None})
    np.testing.assert_allclose(run(model, x, p), x**p, rtol=1e-5)


def test_leaky_relu_and_abs_keep_nan():
    x = np.array([-2.0, -0.5, 0.0, 1.5, np.nan], np.float32)
    model = make(
        [node("LeakyRelu", ["x"], ["l"], alpha=0.2), node("Abs", ["l"], ["y"])],
        {"x": (5,)},
        {"y": (5,)},
    )
    np.testing.assert_allclose(run(model, x), np.abs(np.where(x < 0, 0.2 * x, x)), **TOL)


def test_clip_bounds_as_attributes_before_opset_11():
    x = randn(4, 4) * 3
    model = make(
        [node("Clip", ["x"], ["y"], min=-1.0, max=0.5)], {"x": (4, 4)}, {"y": None}, opset=6
    )
    np.testing.assert_allclose(run(model, x), np.clip(x, -1.0, 0.5), **TOL)


def test_clip_bounds_as_inputs_and_omitted_min():
    x = randn(4, 4) * 3
    model = make(
        [node("Clip", ["x", "", "hi"], ["y"])],
        {"x": (4, 4)},
        {"y": None},
        {"hi": np.array(0.25, np.float32)},
        opset=13,
    )
    np.testing.assert_allclose(interpret(model, x), np.minimum(x, 0.25), **TOL)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [1, -1, -3])
def test_softmax_opset_13_is_per_axis(axis):
    x = randn(2, 3, 4)
    model = make(
        [node("Softmax", ["x"], ["y"], axis=axis)], {"x": (2, 3, 4)}, {"y": (2, 3, 4)}, opset=13
    )
    np.testing.assert_allclose(run(model, x), _softmax(x, axis), **TOL)


def test_softmax_before_opset_13_coerces_to_2d():
    x = randn(2, 3, 4)
    model = make([node("Softmax", ["x"], ["y"], axis=1)], {"x": (2, 3, 4)}, {"y": None}, opset=11)
    expected = _softmax(x.reshape(2, 12), 1).reshape(2, 3, 4)
    np.testing.assert_allclose(run(model, x), expected, **TOL)
    default = make([node("Softmax", ["x"], ["y"])], {"x": (2, 3, 4)}, {"y": None}, opset=11)
    np.testing.assert_allclose(interpret(default, x), expected, **TOL)


REDUCE = {
    "ReduceSum": np.sum,
    "ReduceMean": np.mean,
    "ReduceMax": np.max,
    "ReduceMin": np.min,
    "ReduceProd": np.prod,
}


@pytest.mark.parametrize("op", sorted(REDUCE))
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_attribute(op, keepdims):
    x = randn(2, 3, 4)
    model = make(
        [node(op, ["x"], ["y"], axes=[0, -1], keepdims=keepdims)],
        {"x": (2, 3, 4)},
        {"y": None},
        opset=11,
    )
    expected = REDUCE[op](x, axis=(0, 2), keepdims=bool(keepdims))
    np.testing.assert_allclose(run(model, x), expected, **TOL)


@pytest.mark.parametrize(
    ("op", "opset"), [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18), ("ReduceProd", 18)]
)
def test_reduce_axes_input(op, opset):
    x = randn(2, 3, 4)
    axes = {"axes": np.array([-2], np.int64)}
    model = make(
        [node(op, ["x", "axes"], ["y"], keepdims=0)], {"x": (2, 3, 4)}, {"y": None}, axes, opset
    )
    np.testing.assert_allclose(interpret(model, x), REDUCE[op](x, axis=1), **TOL)


def test_reduce_without_axes_reduces_everything_or_nothing():
    x = randn(2, 3)
    everything = make([node("ReduceSum", ["x"], ["y"])], {"x": (2, 3)}, {"y": None}, opset=13)
    np.testing.assert_allclose(interpret(everything, x), x.sum(keepdims=True), **TOL)
    nothing = make(
        [node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)],
        {"x": (2, 3)},
        {"y": None},
        opset=13,
    )
    np.testing.assert_allclose(interpret(nothing, x), x)
