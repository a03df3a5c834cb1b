"""The adjoint of `convolve` (strides, padding, left and right dilations, groups)
against central differences of the reference interpreter (float64), the compiled
adjoint against the reference adjoint, and an imported ONNX ConvTranspose (a
convolve of the stride-dilated input) differentiated end to end."""

from __future__ import annotations

import numpy as np
import pytest
from autodiff_util import check_gradients
from onnx import TensorProto
from onnx_models import make, node
from xdsl.dialects.builtin import ArrayAttr, IntAttr

import dlc
import dlc.onnx
from dlc.dialects.graph_reduction import ConvolveOp
from dlc.dialects.graph_types import TensorType
from dlc.parser import print_module
from dlc.semantics.interpreter import run_function

RNG = np.random.default_rng(3)


def ty(dims) -> str:
    return "<" + " x ".join(map(str, dims)) + " x f64>"


def convolve_text(xs, ks, clauses: dict) -> tuple[str, tuple[int, ...]]:
    props = {k: IntAttr(v) if k == "groups" else ArrayAttr([IntAttr(i) for i in v])
             for k, v in clauses.items()}  # fmt: skip
    out = ConvolveOp.infer([TensorType(xs, "f64"), TensorType(ks, "f64")], props)[0].dims
    words = {
        "strides": "strides",
        "left_dilation": "leftDilation",
        "right_dilation": "rightDilation",
    }
    tail = ""
    for key in ("strides", "padding", "left_dilation", "right_dilation", "groups"):
        value = clauses.get(key)
        if value is None:
            continue
        if key == "padding":
            pairs = [f"({value[i]}, {value[i + 1]})" for i in range(0, len(value), 2)]
            tail += " padding " + ", ".join(pairs)
        elif key == "groups":
            tail += f" groups {value}"
        else:
            tail += f" {words[key]} " + ", ".join(map(str, value))
    text = f"""module "m"
stage raw

func @f: ({ty(xs)}, {ty(ks)}) -> {ty(out)} {{
'entry(%x: {ty(xs)}, %k: {ty(ks)}):
    %y = convolve %x: {ty(xs)} kernel %k: {ty(ks)}{tail}
    return %y: {ty(out)}
}}

[adjoint @f wrt 0, 1 seedable]
func @df: ({ty(xs)}, {ty(ks)}, {ty(out)}) -> ({ty(xs)}, {ty(ks)})
"""
    return text, out


CASES = [
    ((2, 2, 6), (2, 2, 3), {"strides": [2], "padding": [1, 2]}),
    ((1, 1, 6), (1, 1, 2), {"strides": [3]}),  # the last input element is never read
    ((1, 4, 5, 4), (4, 2, 2, 3), {"strides": [2, 1], "padding": [0, 1, 2, 0],
                                  "left_dilation": [2, 1], "right_dilation": [1, 2], "groups": 2}),
    ((1, 1, 4), (1, 1, 2), {"padding": [3, 4]}),  # padding wider than the kernel
    ((1, 1, 5), (2, 1, 2), {"left_dilation": [3], "padding": [0, 5], "strides": [2]}),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(CASES)))
def test_convolve_adjoint_matches_central_differences(case):
    xs, ks, clauses = CASES[case]
    text, out = convolve_text(xs, ks, clauses)
    args, seed = [RNG.standard_normal(xs), RNG.standard_normal(ks)], RNG.standard_normal(out)
    module = check_gradients(text, "f", "df", args, seed=seed)
    if case == 2:  # every clause: the compiled adjoint equals the reference's
        got = dlc.compile(text).df(*args, seed)
        for g, w in zip(got, run_function(module, "df", [*args, seed]), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_onnx_conv_transpose_differentiates():
    """The imported module (float64) with an adjoint: central differences agree."""
    model = make([node("ConvTranspose", ["x", "w"], ["y"], strides=[2], pads=[1, 0])],
                 {"x": (1, 2, 3), "w": (2, 1, 2)}, {"y": None}, dtype=TensorProto.DOUBLE)  # fmt: skip
    text = print_module(dlc.onnx.load(model))
    text += "\n[adjoint @g wrt 0, 1]\nfunc @dg: (<1 x 2 x 3 x f64>, <2 x 1 x 2 x f64>) -> "
    text += "(<1 x 2 x 3 x f64>, <2 x 1 x 2 x f64>)\n"
    check_gradients(text, "g", "dg", [RNG.normal(size=(1, 2, 3)), RNG.normal(size=(2, 1, 2))])
