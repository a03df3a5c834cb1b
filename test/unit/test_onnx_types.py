"""ONNX models on unsigned integers and bf16, casts and bit operators, compiled by dlc
and compared with onnx's reference implementation."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx_models import node

import dlc

BF16 = ml_dtypes.bfloat16


def _model(nodes, inputs, outputs, opset=21) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, *args: np.ndarray, rtol: float = 0.0) -> None:
    names = [i.name for i in model.graph.input]
    expected = ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))
    got = dlc.compile_onnx(model).g(*args)
    got = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        if e.dtype == BF16:
            g, e = g.astype(np.float32), e.astype(np.float32)
        np.testing.assert_allclose(g, e, rtol=rtol)


def test_uint8_arithmetic_and_comparison():
    u8 = TensorProto.UINT8
    model = _model(
        [node("Div", ["a", "b"], ["q"]), node("Sub", ["a", "b"], ["d"]),
         node("Greater", ["a", "b"], ["g"]), node("Max", ["a", "b"], ["m"])],
        {"a": (u8, [6]), "b": (u8, [6])},
        {"q": u8, "d": u8, "g": TensorProto.BOOL, "m": u8},
    )  # fmt: skip
    a = np.array([200, 3, 255, 7, 130, 1], np.uint8)
    b = np.array([7, 200, 2, 1, 129, 255], np.uint8)
    _check(model, a, b)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_and_bitwise_on_uint64(direction):
    u64 = TensorProto.UINT64
    model = _model(
        [node("BitShift", ["a", "b"], ["s"], direction=direction),
         node("BitwiseXor", ["a", "b"], ["x"]), node("BitwiseNot", ["a"], ["n"])],
        {"a": (u64, [5]), "b": (u64, [5])}, {"s": u64, "x": u64, "n": u64},
    )  # fmt: skip
    a = np.array([1, 2**63 + 5, 12345, 2**64 - 1, 7], np.uint64)
    b = np.array([0, 1, 63, 64, 3], np.uint64)
    _check(model, a, b)


@pytest.mark.parametrize(
    ("source", "target"),
    [(TensorProto.FLOAT, TensorProto.INT32), (TensorProto.INT64, TensorProto.FLOAT),
     (TensorProto.FLOAT, TensorProto.UINT8), (TensorProto.BOOL, TensorProto.DOUBLE),
     (TensorProto.FLOAT, TensorProto.BFLOAT16), (TensorProto.UINT16, TensorProto.BOOL)],
)  # fmt: skip
def test_cast(source, target):
    model = _model([node("Cast", ["x"], ["y"], to=target)], {"x": (source, [6])}, {"y": target})
    values = {
        TensorProto.FLOAT: np.array([-2.7, -0.5, 0.0, 1.5, 200.9, 3.1], np.float32),
        TensorProto.INT64: np.array([-(2**40), -1, 0, 1, 2**53 + 1, 7], np.int64),
        TensorProto.BOOL: np.array([True, False, True, True, False, False]),
        TensorProto.UINT16: np.array([0, 1, 65535, 2, 0, 9], np.uint16),
    }
    _check(model, values[source])


def test_bf16_matmul_and_relu_compute_in_f32():
    bf = TensorProto.BFLOAT16
    model = _model(
        [node("MatMul", ["a", "b"], ["m"]), node("Relu", ["m"], ["y"])],
        {"a": (bf, [3, 4]), "b": (bf, [4, 2])}, {"y": bf},
    )  # fmt: skip
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(BF16)
    b = rng.standard_normal((4, 2)).astype(BF16)
    _check(model, a, b, rtol=1e-2)
    assert "dataTypeCast" in dlc.print_module(dlc.onnx.load(model))


@pytest.mark.parametrize(
    ("base", "exponent"),
    [(TensorProto.FLOAT, TensorProto.INT64), (TensorProto.FLOAT, TensorProto.UINT32),
     (TensorProto.INT32, TensorProto.FLOAT), (TensorProto.INT64, TensorProto.INT32)],
)  # fmt: skip
def test_pow_with_mixed_types_as_onnx_reference(base, exponent):
    model = _model([node("Pow", ["a", "b"], ["y"])], {"a": (base, [4]), "b": (exponent, [4])},
                   {"y": base})  # fmt: skip
    np_type = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64,
               TensorProto.UINT32: np.uint32, TensorProto.INT32: np.int32}  # fmt: skip
    a = np.array([2, 3, 5, 1], np_type[base])
    b = np.array([3, 0, 2, 1.5 if exponent == TensorProto.FLOAT else 4], np_type[exponent])
    _check(model, a, b, rtol=1e-6)


def test_bitcast_reinterprets_bits():
    model = _model([node("BitCast", ["x"], ["y"], to=TensorProto.INT32)],
                   {"x": (TensorProto.FLOAT, [3])}, {"y": TensorProto.INT32}, opset=26)  # fmt: skip
    x = np.array([1.0, -2.5, np.inf], np.float32)
    np.testing.assert_array_equal(dlc.compile_onnx(model).g(x), x.view(np.int32))


@pytest.mark.parametrize(
    ("source", "to", "message"),
    [
        (TensorProto.UINT8, TensorProto.BOOL, "bit casting u8 to bool is not supported"),
        (TensorProto.FLOAT, TensorProto.INT64, "bit casting f32 to i64 changes the width"),
        (TensorProto.FLOAT, TensorProto.COMPLEX64, "bit casting to COMPLEX64 is not supported"),
    ],
)
def test_bitcast_refusals(source, to, message):
    model = _model([node("BitCast", ["x"], ["y"], to=to)], {"x": (source, [3])},
                   {"y": to}, opset=26)  # fmt: skip
    with pytest.raises(dlc.onnx.OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [f"node 'y' (BitCast): {message}"]


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_and_min_of_bool(op):
    model = _model([node(op, ["x"], ["y"], keepdims=0)], {"x": (TensorProto.BOOL, [2, 3])},
                   {"y": TensorProto.BOOL}, opset=20)  # fmt: skip
    x = np.array([[True, False, True], [False, False, False]])
    _check(model, x)
