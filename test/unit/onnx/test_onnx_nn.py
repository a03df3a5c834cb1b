"""ONNX Conv, pooling and BatchNormalization, compiled by dlc and compared with the
NumPy versions in `onnx_models` (f32 within rtol 1e-4 / atol 1e-4: sums of ≤ 36
products in another order)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_models import conv, interpret, make, node, pool, randn, run

import dlc
import dlc.onnx

TOL = {"rtol": 1e-4, "atol": 1e-4}


def _conv_model(x, w, b=None, **attrs):
    inits = {"w": w} if b is None else {"w": w, "b": b}
    inputs = ["x", "w"] if b is None else ["x", "w", "b"]
    return make([node("Conv", inputs, ["y"], **attrs)], {"x": x.shape}, {"y": None}, inits)


@pytest.mark.parametrize(
    ("attrs", "pads"),
    [
        ({}, [(0, 0), (0, 0)]),
        ({"pads": [1, 0, 2, 1], "strides": [2, 1]}, [(1, 2), (0, 1)]),
        ({"dilations": [2, 1], "group": 2}, [(0, 0), (0, 0)]),
        ({"group": 4, "pads": [1, 1, 1, 1]}, [(1, 1), (1, 1)]),
        ({"auto_pad": "VALID", "strides": [2, 2]}, [(0, 0), (0, 0)]),
    ],
    ids=["plain", "pads-strides", "dilation-groups", "depthwise", "valid"],
)
def test_conv(attrs, pads):
    group = attrs.get("group", 1)
    x, w, b = randn(2, 4, 9, 8), randn(8, 4 // group, 3, 3, seed=1), randn(8, seed=2)
    expected = conv(x, w, attrs.get("strides", [1, 1]), pads, attrs.get("dilations", [1, 1]), group)
    expected += b.reshape(1, 8, 1, 1)
    np.testing.assert_allclose(run(_conv_model(x, w, b, **attrs), x), expected, **TOL)


@pytest.mark.parametrize(
    ("auto_pad", "strides", "dilations", "pads"),
    [
        ("SAME_UPPER", [1, 1], [1, 1], [(1, 1), (1, 1)]),
        ("SAME_UPPER", [2, 2], [1, 1], [(1, 1), (0, 1)]),  # 9 → 5: total 2; 8 → 4: total 1
        ("SAME_LOWER", [2, 2], [1, 1], [(1, 1), (1, 0)]),
        ("SAME_UPPER", [1, 2], [2, 1], [(2, 2), (0, 1)]),
    ],
)
def test_conv_same_padding(auto_pad, strides, dilations, pads):
    x, w = randn(1, 2, 9, 8), randn(3, 2, 3, 3, seed=1)
    model = _conv_model(x, w, auto_pad=auto_pad, strides=strides, dilations=dilations)
    np.testing.assert_allclose(run(model, x), conv(x, w, strides, pads, dilations), **TOL)


def test_conv_1d_and_kernel_shape_attribute():
    x, w = randn(2, 3, 10), randn(4, 3, 3, seed=1)
    model = _conv_model(x, w, kernel_shape=[3], strides=[3])
    np.testing.assert_allclose(interpret(model, x), conv(x, w, [3], [(0, 0)], [1]), **TOL)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize(
    ("attrs", "pads"),
    [
        ({"kernel_shape": [2, 2], "strides": [2, 2]}, [(0, 0), (0, 0)]),
        ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [(1, 1), (1, 1)]),
        ({"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1]}, [(1, 2), (0, 1)]),
        ({"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}, [(1, 1), (1, 1)]),
        ({"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}, [(1, 0), (1, 0)]),
    ],
    ids=["plain", "pads", "asymmetric", "same-upper", "same-lower"],
)
def test_pool(kind, attrs, pads):
    x = randn(1, 3, 9, 9)
    model = make([node(kind, ["x"], ["y"], **attrs)], {"x": x.shape}, {"y": None})
    strides = attrs.get("strides", [1, 1])
    expected = pool(x, attrs["kernel_shape"], strides, pads, "max" if kind == "MaxPool" else "avg")
    np.testing.assert_allclose(run(model, x), expected, **TOL)


def test_average_pool_count_include_pad():
    x = randn(1, 2, 7, 7)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 2, 1, 0]}
    model = make(
        [node("AveragePool", ["x"], ["y"], count_include_pad=1, **attrs)],
        {"x": x.shape},
        {"y": None},
    )
    expected = pool(x, [3, 3], [2, 2], [(1, 1), (2, 0)], "avg", count_include_pad=True)
    np.testing.assert_allclose(run(model, x), expected, **TOL)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
def test_pool_ceil_mode_adds_the_partial_last_window(kind):
    x = randn(1, 2, 8, 8)
    model = make(
        [node(kind, ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
        {"x": x.shape},
        {"y": None},
    )
    y = run(model, x)
    assert y.shape == (1, 2, 4, 4)  # floor mode: 3 x 3
    last = x[:, :, 6:, 6:].reshape(1, 2, -1)  # the window clipped to the input
    expected = last.max(-1) if kind == "MaxPool" else last.mean(-1)
    np.testing.assert_allclose(y[:, :, 3, 3], expected, **TOL)
    inner = pool(x, [3, 3], [2, 2], [(0, 0), (0, 0)], "max" if kind == "MaxPool" else "avg")
    np.testing.assert_allclose(y[:, :, :3, :3], inner, **TOL)


@pytest.mark.parametrize("kind", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(kind):
    x = randn(2, 3, 5, 4)
    model = make([node(kind, ["x"], ["y"])], {"x": x.shape}, {"y": (2, 3, 1, 1)})
    reduce = np.mean if kind == "GlobalAveragePool" else np.max
    np.testing.assert_allclose(run(model, x), reduce(x, axis=(2, 3), keepdims=True), **TOL)


def _batch_norm(x, scale, bias, mean, var, eps):
    shape = (1, -1, 1, 1)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(
        shape
    ) + bias.reshape(shape)


def test_batch_norm_folds_constant_parameters():
    x = randn(2, 3, 4, 4)
    params = {
        "s": randn(3, seed=1),
        "b": randn(3, seed=2),
        "m": randn(3, seed=3),
        "v": np.abs(randn(3, seed=4)),
    }
    model = make(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3, momentum=0.9)],
        {"x": x.shape},
        {"y": None},
        params,
    )
    expected = _batch_norm(x, *params.values(), 1e-3)
    np.testing.assert_allclose(run(model, x), expected, **TOL)
    assert "sqrt" not in dlc.print_module(dlc.onnx.load(model))  # scale and shift are literals


def test_batch_norm_with_parameters_as_inputs():
    x = randn(2, 3, 4, 4)
    s, b, m, v = randn(3, seed=1), randn(3, seed=2), randn(3, seed=3), np.abs(randn(3, seed=4))
    model = make(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
        {"x": x.shape, "s": (3,), "b": (3,), "m": (3,), "v": (3,)},
        {"y": None},
        opset=9,
    )
    np.testing.assert_allclose(run(model, x, s, b, m, v), _batch_norm(x, s, b, m, v, 1e-5), **TOL)
