"""ONNX ConvTranspose as a convolve of the dilated input: compiled by dlc and
interpreted, against a direct NumPy scatter (every output o = i·s + k·d - pad_lo
receives x[i]·w[k]); the refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx_models import interpret, make, node, randn, run

import dlc.onnx
from dlc.onnx import OnnxImportError


def scatter_reference(x, w, strides, pads, dilations, extra, group=1):
    """ConvTranspose by definition, in float64: pads = [(lo, hi)], extra = output_padding."""
    n, c = x.shape[:2]
    cog, kernel = w.shape[1], w.shape[2:]
    spatial = range(len(kernel))
    full = [(x.shape[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 + extra[i]
            for i in spatial]  # fmt: skip
    y = np.zeros((n, cog * group, *full))
    cig = c // group
    for pos in itertools.product(*(range(d) for d in x.shape[2:])):
        for k in itertools.product(*(range(d) for d in kernel)):
            o = tuple(pos[i] * strides[i] + k[i] * dilations[i] for i in spatial)
            for g in range(group):
                xs = x[:, g * cig : (g + 1) * cig][(..., *pos)].astype(np.float64)
                ws = w[g * cig : (g + 1) * cig][(..., *k)]
                y[(slice(None), slice(g * cog, (g + 1) * cog), *o)] += xs @ ws
    crop = tuple(slice(lo, full[i] - hi) for i, (lo, hi) in enumerate(pads))
    return y[(..., *crop)]


CASES = [  # x shape, w shape, attributes, pads, output_padding
    ((1, 2, 5), (2, 3, 3), {"strides": [2]}, [(0, 0)], [0]),
    ((2, 2, 3, 4), (2, 2, 3, 2), {"strides": [3, 2], "pads": [1, 0, 2, 1]}, [(1, 2), (0, 1)], [0, 0]),
    ((1, 4, 3, 3), (4, 1, 2, 3), {"group": 2, "dilations": [2, 1], "output_padding": [1, 0],
     "strides": [2, 1]}, [(0, 0), (0, 0)], [1, 0]),
    ((1, 1, 6), (1, 1, 2), {"pads": [3, 2]}, [(3, 2)], [0]),  # pads beyond the kernel: crops
    ((1, 2, 2, 3, 2), (2, 1, 2, 2, 2), {"strides": [1, 2, 2]}, [(0, 0)] * 3, [0, 0, 0]),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_transpose_matches_the_definition(case):
    xs, ws, attrs, pads, extra = CASES[case]
    x, w, b = randn(*xs, seed=1), randn(*ws, seed=2), randn(ws[1] * attrs.get("group", 1), seed=3)
    strides = attrs.get("strides", [1] * (len(xs) - 2))
    dilations = attrs.get("dilations", [1] * (len(xs) - 2))
    want = scatter_reference(x, w, strides, pads, dilations, extra, attrs.get("group", 1))
    want += b.reshape((1, -1) + (1,) * (len(xs) - 2))
    model = make([node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)],
                 {"x": xs, "w": ws, "b": [b.size]}, {"y": None})  # fmt: skip
    np.testing.assert_allclose(run(model, x, w, b), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(interpret(model, x, w, b), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("auto_pad", "lo"), [("SAME_UPPER", 0), ("SAME_LOWER", 1)])
def test_same_auto_pad_gives_input_times_stride(auto_pad, lo):
    x, w = randn(1, 1, 3, seed=4), randn(1, 1, 3, seed=5)
    model = make([node("ConvTranspose", ["x", "w"], ["y"], strides=[2], auto_pad=auto_pad)],
                 {"x": (1, 1, 3), "w": (1, 1, 3)}, {"y": None})  # fmt: skip
    full = scatter_reference(x, w, [2], [(0, 0)], [1], [0])
    np.testing.assert_allclose(run(model, x, w), full[..., lo : lo + 6], rtol=1e-5, atol=1e-6)


def test_constant_weight_folds_and_output_shape_extends_the_end():
    x, w = randn(1, 1, 3, 3, seed=6), randn(1, 2, 3, 3, seed=7)
    model = make([node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], output_shape=[10, 8])],
                 {"x": (1, 1, 3, 3)}, {"y": None}, {"w": w})  # fmt: skip
    want = scatter_reference(x, w, [3, 2], [(0, 0)] * 2, [1, 1], [1, 1])
    np.testing.assert_allclose(run(model, x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"output_shape": [9], "pads": [1, 1]},
         "output_shape [9] with auto_pad=NOTSET is not supported (onnx's reference and the "
         "operator's spec disagree)"),
        ({"group": 3}, "input (1, 2, 4) and weight (2, 1, 2) do not fit group=3"),
        ({"output_padding": [1, 1]}, "output_padding needs 1 entries, got [1, 1]"),
        ({"pads": [3, 2]}, "pads [(3, 2)] leave an empty output of the [5] computed"),
    ],
)  # fmt: skip
def test_conv_transpose_refusals_say_why(attrs, message):
    model = make([node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                 {"x": (1, 2, 4), "w": (2, 1, 2)}, {"y": None})  # fmt: skip
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' (ConvTranspose): {message}"]
