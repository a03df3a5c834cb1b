"""ONNX DFT, STFT, the window functions and MelWeightMatrix: compiled by dlc and
interpreted, compared with NumPy's FFT in float64 and onnx's reference, and each
refusal."""

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
from dlc.dialects.graph import LiteralOp
from dlc.onnx import OnnxImportError, ops_signal
from dlc.onnx.ops_signal import dft_matrix

RNG = np.random.default_rng(3)


def _model(op, inputs, inits=None, opset=20, dtype=TensorProto.DOUBLE, order=None, **attrs):
    """A one-node model; `order` lists the node's inputs ("" for an omitted one)."""
    values = [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()]
    names = order if order is not None else list(inputs) + list(inits or {})
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)],
        "g",
        values,
        [helper.make_tensor_value_info("y", dtype, None)],
        [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _reference(model: onnx.ModelProto, *args: np.ndarray) -> np.ndarray:
    names = [v.name for v in model.graph.input]
    return ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))[0]


def _dft(shape, opset=20, axis=None, n=None, dtype=TensorProto.DOUBLE, **attrs):
    inits, order = {}, ["x", "", ""]
    if n is not None:
        inits["n"], order[1] = np.array(n, np.int64), "n"
    if opset >= 20 and axis is not None:
        inits["axis"], order[2] = np.array(axis, np.int64), "axis"
    elif axis is not None:
        attrs["axis"] = axis
    while order[-1] == "":
        order.pop()
    return _model("DFT", {"x": (dtype, shape)}, inits, opset, dtype, order, **attrs)


def test_every_dft_form_matches_onnx_reference_in_f64():
    """Real and complex signals, forward, inverse, one-sided (rfft, irfft), dft_length
    shorter, longer and odd, both opsets, interpreted in float64 (1e-12)."""
    forms = itertools.product((1, 2), (0, 1), (0, 1), (None, 5, 8, 13), ((17, 2), (20, -2)))
    for parts, inverse, onesided, n, (opset, axis) in forms:
        x = RNG.standard_normal((2, 3, 7, parts))
        model = _dft(x.shape, opset, axis, n, inverse=inverse, onesided=onesided)
        np.testing.assert_allclose(interpret(model, x), _reference(model, x), atol=1e-12)


@pytest.mark.parametrize(
    "parts, inverse, onesided, n",
    [(1, 0, 1, None), (2, 1, 0, 12), (2, 1, 1, 9)],
)
def test_dft_compiled_matches_numpy_fft(parts, inverse, onesided, n):
    x = RNG.standard_normal((3, 10, parts))
    z = x[..., 0] + (1j * x[..., 1] if parts == 2 else 0)
    length = n or (2 * (10 - 1) if inverse and onesided else 10)
    if inverse and onesided:
        expected = np.fft.irfft(z, length, axis=1)[..., None]
    else:
        y = (np.fft.ifft if inverse else np.fft.fft)(z, length, axis=1)
        y = y[:, : length // 2 + 1] if onesided else y
        expected = np.stack([y.real, y.imag], axis=-1)
    model = _dft(x.shape, 20, 1, n, inverse=inverse, onesided=onesided)
    np.testing.assert_allclose(run(model, x), expected, atol=1e-12)


def test_dft_f32_rounds_once_from_an_f64_matrix():
    x = RNG.standard_normal((4, 64, 1)).astype(np.float32)
    model = _dft(x.shape, 20, 1, dtype=TensorProto.FLOAT)
    y = np.fft.fft(x[..., 0].astype(np.float64), axis=1)
    expected = np.stack([y.real, y.imag], axis=-1)
    np.testing.assert_allclose(run(model, x), expected, rtol=0, atol=2e-5 * np.abs(y).max())


def test_generated_matrices_equal_the_literal_ones(monkeypatch):
    """Every form with the matrix gathered by the program from cos/sin tables (the path
    of matrices above LITERAL_MATRIX elements), interpreted."""
    monkeypatch.setattr(ops_signal, "LITERAL_MATRIX", 0)
    for parts, inverse, onesided, n in itertools.product((1, 2), (0, 1), (0, 1), (None, 5, 13)):
        x = RNG.standard_normal((2, 7, parts))
        model = _dft(x.shape, 20, 1, n, inverse=inverse, onesided=onesided)
        np.testing.assert_allclose(interpret(model, x), _reference(model, x), atol=1e-12)


def test_large_dft_matrix_is_no_literal():
    x = RNG.standard_normal((2, 300, 1))
    model = _dft(x.shape, 20, 1)
    module = dlc.onnx.load(model)
    sizes = [op.result.type.num_elements for op in module.walk() if isinstance(op, LiteralOp)]
    assert max(sizes) <= 2 * 300
    y = np.fft.fft(x[..., 0], axis=1)
    np.testing.assert_allclose(run(model, x), np.stack([y.real, y.imag], -1), atol=1e-10)


def test_dft_matrix_of_a_real_inverse_counts_inner_frequencies_twice():
    """irfft of n = 6 from 4 bins: bins 1 and 2 twice, bin 0 and the Nyquist bin 3 once."""
    matrix, parts = dft_matrix(4, 2, 6, inverse=True, onesided=True)
    assert parts == 1 and matrix.shape == (8, 6)
    np.testing.assert_allclose(matrix[::2, 0] * 6, [1, 2, 2, 1])


@pytest.mark.parametrize(
    "shape, opset, axis, attrs, message",
    [
        ((2, 5, 3), 20, None, {}, "the signal's last axis must hold 1 (real) or 2 (complex)"),
        ((2, 5, 2), 20, -1, {}, "axis must not be the last axis"),
        ((2, 5, 2), 17, 3, {}, "axis 3 is out of range for rank 3"),
    ],
)
def test_dft_refusals(shape, opset, axis, attrs, message):
    with pytest.raises(OnnxImportError, match=r"node #0 \(DFT\): " + re.escape(message)):
        dlc.onnx.load(_dft(shape, opset, axis, **attrs))


def test_dft_length_input_is_a_wanted_constant():
    model = _model(
        "DFT",
        {"x": (TensorProto.DOUBLE, (2, 5, 1)), "n": (TensorProto.INT64, ())},
    )
    with pytest.raises(OnnxImportError, match="dft_length \\(input 1\\) must be a constant") as err:
        dlc.onnx.load(model)
    assert err.value.wanted_constants == ["n"]


# ---- STFT ---------------------------------------------------------------------------


@pytest.mark.parametrize("parts, onesided, window", [(1, 1, True), (2, 0, False)])
def test_stft_matches_onnx_reference(parts, onesided, window):
    x = RNG.standard_normal((2, 40, parts))
    inputs = {"x": (TensorProto.DOUBLE, x.shape)}
    inits = {"step": np.array(6, np.int64)}
    args = [x]
    if window:
        w = np.hanning(8)
        inputs["w"] = (TensorProto.DOUBLE, w.shape)
        args.append(w)
        order = ["x", "step", "w"]
    else:
        inits["length"] = np.array(8, np.int64)
        order = ["x", "step", "", "length"]
    model = _model("STFT", inputs, inits, 17, order=order, onesided=onesided)
    expected = _reference(model, *args)
    np.testing.assert_allclose(run(model, *args), expected, atol=1e-12)
    np.testing.assert_allclose(interpret(model, *args), expected, atol=1e-12)


def test_stft_refuses_a_window_of_another_length():
    inits = {"step": np.array(2, np.int64), "w": np.ones(6), "length": np.array(8, np.int64)}
    model = _model("STFT", {"x": (TensorProto.DOUBLE, (1, 20, 1))}, inits, 17)
    with pytest.raises(OnnxImportError, match="the window has 6 values, frame_length 8"):
        dlc.onnx.load(model)


# ---- windows and mel matrices: evaluated at import ---------------------------------


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_windows_of_a_constant_size_are_constants(op):
    model = _model(op, {}, {"size": np.array(10, np.int64)}, 17, TensorProto.FLOAT, periodic=0)
    expected = _reference(model)
    np.testing.assert_allclose(interpret(model), expected, rtol=1e-6)


def test_window_size_input_is_a_wanted_constant():
    model = _model("HannWindow", {"size": (TensorProto.INT64, ())}, None, 17, TensorProto.FLOAT)
    with pytest.raises(OnnxImportError, match="size \\(input 0\\) must be a constant") as err:
        dlc.onnx.load(model)
    assert err.value.wanted_constants == ["size"]


def test_mel_weight_matrix_is_folded_and_feeds_a_matmul():
    inits = {
        "bins": np.array(8, np.int64),
        "length": np.array(64, np.int64),
        "rate": np.array(16000, np.int64),
        "low": np.array(20.0, np.float32),
        "high": np.array(4000.0, np.float32),
    }
    mel = helper.make_node("MelWeightMatrix", list(inits), ["m"])
    matmul = helper.make_node("MatMul", ["x", "m"], ["y"])
    graph = helper.make_graph(
        [mel, matmul],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (3, 33))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = RNG.standard_normal((3, 33)).astype(np.float32)
    np.testing.assert_allclose(run(model, x), _reference(model, x), rtol=1e-5, atol=1e-6)


def _stft(shape, step=2, window=None, length=None, dtype=TensorProto.DOUBLE):
    inits, order = {"step": np.array(step, np.int64)}, ["x", "step", "", ""]
    if window is not None:
        inits["w"], order[2] = np.ones(window), "w"
    if length is not None:
        inits["length"], order[3] = np.array(length, np.int64), "length"
    while order[-1] == "":
        order.pop()
    return _model("STFT", {"x": (dtype, shape)}, inits, 17, dtype, order)


@pytest.mark.parametrize(
    "model, message",
    [
        (_stft((20, 1)), "the signal must be (batch, length, parts), got [20, 1]"),
        (_stft((1, 20, 1), step=0), "frame_step 0 must be a positive constant"),
        (_stft((1, 20, 1), window=(2, 4)), "the window must be 1-D, got shape [2, 4]"),
        (_stft((1, 20, 1), length=30), "frame_length 30 does not fit a signal of length 20"),
        (_stft((1, 20, 1), dtype=TensorProto.INT32), "STFT of i32 is not supported"),
        (_dft((2, 5, 1), n=0), "dft_length 0 must be positive"),
        (_dft((2, 5000, 2)), "a DFT of 5000 points over 5000 is too large (O(n²) matrix)"),
        (_dft((2, 5, 1), axis=[1, 2]), "axis must be a single value, got shape [2]"),
    ],
)
def test_signal_refusals(model, message):
    op = model.graph.node[0].op_type
    with pytest.raises(OnnxImportError, match=rf"node #0 \({op}\): " + re.escape(message)):
        dlc.onnx.load(model)


def test_folding_failures_are_refusals():
    """The reference's own checks (here: a window type onnx does not allow) become the
    node's problem."""
    inits = {"size": np.array(4, np.int64)}
    model = _model("HannWindow", {}, inits, 17, TensorProto.FLOAT, output_datatype=8)
    with pytest.raises(OnnxImportError, match=r"node #0 \(HannWindow\): cannot fold constant"):
        dlc.onnx.load(model)
