"""What the ONNX importer refuses among the operators it maps: each message, exactly
(the node-test tool counts these as unsupported, never as wrong answers)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_models import node

import dlc.onnx
from dlc.onnx import OnnxImportError

I32 = TensorProto.INT32


def _errors(model: onnx.ModelProto, **options) -> list[str]:
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model, **options)
    return info.value.problems


def _typed(nodes, inputs, outputs, initializers=None, opset=18):
    """A model whose inputs are `{name: (elem_type, shape)}`."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, 0, None) for n in outputs],
        [onnx.numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


F = TensorProto.FLOAT


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            _typed(
                [node("BitShift", ["a", "b"], ["y"], direction="UP")],
                {"a": (I32, [2]), "b": (I32, [2])},
                ["y"],
            ),
            "node 'y' (BitShift): direction='UP' is not supported",
        ),
        (
            _typed(
                [node("BitShift", ["a", "b"], ["y"], direction="LEFT")],
                {"a": (F, [2]), "b": (F, [2])},
                ["y"],
            ),
            "node 'y' (BitShift): BitShift needs integer operands",
        ),
        (
            _typed([node("BitwiseAnd", ["a", "b"], ["y"])], {"a": (F, [2]), "b": (F, [2])}, ["y"]),
            "node 'y' (BitwiseAnd): BitwiseAnd needs integer operands",
        ),
        (
            _typed([node("BitwiseNot", ["a"], ["y"])], {"a": (TensorProto.BOOL, [2])}, ["y"]),
            "node 'y' (BitwiseNot): BitwiseNot needs integer operands",
        ),
        (
            _typed([node("Not", ["a"], ["y"])], {"a": (I32, [2])}, ["y"]),
            "node 'y' (Not): Not needs a bool operand",
        ),
        (
            _typed([node("Cast", ["x"], ["y"], to=TensorProto.COMPLEX64)], {"x": (F, [2])}, ["y"]),
            "node 'y' (Cast): casting to COMPLEX64 is not supported",
        ),
        (
            _typed([node("And", ["a", "b"], ["y"])], {"a": (F, [2]), "b": (F, [2])}, ["y"]),
            "node 'y' (And): And needs bool operands",
        ),
        (
            _typed([node("Xor", ["a", "b"], ["y"])], {"a": (F, [2]), "b": (F, [2])}, ["y"]),
            "node 'y' (Xor): Xor needs bool operands",
        ),
        (
            _typed([node("Elu", ["x"], ["y"])], {"x": (I32, [2])}, ["y"]),
            "node 'y' (Elu): Elu on i32 is not supported",
        ),
        (
            _typed([node("Gather", ["x", "i"], ["y"])], {"x": (F, [3]), "i": (F, [2])}, ["y"]),
            "node 'y' (Gather): indices of type f32 are not supported (i32, i64)",
        ),
        (
            _typed(
                [node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")],
                {"x": (TensorProto.BOOL, [3]), "i": (I32, [2, 1]), "u": (TensorProto.BOOL, [2])},
                ["y"],
            ),
            "node 'y' (ScatterND): scatterND: reduction 'add' needs numeric data, got bool",
        ),
        (
            _typed(
                [node("ScatterElements", ["x", "i", "u"], ["y"], reduction="sub")],
                {"x": (F, [3]), "i": (I32, [2]), "u": (F, [2])},
                ["y"],
            ),
            "node 'y' (ScatterElements): reduction='sub' is not supported",
        ),
        (
            _typed(
                [node("TensorScatter", ["c", "u"], ["y"], axis=0)],
                {"c": (F, [2, 4]), "u": (F, [1, 4])},
                ["y"],
                opset=24,
            ),
            "node 'y' (TensorScatter): TensorScatter along the batch axis is not supported",
        ),
        (
            _typed(
                [node("TensorScatter", ["c", "u", "w"], ["y"])],
                {"c": (F, [2, 4, 3]), "u": (F, [2, 1, 3]), "w": (I32, [2])},
                ["y"],
                opset=24,
            ),
            "node 'y' (TensorScatter): write_indices of type i32 are not supported",
        ),
        (
            _typed(
                [node("TensorScatter", ["c", "u"], ["y"], mode="ring")],
                {"c": (F, [2, 4, 3]), "u": (F, [2, 1, 3])},
                ["y"],
                opset=24,
            ),
            "node 'y' (TensorScatter): mode='ring' is not supported",
        ),
        (
            _typed(
                [node("GatherND", ["x", "i"], ["y"])], {"x": (F, [3]), "i": (I32, [2, 2])}, ["y"]
            ),
            "node 'y' (GatherND): gatherND: index depth 2 is too deep for <3 x f32>",
        ),
        (
            _typed([node("Trilu", ["x"], ["y"])], {"x": (F, [3])}, ["y"]),
            "node 'y' (Trilu): Trilu needs rank ≥ 2",
        ),
        (
            _typed([node("ArgMax", ["x"], ["y"])], {"x": (TensorProto.BOOL, [3])}, ["y"]),
            "node 'y' (ArgMax): ArgMax on bool is not supported",
        ),
        (
            _typed(
                [node("Split", ["x", "s"], ["y", "z"])],
                {"x": (F, [5])},
                ["y", "z"],
                {"s": np.array([2, 2])},
            ),
            "node 'y' (Split): split sizes [2, 2] do not partition dimension 5",
        ),
        (
            _typed([node("Tile", ["x", "r"], ["y"])], {"x": (F, [2])}, ["y"], {"r": np.array([0])}),
            "node 'y' (Tile): repeats [0] must be positive, one per dimension",
        ),
        (
            _typed(
                [node("Pad", ["x", "p"], ["y"])], {"x": (F, [2])}, ["y"], {"p": np.array([-1, 0])}
            ),
            "node 'y' (Pad): pads [-1, 0] must be 2 non-negative integers",
        ),
        (
            _typed(
                [node("Expand", ["x", "s"], ["y"])], {"x": (F, [3])}, ["y"], {"s": np.array([2])}
            ),
            "node 'y' (Expand): [3] does not broadcast to [2]",
        ),
        (
            _typed(
                [node("Clip", ["x", "lo"], ["y"])],
                {"x": (F, [3])},
                ["y"],
                {"lo": np.zeros(2, np.float32)},
            ),
            "node 'y' (Clip): Clip bounds must be scalars, input 1 has shape (2,)",
        ),
        (
            _typed(
                [node("ReduceL2", ["x"], ["y"], noop_with_empty_axes=1)], {"x": (F, [3])}, ["y"]
            ),
            "node 'y' (ReduceL2): noop_with_empty_axes=1 is not supported",
        ),
        (
            _typed(
                [node("LayerNormalization", ["x", "s"], ["y"])],
                {"x": (F, [2, 3]), "s": (TensorProto.COMPLEX64, [3])},
                ["y"],
            ),
            "input 's': element type COMPLEX64 is not supported (f16, bf16, f32, f64, i8-i64, u8-u64, bool)",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_refusal(model, message):
    assert _errors(model) == [message]


def test_function_body_problems_are_one_problem_of_the_node():
    """An operator imported as its ONNX function body reports what the body lacks, as
    one problem of the node (at most three of the body's)."""
    model = _typed([node("MeanVarianceNormalization", ["x"], ["y"])], {"x": (F, [3])}, ["y"])
    assert _errors(model) == [
        "node 'y' (MeanVarianceNormalization): operator MeanVarianceNormalization (its "
        "function body: node 'y.3.ReduceMean' (ReduceMean): axis 2 is out of range for rank 1; "
        "node 'y.6.ReduceMean' (ReduceMean): axis 2 is out of range for rank 1)"
    ]


def test_function_body_imports():
    """MeanVarianceNormalization has no converter: its body computes it."""
    model = _typed([node("MeanVarianceNormalization", ["x"], ["y"])], {"x": (F, [2, 3, 2, 2])}, ["y"])  # fmt: skip
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 2)).astype(np.float32)
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    std = np.sqrt(((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True))
    y = dlc.compile_onnx(model).g(x)
    np.testing.assert_allclose(y, (x - mean) / (std + 1e-9), rtol=1e-4, atol=1e-5)


def test_constant_inputs_name_graph_inputs():
    model = _typed([node("Reshape", ["x", "s"], ["y"])], {"x": (F, [4]), "s": (TensorProto.INT64, [2])}, ["y"])  # fmt: skip
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == ["node 'y' (Reshape): shape (input 1) must be a constant"]
    assert info.value.wanted_constants == ["s"]
    module = dlc.onnx.load(model, constant_inputs={"s": np.array([2, 2])})
    assert "<2 x 2 x f32>" in dlc.print_module(module)
    assert _errors(model, constant_inputs={"t": np.array([2, 2]), "s": np.array([2, 2])}) == [
        "constant_inputs names 't', which is not a graph input"
    ]
