"""ONNX quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger), compiled by dlc and
interpreted, against onnx's reference implementation bit for bit, and against the
operators' definition where the reference's result depends on the host (saturation
beyond i32)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_models import check_reference

import dlc
import dlc.onnx
from dlc.onnx import OnnxImportError
from dlc.semantics.interpreter import run_function

TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int16): TensorProto.INT16, np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int32): TensorProto.INT32, np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16,
}  # fmt: skip


def _model(op, inputs, constants=None, opset=21, outputs=1, **attrs) -> onnx.ModelProto:
    """One `op` node; `inputs` are graph inputs (name: array, None for an omitted
    optional input), `constants` initializers."""
    constants = constants or {}
    names = list(inputs)
    node = helper.make_node(op, [n if inputs[n] is not None else "" for n in names],
                            [f"y{k}" for k in range(outputs)], **attrs)  # fmt: skip
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TYPES[a.dtype], a.shape)
         for n, a in inputs.items() if a is not None and n not in constants],
        [helper.make_tensor_value_info(f"y{k}", TensorProto.UNDEFINED, None)
         for k in range(outputs)],
        [numpy_helper.from_array(a, n) for n, a in constants.items()],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, inputs: dict, constants=None) -> list[np.ndarray]:
    """dlc compiled and interpreted equal onnx's reference, values and dtypes."""
    constants = constants or {}
    feeds = [a for n, a in inputs.items() if a is not None and n not in constants]
    return check_reference(model, *feeds)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, 300.0, -300.0, 126.5, -129.5], np.float32)
    for zero in (np.int8(0), np.uint8(128), np.int8(-3)):
        inputs = {"x": x, "s": np.float32(1.0), "z": np.asarray(zero)}
        _check(_model("QuantizeLinear", inputs), inputs)
    y = dlc.compile_onnx(_model("QuantizeLinear", inputs)).g(x, np.float32(1.0), np.int8(0))
    np.testing.assert_array_equal(y, [0, 2, 2, 0, -2, 0, 127, -128, 126, -128])


def test_quantize_saturates_beyond_i32():
    """rint(x / scale) far outside i32 still saturates (onnx's reference converts it
    to i32 first, which the host decides)."""
    x = np.array([1e12, -1e12, np.inf, -np.inf, 3e9], np.float32)
    inputs = {"x": x, "s": np.float32(0.5), "z": np.asarray(np.uint16(7))}
    y = dlc.compile_onnx(_model("QuantizeLinear", inputs)).g(*inputs.values())
    assert y.dtype == np.uint16
    np.testing.assert_array_equal(y, [65535, 0, 65535, 0, 65535])


@pytest.mark.parametrize("zero_type", [np.int8, np.uint8, np.int16, np.uint16])
def test_quantize_per_axis(zero_type):
    rng = _rng(1)
    x = (rng.standard_normal((2, 3, 4)) * 300).astype(np.float32)
    scale = np.array([0.5, 2.0, 3.0], np.float32)
    zero = np.array([1, 2, 3], zero_type)
    inputs = {"x": x, "s": scale, "z": zero}
    _check(_model("QuantizeLinear", inputs, axis=-2), inputs)


def test_quantize_blocked_with_a_short_last_block_and_constant_parameters():
    rng = _rng(2)
    x = (rng.standard_normal((3, 7)) * 50).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, (3, 3)).astype(np.float32)
    zero = rng.integers(-5, 5, (3, 3)).astype(np.int8)
    inputs = {"x": x, "s": scale, "z": zero}
    _check(_model("QuantizeLinear", inputs, axis=1, block_size=3), inputs)
    model = _model("QuantizeLinear", inputs, {"s": scale, "z": zero}, axis=1, block_size=3)
    _check(model, inputs, {"s": scale, "z": zero})


def test_quantize_f16_and_i32_inputs_and_output_dtype():
    x = (_rng(3).standard_normal(16) * 100).astype(np.float16)
    inputs = {"x": x, "s": np.float16(0.7)}
    _check(_model("QuantizeLinear", inputs, output_dtype=TensorProto.INT8), inputs)
    xi = np.arange(-40000, 40000, 5000, dtype=np.int32)
    inputs = {"x": xi, "s": np.float32(3.0), "z": np.asarray(np.int16(-2))}
    _check(_model("QuantizeLinear", inputs), inputs)  # i32 / f32 divides in f64


@pytest.mark.parametrize(
    "x, scale",
    [
        (np.arange(-40960, 40960, 2560, dtype=np.int32), np.asarray(ml_dtypes.bfloat16(3))),
        ((_rng(5).standard_normal(16) * 300).astype(np.float32), np.asarray(np.float16(0.7))),
    ],
)
def test_quantize_opset_23_divides_in_the_scales_type(x, scale):
    """From opset 23 the division's precision is y_scale's type (the specification;
    onnx's reference divides in NumPy's promoted type instead): an i32 x over a bf16 scale
    divides in bf16, an f32 x over an f16 scale in f16. Results are checked against that
    definition, computed here step by step."""
    inputs = {"x": x, "s": scale, "z": np.asarray(np.int16(-2))}
    model = _model("QuantizeLinear", inputs, {"s": scale, "z": inputs["z"]}, opset=23)
    quotient = x.astype(scale.dtype).astype(np.float32) / scale.astype(np.float32)
    rounded = np.rint(quotient.astype(scale.dtype).astype(np.float64))
    expected = np.clip(rounded - 2, -32768, 32767).astype(np.int16)
    np.testing.assert_array_equal(dlc.compile_onnx(model).g(x), expected)
    interpreted = run_function(dlc.onnx.load(model), "g", [x])
    np.testing.assert_array_equal(interpreted, expected)


@pytest.mark.filterwarnings("ignore:overflow")  # i32 times an f16 scale: inf in f16
@pytest.mark.parametrize("x_type", [np.int8, np.uint8, np.int16, np.uint16, np.int32])
def test_dequantize(x_type):
    info = np.iinfo(x_type)
    x = _rng(4).integers(max(info.min, -(2**30)), min(info.max, 2**30), (2, 5)).astype(x_type)
    inputs = {"x": x, "s": np.array([0.1, 3.0], np.float32), "z": np.array([3, 1], x_type)}
    _check(_model("DequantizeLinear", inputs, axis=0), inputs)
    inputs = {"x": x, "s": np.float16(0.3)}
    _check(_model("DequantizeLinear", inputs), inputs)


def test_dequantize_blocked_and_output_dtype():
    x = _rng(5).integers(-128, 128, (4, 5)).astype(np.int8)
    inputs = {"x": x, "s": _rng(6).uniform(0.1, 1, (2, 5)).astype(np.float32),
              "z": _rng(7).integers(-3, 3, (2, 5)).astype(np.int8)}  # fmt: skip
    _check(_model("DequantizeLinear", inputs, axis=0, block_size=2), inputs)
    model = _model("DequantizeLinear", inputs, opset=23, axis=0, block_size=2,
                   output_dtype=TensorProto.FLOAT16)  # fmt: skip
    assert _check(model, inputs)[0].dtype == np.float16


def test_dynamic_quantize_linear():
    x = np.array([-1.0, 0.0, 2.5, 1.3, 7.9, -3.2], np.float32)
    inputs = {"x": x}
    _check(_model("DynamicQuantizeLinear", inputs, opset=11, outputs=3), inputs)


@pytest.mark.parametrize(("qtype", "stype"), [(np.uint8, np.float32), (np.int8, np.float16)])
def test_qlinear_matmul_batched_per_column(qtype, stype):
    rng = _rng(8)
    info = np.iinfo(qtype)
    a = rng.integers(info.min, info.max + 1, (2, 3, 8)).astype(qtype)
    b = rng.integers(info.min, info.max + 1, (8, 5)).astype(qtype)
    inputs = {
        "a": a, "sa": np.asarray(stype(0.02)), "za": np.asarray(qtype(3)),
        "b": b, "sb": rng.uniform(0.01, 0.03, 5).astype(stype), "zb": np.arange(5).astype(qtype),
        "sy": np.asarray(stype(0.5)), "zy": np.asarray(qtype(4)),
    }  # fmt: skip
    _check(_model("QLinearMatMul", inputs), inputs)


def test_matmul_integer_accumulates_exactly_in_i32():
    """2048 products of up to 255 · 255: sums beyond 2^24, exact in i32 (an f32
    accumulator would round them)."""
    a = np.full((2, 2048), 255, np.uint8)
    a[1, ::3] = 3
    b = np.full((2048, 3), 254, np.uint8)
    inputs = {"a": a, "b": b, "za": np.asarray(np.uint8(1)), "zb": np.array([0, 1, 2], np.uint8)}
    (y,) = _check(_model("MatMulInteger", inputs, opset=10), inputs)
    assert y.dtype == np.int32 and y[0, 0] == 2048 * 254 * 254


def test_conv_integer_and_qlinear_conv_per_channel():
    rng = _rng(9)
    x = rng.integers(0, 256, (1, 2, 6, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    inputs = {"x": x, "w": w, "zx": np.asarray(np.uint8(120)), "zw": np.array([1, -2, 0], np.int8)}
    _check(_model("ConvInteger", inputs, opset=10, pads=[1, 0, 1, 2], strides=[2, 1]), inputs)
    inputs = {
        "x": x, "sx": np.asarray(np.float32(0.05)), "zx": np.asarray(np.uint8(120)),
        "w": w, "sw": np.array([0.01, 0.02, 0.005], np.float32), "zw": np.array([0, 0, 0], np.int8),
        "sy": np.asarray(np.float32(0.3)), "zy": np.asarray(np.uint8(100)),
        "bias": np.array([1000, -2000, 5], np.int32),
    }  # fmt: skip
    _check(_model("QLinearConv", inputs, opset=10, pads=[1, 1, 1, 1]), inputs)


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "message"),
    [
        ("QuantizeLinear", {"x": np.zeros(4, np.float32), "s": np.float32(1), "z": np.asarray(np.int8(0))},
         {"output_dtype": TensorProto.UINT8}, "output_dtype u8 differs from the zero point's type i8"),
        ("QuantizeLinear", {"x": np.zeros(4, np.float32), "s": np.float32(1)},
         {"output_dtype": TensorProto.FLOAT8E4M3FN},
         "output_dtype=FLOAT8E4M3FN is not supported (int8, uint8, int16, uint16)"),
        ("QuantizeLinear", {"x": np.zeros((4, 6), np.float32), "s": np.ones((4, 2), np.float32)},
         {"axis": 1, "block_size": 2},
         "input 1 of shape [4, 2] does not block [4, 6] by 2 along axis 1 (expected [4, 3])"),
        ("QuantizeLinear", {"x": np.zeros((4, 6), np.float32), "s": np.ones(3, np.float32)},
         {"axis": 1}, "input 1 of shape [3] is neither one value nor one per element of axis 1 of [4, 6]"),
        ("DequantizeLinear", {"x": np.zeros(4, np.int8), "s": np.float32(1), "z": np.asarray(np.uint8(0))},
         {}, "zero point of type u8 for x of type i8"),
        ("MatMulInteger", {"a": np.zeros((2, 3), np.uint8), "b": np.zeros((3, 2), np.uint8),
                           "za": np.zeros(2, np.uint8)},
         {}, "a_zero_point (input 2) must be one value, got [2]"),
        ("QLinearMatMul", {"a": np.zeros((2, 3), np.int32), "sa": np.float32(1), "za": None,
                           "b": np.zeros((3, 2), np.int32)},
         {}, "input 0 of type i32 is not supported (i8, u8)"),
        ("QuantizeLinear", {"x": np.zeros(4, np.float32), "s": np.float32(1)},
         {"block_size": -1}, "block_size=-1 must not be negative"),
        ("QuantizeLinear", {"x": np.zeros(4, np.float32), "s": np.float32(1), "z": np.asarray(np.int32(0))},
         {}, "quantizing to i32 is not supported (i8, u8, i16, u16)"),
        ("QuantizeLinear", {"x": np.zeros(4, np.float32), "s": np.float32(1)},
         {"opset": 23, "precision": TensorProto.INT8}, "precision=INT8 is not supported"),
        ("DequantizeLinear", {"x": np.zeros(4, np.float32), "s": np.float32(1)},
         {}, "dequantizing f32 is not supported (i8, u8, i16, u16, i32)"),
        ("DequantizeLinear", {"x": np.zeros(4, np.int8), "s": np.float64(1)},
         {}, "a scale of type f64 is not supported (f16, bf16, f32)"),
        ("DequantizeLinear", {"x": np.zeros(4, np.int8), "s": np.float32(1)},
         {"opset": 23, "output_dtype": TensorProto.DOUBLE}, "output_dtype=DOUBLE is not supported"),
        ("MatMulInteger", {"a": np.zeros((2, 3), np.uint8), "b": np.zeros((3, 2), np.uint8),
                           "za": np.asarray(np.int8(0))},
         {}, "the zero point of input 0 has another type than the input"),
        ("MatMulInteger", {"a": np.zeros((2, 3), np.uint8), "b": np.zeros((3, 2), np.uint8),
                           "za": None, "zb": np.zeros(3, np.uint8)},
         {}, "b_zero_point (input 3) must be one value or 2 (one per column)"),
        ("QLinearMatMul", {"a": np.zeros((2, 3), np.int8), "sa": np.float64(1), "za": None,
                           "b": np.zeros((3, 2), np.int8), "sb": np.float64(1), "zb": None,
                           "sy": np.float64(1)},
         {}, "scales of type f64 are not supported (f16, f32)"),
        ("QLinearMatMul", {"a": np.zeros((2, 3), np.int8), "sa": np.float32(1), "za": None,
                           "b": np.zeros((3, 2), np.int8), "sb": np.float32(1), "zb": None,
                           "sy": np.float32(1), "zy": np.asarray(np.int16(0))},
         {}, "an output of type i16 is not supported (i8, u8)"),
        ("ConvInteger", {"x": np.zeros((1, 2, 4, 4), np.uint8), "w": np.zeros((3, 2, 3, 3), np.uint8),
                         "zx": None, "zw": np.zeros(2, np.uint8)},
         {}, "the weight's zero point must be one value or 3"),
        ("QLinearConv", {"x": np.zeros((1, 2, 4, 4), np.uint8), "sx": np.float32(1), "zx": None,
                         "w": np.zeros((3, 2, 3, 3), np.uint8), "sw": np.float32(1), "zw": None,
                         "sy": np.float32(1), "zy": None, "bias": np.zeros(3, np.float32)},
         {}, "the bias must be 3 i32 values"),
        ("QLinearConv", {"x": np.zeros((1, 2, 4, 4), np.uint8), "sx": np.float32(1), "zx": None,
                         "w": np.zeros((3, 2, 3, 3), np.uint8), "sw": np.ones(2, np.float32)},
         {}, "w_scale must be one value or 3 (one per output channel)"),
    ],
)  # fmt: skip
def test_refusals(op, inputs, attrs, message):
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(_model(op, inputs, **attrs))
    assert err.value.problems == [f"node #0 ({op}): {message}"]
