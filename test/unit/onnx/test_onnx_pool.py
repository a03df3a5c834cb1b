"""Pools with dilated windows and LpPool, compiled by dlc and interpreted, against a
window-by-window NumPy reference (float64): AveragePool with dilations (pads,
ceil_mode, count_include_pad) and LpPool (p, dilations, pads, ceil_mode, auto_pad)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx_models import interpret, make, node, randn, run

import dlc
import dlc.onnx


def window_reference(x, kernel, strides, dilations, pads, out, reduce):
    """reduce(values, count_with_pads) over each window; pads = [(lo, hi)]; `out` the
    output size (ceil_mode's last window may hang over the high pads: those taps are
    neither values nor counted)."""
    n = x.shape[2:]
    y = np.zeros((*x.shape[:2], *out))
    for index in itertools.product(*(range(o) for o in out)):
        taps = [
            [i * s - lo + a * d for a in range(k)]
            for i, s, d, k, (lo, _) in zip(index, strides, dilations, kernel, pads)
        ]
        inside = [[t for t in ts if 0 <= t < m] for ts, m in zip(taps, n)]
        padded = [[t for t in ts if -lo <= t < m + hi] for ts, m, (lo, hi) in zip(taps, n, pads)]
        values = x[(..., *np.ix_(*inside))].reshape(*x.shape[:2], -1).astype(np.float64)
        y[(..., *index)] = reduce(values, int(np.prod([len(p) for p in padded])))
    return y


def _lp(p):
    return lambda v, _: (np.abs(v) ** p).sum(-1) ** (1.0 / p)


def _avg(include):
    return lambda v, count: v.sum(-1) / (count if include else v.shape[-1])


@pytest.mark.parametrize(
    ("attrs", "pads", "out"),
    [
        ({"kernel_shape": [3, 2], "dilations": [2, 3]}, [(0, 0), (0, 0)], [3, 5]),
        ({"kernel_shape": [2, 2], "dilations": [2, 1], "strides": [2, 3], "pads": [1, 0, 2, 1],
          "count_include_pad": 1}, [(1, 2), (0, 1)], [4, 3]),
        ({"kernel_shape": [3, 3], "dilations": [2, 2], "strides": [2, 2], "ceil_mode": 1},
         [(0, 0), (0, 1)], [2, 3]),
    ],
)  # fmt: skip
def test_dilated_average_pool(attrs, pads, out):
    x = randn(2, 3, 7, 8, seed=3)
    model = make([node("AveragePool", ["x"], ["y"], **attrs)], {"x": x.shape}, {"y": None},
                 opset=19)  # fmt: skip
    include = attrs.get("count_include_pad", 0)
    want = window_reference(x, attrs["kernel_shape"], attrs.get("strides", [1, 1]),
                            attrs["dilations"], pads, out, _avg(include))  # fmt: skip
    np.testing.assert_allclose(run(model, x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(interpret(model, x), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("attrs", "pads", "out"),
    [
        ({"kernel_shape": [2, 3], "p": 3}, [(0, 0), (0, 0)], [6, 6]),
        ({"kernel_shape": [3, 2], "p": 2, "dilations": [2, 2], "pads": [1, 0, 1, 1]},
         [(1, 1), (0, 1)], [5, 7]),
        ({"kernel_shape": [2, 2], "p": 1, "strides": [2, 3], "auto_pad": "SAME_LOWER"},
         [(1, 0), (0, 0)], [4, 3]),
        ({"kernel_shape": [3, 3], "p": 4, "strides": [2, 2], "ceil_mode": 1},
         [(0, 0), (0, 1)], [3, 4]),
    ],
)  # fmt: skip
def test_lp_pool(attrs, pads, out):
    x = randn(1, 2, 7, 8, seed=4)
    model = make([node("LpPool", ["x"], ["y"], **attrs)], {"x": x.shape}, {"y": None}, opset=18)
    want = window_reference(x, attrs["kernel_shape"], attrs.get("strides", [1, 1]),
                            attrs.get("dilations", [1, 1]), pads, out, _lp(attrs["p"]))  # fmt: skip
    np.testing.assert_allclose(run(model, x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(interpret(model, x), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("attrs", "pads", "out"),
    [
        # stride a multiple of the dilation on both axes (undilated windows on x[::d])
        ({"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [2, 3]}, [(0, 0), (0, 0)],
         [2, 2]),
        ({"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [4, 2], "pads": [1, 2, 2, 1],
          "ceil_mode": 1}, [(1, 2), (2, 1)], [2, 4]),
        # mixed: one axis on the grid, the other (stride 3, dilation 2) by strided slices
        ({"kernel_shape": [2, 2], "dilations": [1, 2], "strides": [2, 3]}, [(0, 0), (0, 0)],
         [3, 2]),
    ],
)  # fmt: skip
def test_dilated_max_pool(attrs, pads, out):
    """A dilated max pool whose stride is a multiple of its dilation is one undilated
    `reduceWindow` per axis over every d-th element (PyTorch's
    MaxPool2d_stride_padding_dilation model test: 60 x 80 windows dilated by 10 with
    stride 10 compiled for minutes as 140 slices)."""
    x = randn(2, 3, 7, 8, seed=5)
    model = make([node("MaxPool", ["x"], ["y"], **attrs)], {"x": x.shape}, {"y": None},
                 opset=19)  # fmt: skip
    want = window_reference(x, attrs["kernel_shape"], attrs["strides"], attrs["dilations"],
                            pads, out, lambda v, _: v.max(-1))  # fmt: skip
    np.testing.assert_array_equal(run(model, x), want.astype(np.float32))
    np.testing.assert_array_equal(interpret(model, x), want.astype(np.float32))
    text = dlc.print_module(dlc.onnx.load(model))
    on_grid = sum(s % d == 0 for s, d in zip(attrs["strides"], attrs["dilations"]))
    assert text.count("reduceWindow") == on_grid
