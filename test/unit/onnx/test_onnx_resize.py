"""ONNX Resize and Upsample as products with constant interpolation matrices: compiled
by dlc and interpreted, compared with onnx's reference implementation, and each refusal."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, node, randn, run

import dlc.onnx
from dlc.onnx import OnnxImportError
from dlc.onnx.ops_resize import axis_matrix, linear_coeffs, nearest_coeffs


def _resize(shape, scales=None, sizes=None, roi=None, opset=19, dtype=TensorProto.FLOAT, **attrs):
    consts = {"roi": roi, "scales": scales, "sizes": sizes}
    inputs = ["x"] + [name if consts[name] is not None else "" for name in consts]
    inits = [
        numpy_helper.from_array(np.asarray(v, np.int64 if k == "sizes" else np.float32), k)
        for k, v in consts.items()
        if v is not None
    ]
    graph = helper.make_graph(
        [node("Resize", inputs, ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", dtype, shape)],
        [helper.make_tensor_value_info("y", dtype, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, x: np.ndarray) -> None:
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(run(model, x), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(interpret(model, x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "attrs",
    [
        {"mode": "nearest"},
        {"mode": "nearest", "nearest_mode": "ceil", "coordinate_transformation_mode": "asymmetric"},
        {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
        {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
        {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5},
        {"mode": "linear", "antialias": 1},
        {"mode": "cubic", "antialias": 1, "coordinate_transformation_mode": "half_pixel_symmetric"},
    ],
)
def test_resize_scales_match_onnx_reference(attrs):
    x = randn(1, 2, 5, 4)
    _check(_resize((1, 2, 5, 4), scales=[1.0, 1.0, 0.6, 1.75], **attrs), x)


@pytest.mark.parametrize(
    "attrs",
    [  # as torch.onnx.export writes them: cubic_coeff_a and nearest_mode on every Resize
        {"mode": "linear", "cubic_coeff_a": -0.75, "nearest_mode": "floor"},
        {"mode": "nearest", "cubic_coeff_a": -0.75, "nearest_mode": "floor"},
        {"mode": "cubic", "cubic_coeff_a": -0.5, "nearest_mode": "floor"},
        {"mode": "linear", "keep_aspect_ratio_policy": "not_smaller"},  # scales: no sizes
    ],
)
def test_resize_ignores_attributes_its_mode_does_not_use(attrs):
    x = randn(1, 2, 5, 4)
    _check(_resize((1, 2, 5, 4), scales=[1.0, 1.0, 2.0, 1.5], **attrs), x)


def test_resize_sizes_on_axes_with_aspect_policy():
    x = randn(2, 3, 6)
    model = _resize(
        (2, 3, 6), sizes=[4, 9], axes=[2, 1], keep_aspect_ratio_policy="not_larger", mode="linear"
    )
    _check(model, x)


def test_tf_crop_and_resize_fills_outside_the_roi():
    x = randn(1, 1, 4, 4)
    roi = [0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7]
    model = _resize(
        (1, 1, 4, 4), sizes=[1, 1, 3, 3], roi=roi, mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0,
    )  # fmt: skip
    _check(model, x)


def test_nearest_matrix_has_one_one_per_row():
    matrix, outside = axis_matrix(nearest_coeffs("round_prefer_floor"), "half_pixel", 3, 7,
                                  7 / 3, (0.0, 1.0), False)  # fmt: skip
    assert (matrix.sum(axis=1) == 1).all() and (matrix.max(axis=1) == 1).all()
    assert not outside.any()


def test_linear_matrix_rows_sum_to_one():
    matrix, _ = axis_matrix(linear_coeffs(True), "half_pixel", 8, 3, 3 / 8, (0.0, 1.0), False)
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0)


@pytest.mark.parametrize(("opset", "mode"), [(7, "nearest"), (9, "linear")])
def test_upsample_repeats_and_interpolates(opset, mode):
    x = randn(1, 1, 2, 3)
    scales = [1.0, 1.0, 2.0, 3.0]
    inits = []
    if opset < 9:
        n = node("Upsample", ["x"], ["y"], mode=mode, scales=scales)
    else:
        n = node("Upsample", ["x", "s"], ["y"], mode=mode)
        inits = [numpy_helper.from_array(np.array(scales, np.float32), "s")]
    graph = helper.make_graph(
        [n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 1, 2, 3))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    y = run(model, x)
    if mode == "nearest":
        np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(3, axis=3))
    else:
        assert y.shape == (1, 1, 4, 9)
        np.testing.assert_allclose(y[..., ::2, ::3], x, rtol=1e-6)  # asymmetric: exact nodes


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_resize((2, 3), scales=[1.0, 2.0], opset=10), "Resize before opset 11 is not supported"),
        (
            _resize((2, 3), scales=[1.0, 2.0], dtype=TensorProto.INT32),
            "Resize of i32 tensors is not supported (only f16, f32, f64)",
        ),
        (_resize((2, 3), scales=[2.0]), "scales has 1 values for 2 axes"),
        (_resize((2, 3), sizes=[2]), "sizes has 1 values for 2 axes"),
        (_resize((2, 3), scales=[1.0, -2.0]), "scale -2.0 must be positive"),
        (_resize((2, 3)), "one of scales and sizes must be given"),
        (_resize((2, 3), sizes=[2, 0]), "the output shape [2, 0] has an empty dimension"),
        (
            _resize((2, 3), scales=[1.0, 2.0], antialias=1),
            "antialias=1 is not supported with mode='nearest'",
        ),
        (
            _resize((2, 3), scales=[1.0, 2.0], coordinate_transformation_mode="tf_crop_and_resize"),
            "tf_crop_and_resize needs a roi of two values per axis",
        ),
        (_resize((2, 3), scales=[1.0, 2.0], mode="area"), "mode='area' is not supported"),
    ],
)
def test_resize_refusals(model, message):
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' (Resize): {message}"]


@pytest.mark.parametrize(
    ("opset", "scales", "message"),
    [(7, [1.0, 0.5], "scales [1.0, 0.5] must be one number >= 1 per dimension")],
)
def test_upsample_refusals(opset, scales, message):
    graph = helper.make_graph(
        [node("Upsample", ["x"], ["y"], scales=scales)], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, (2, 2))],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [
        "node 'y' (Upsample): Upsample of i32 tensors is not supported (only f16, f32, f64)"
    ]
    graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT
    graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' (Upsample): {message}"]
