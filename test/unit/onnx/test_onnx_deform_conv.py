"""ONNX DeformConv (2-D, bilinear sampling at offset taps) compiled by dlc and
interpreted, against onnx's reference implementation: strides, pads, dilations,
groups, offset groups, mask and bias; zero offsets equal a plain Conv; the refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx_models import conv, interpret, node, run

import dlc.onnx
from dlc.onnx import OnnxImportError


def _model(shapes: dict, **attrs) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node("DeformConv", list(shapes), ["y"], **attrs)], "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in shapes.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _args(shapes: dict, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes.values()]
    if "offset" in shapes:
        args[2] *= 1.7  # taps land between pixels and outside the image
    if "mask" in shapes:
        args[4] = rng.uniform(0, 1, shapes["mask"]).astype(np.float32)
    return args


CASES = [
    ({"x": (1, 2, 5, 6), "w": (3, 2, 2, 2), "offset": (1, 8, 4, 5)}, {}),
    ({"x": (2, 4, 6, 5), "w": (4, 2, 3, 2), "offset": (2, 24, 3, 2), "b": (4,), "mask": (2, 12, 3, 2)},
     {"group": 2, "offset_group": 2, "strides": [2, 2], "pads": [1, 0, 1, 1], "dilations": [1, 2]}),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(CASES)))
def test_deform_conv_matches_onnx_reference(case):
    """Both interpreted; the second (every attribute) compiled too (LLVM takes seconds)."""
    shapes, attrs = CASES[case]
    model, args = _model(shapes, **attrs), _args(shapes)
    (want,) = ReferenceEvaluator(model).run(None, dict(zip(shapes, args, strict=True)))
    np.testing.assert_allclose(interpret(model, *args), want, rtol=1e-4, atol=1e-5)
    if case == 1:
        np.testing.assert_allclose(run(model, *args), want, rtol=1e-4, atol=1e-5)


def test_zero_offsets_are_a_convolution():
    """Interpreted: the compiled path is checked against onnx's reference above."""
    shapes = {"x": (1, 2, 5, 5), "w": (2, 2, 3, 3), "offset": (1, 18, 5, 5)}
    x, w, _ = _args(shapes, 1)
    offset = np.zeros(shapes["offset"], np.float32)
    got = interpret(_model(shapes, pads=[1, 1, 1, 1]), x, w, offset)
    np.testing.assert_allclose(
        got, conv(x, w, [1, 1], [(1, 1), (1, 1)], [1, 1]), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ({"x": (1, 2, 5), "w": (3, 2, 2), "offset": (1, 4, 4)},
         "only 2-D inputs are supported, got (1, 2, 5) and weight (3, 2, 2)"),
        ({"x": (1, 2, 5, 6), "w": (3, 2, 2, 2), "offset": (1, 8, 3, 5)},
         "offset (1, 8, 3, 5) does not fit the output [1, 4, 5]"),
    ],
)  # fmt: skip
def test_deform_conv_refusals(shapes, message):
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(_model(shapes))
    assert info.value.problems == [f"node 'y' (DeformConv): {message}"]
