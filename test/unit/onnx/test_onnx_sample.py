"""ONNX GridSample and RoiAlign as gathers with computed indices: compiled by dlc and
interpreted, compared with onnx's reference implementation, and each refusal."""

from __future__ import annotations

import itertools
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, run

import dlc.onnx
from dlc.onnx import OnnxImportError

RNG = np.random.default_rng(7)


def _model(op, inputs, opset=22, inits=None, dtype=TensorProto.FLOAT, **attrs):
    values = [helper.make_tensor_value_info(n, t, a.shape) for n, (t, a) in inputs.items()]
    graph = helper.make_graph(
        [helper.make_node(op, list(inputs) + list(inits or {}), ["y"], **attrs)],
        "g",
        values,
        [helper.make_tensor_value_info("y", dtype, None)],
        [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, *args: np.ndarray, tol: float = 1e-5, compiled: bool = True):
    names = [v.name for v in model.graph.input]
    expected = ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))[0]
    np.testing.assert_allclose(interpret(model, *args), expected, rtol=tol, atol=tol)
    if compiled:
        np.testing.assert_allclose(run(model, *args), expected, rtol=tol, atol=tol)


def _grid_case(spatial: int, dtype=np.float32):
    x = RNG.standard_normal((2, 3, *[4, 5, 3][:spatial])).astype(dtype)
    grid = RNG.uniform(-1.5, 1.5, (2, *[3, 4, 2][:spatial], spatial)).astype(np.float32)
    grid.flat[:6] = [-1.0, 1.0, 0.0, 0.5, -0.5, 1.25]  # corners, centre, rounding ties
    return x, grid


def _grid_model(x, grid, opset=22, **attrs):
    xt = helper.np_dtype_to_tensor_dtype(x.dtype)
    inputs = {"x": (xt, x), "grid": (TensorProto.FLOAT, grid)}
    return _model("GridSample", inputs, opset, dtype=xt, **attrs)


@pytest.mark.parametrize(
    "spatial, mode, padding, align",
    [
        (2, "linear", "zeros", 0),
        (2, "nearest", "reflection", 0),
        (2, "cubic", "border", 1),
        (3, "linear", "reflection", 1),
    ],
)
def test_grid_sample_compiled_matches_onnx_reference(spatial, mode, padding, align):
    x, grid = _grid_case(spatial)
    model = _grid_model(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    _check(model, x, grid)


def test_grid_sample_every_mode_padding_and_rank_interpreted():
    """All 54 forms (1-D to 3-D) through the reference interpreter on the imported graph."""
    for spatial, mode, padding, align in itertools.product(
        (1, 2, 3), ("nearest", "linear", "cubic"), ("zeros", "border", "reflection"), (0, 1)
    ):
        x, grid = _grid_case(spatial)
        model = _grid_model(x, grid, mode=mode, padding_mode=padding, align_corners=align)
        _check(model, x, grid, compiled=False)


def test_grid_sample_opset16_names_and_f16_data():
    """Opset 16's `bicubic` is opset 20's `cubic` (onnx's reference knows only the new
    names); f16 data is sampled in f32 and rounded once."""
    x, grid = _grid_case(2, np.float16)
    new = _grid_model(x, grid, mode="cubic", padding_mode="zeros")
    expected = ReferenceEvaluator(new).run(None, {"x": x, "grid": grid})[0]
    old = _grid_model(x, grid, opset=16, mode="bicubic", padding_mode="zeros")
    np.testing.assert_allclose(run(old, x, grid), expected, rtol=2e-3, atol=2e-3)


def test_grid_sample_far_outside_reads_zeros_and_never_out_of_bounds():
    x = RNG.standard_normal((1, 2, 3, 3)).astype(np.float32)
    grid = np.array([[[[1e30, -1e30], [-7.0, 9.0]]]], np.float32)
    model = _grid_model(x, grid, mode="cubic", padding_mode="zeros")
    np.testing.assert_array_equal(run(model, x, grid), np.zeros((1, 2, 1, 2), np.float32))


@pytest.mark.parametrize(
    "opset, xshape, gshape, attrs, message",
    [
        (16, (1, 1, 2, 2, 2), (1, 2, 2, 2, 3), {}, "GridSample before opset 20 needs a 4-D input"),
        (22, (1, 1, 4, 4), (1, 3, 3, 3), {}, "grid of shape [1, 3, 3, 3] does not fit X"),
        (22, (1, 1, 4, 4), (1, 3, 3, 2), {"mode": "bilinear"}, "mode='bilinear' is not supported"),
        (22, (1, 1, 4, 4), (1, 3, 3, 2), {"padding_mode": "wrap"}, "padding_mode='wrap'"),
    ],
)
def test_grid_sample_refusals(opset, xshape, gshape, attrs, message):
    x, grid = np.zeros(xshape, np.float32), np.zeros(gshape, np.float32)
    with pytest.raises(OnnxImportError, match=r"node #0 \(GridSample\): " + re.escape(message)):
        dlc.onnx.load(_grid_model(x, grid, opset=opset, **attrs))


def test_grid_sample_refuses_integer_data():
    x, grid = np.zeros((1, 1, 2, 2), np.int32), np.zeros((1, 1, 1, 2), np.float32)
    with pytest.raises(OnnxImportError, match="X of type i32 is not supported"):
        dlc.onnx.load(_grid_model(x, grid))


# ---- RoiAlign -----------------------------------------------------------------------

ROIS = np.array(
    [
        [0.5, 1, 6, 7.5],
        [-3, -2, 4, 3],
        [7, 2, 20, 15],
        [2, 2, 2.3, 2.2],
        [1, 1, 10, 8],
        [5, 6, 3, 2],
    ],
    np.float32,
)  # inside, partly outside, mostly outside, tiny, large, flipped (no samples with half_pixel)
BATCH = np.array([0, 1, 1, 0, 1, 0], np.int64)


def _roi_model(opset=22, constant_rois=False, rois=ROIS, **attrs):
    x = np.zeros((2, 3, 9, 11), np.float32)
    inputs = {"x": (TensorProto.FLOAT, x)}
    inits = {"rois": rois} if constant_rois else None
    if not constant_rois:
        inputs["rois"] = (TensorProto.FLOAT, rois)
    graph_inputs = {**inputs, "batch": (TensorProto.INT64, BATCH[: len(rois)])}
    model = _model("RoiAlign", graph_inputs, opset, inits, output_height=3, output_width=4,
                   spatial_scale=0.9, **attrs)  # fmt: skip
    if constant_rois:  # the node reads x, rois, batch in that order
        model.graph.node[0].input[:] = ["x", "rois", "batch"]
    return model


@pytest.mark.parametrize(
    "attrs",
    [
        {"mode": "avg", "sampling_ratio": 2, "coordinate_transformation_mode": "half_pixel"},
        {"mode": "max", "sampling_ratio": 3, "coordinate_transformation_mode": "output_half_pixel"},
    ],
)
def test_roi_align_matches_onnx_reference(attrs):
    x = RNG.standard_normal((2, 3, 9, 11)).astype(np.float32)
    _check(_roi_model(**attrs), x, ROIS, BATCH)


@pytest.mark.parametrize(
    "mode, rois, compiled",
    [("avg", ROIS, False), ("max", ROIS[[0, 3, 5]], True), ("avg", ROIS[[5]], False)],
)
def test_roi_align_adaptive_sampling_with_constant_rois(mode, rois, compiled):
    """sampling_ratio 0: each roi samples ceil(size / bins) points per bin (here 0 to 4;
    the last case: no roi has a sample). Constant rois make the whole index
    computation constant (folded when compiled: slow, so only three rois compile)."""
    x = RNG.standard_normal((2, 3, 9, 11)).astype(np.float32)
    model = _roi_model(constant_rois=True, rois=rois, mode=mode, sampling_ratio=0)
    _check(model, x, BATCH[: len(rois)], compiled=compiled)


def test_roi_align_opset10_is_output_half_pixel():
    """RoiAlign-10 has no coordinate_transformation_mode: its behaviour is what opset 16
    calls output_half_pixel (onnx's reference applies opset 22's default, half_pixel)."""
    x = RNG.standard_normal((2, 3, 9, 11)).astype(np.float32)
    old = _roi_model(opset=10, sampling_ratio=2)
    new = _roi_model(opset=16, sampling_ratio=2, coordinate_transformation_mode="output_half_pixel")
    expected = ReferenceEvaluator(new).run(None, {"x": x, "rois": ROIS, "batch": BATCH})[0]
    np.testing.assert_allclose(interpret(old, x, ROIS, BATCH), expected, rtol=1e-5, atol=1e-5)


def test_roi_align_adaptive_sampling_needs_constant_rois():
    with pytest.raises(OnnxImportError, match="sampling_ratio=0 needs the rois as a constant"):
        dlc.onnx.load(_roi_model(sampling_ratio=0))


@pytest.mark.parametrize(
    "shapes, attrs, message",
    [
        (((2, 3, 9), (1, 4), (1,)), {}, "X must be a 4-D float tensor, got [2, 3, 9]"),
        (((1, 1, 4, 4), (2, 5), (2,)), {}, "rois [2, 5] and batch_indices [2] must be (R, 4)"),
        (((1, 1, 4, 4), (2, 4), (2,), TensorProto.FLOAT), {}, "batch_indices of type f32"),
        (((1, 1, 4, 4), (2, 4), (2,)), {"output_height": 0}, "output size [0, 1] must be"),
    ],
)
def test_roi_align_refusals(shapes, attrs, message):
    xs, rs, bs, *bt = shapes
    inputs = {
        "x": (TensorProto.FLOAT, np.zeros(xs)),
        "rois": (TensorProto.FLOAT, np.zeros(rs)),
        "batch": (bt[0] if bt else TensorProto.INT64, np.zeros(bs)),
    }
    model = _model("RoiAlign", inputs, sampling_ratio=1, **attrs)
    with pytest.raises(OnnxImportError, match=r"node #0 \(RoiAlign\): " + re.escape(message)):
        dlc.onnx.load(model)
