"""What dlc cannot import is one `OnnxImportError` (a `DiagnosticError`) naming every
offending node, attribute and input, one line each: `FILE: error: node 'NAME'
(OpType): what is missing`. Every message of the importer is checked here."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import make, node, randn, run

import dlc
import dlc.onnx
from dlc.onnx.importer import OnnxImportError

X4 = {"x": (1, 4, 5, 5)}


def _errors(model: onnx.ModelProto, **kw: object) -> list[str]:
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model, **kw)
    assert isinstance(info.value, dlc.DiagnosticError)
    return str(info.value).splitlines()


def test_two_unsupported_nodes_are_one_error_naming_both():
    model = make(
        [
            node("Relu", ["x"], ["r"]),
            node("Xyz", ["r"], ["e"]),
            node("Cos", ["e"], ["c"]),  # reads an unknown value: not reported again
            helper.make_node("Unique", ["r"], ["g"]),  # unnamed: its index
            node("Add", ["c", "g"], ["y"]),
        ],
        {"x": (2, 3)},
        {"y": None},
    )
    assert _errors(model) == [
        "<model>: error: node 'e' (Xyz): operator Xyz is not supported",
        "<model>: error: node #3 (Unique): the output shape depends on the values of input "
        "'r' (the number of distinct values), known only at run time: dlc compiles static "
        "shapes (a constant input is folded at import)",
    ]


def test_dynamic_dimension_needs_input_shapes():
    model = make([node("Relu", ["x"], ["y"])], {"x": ("batch", 3)}, {"y": None})
    assert _errors(model) == [
        "<model>: error: input 'x': dynamic shape (batch, 3); give its shape with "
        "input_shapes={'x': (...)} (dlc-run: --input-shape x=...)"
    ]
    assert dlc.onnx.load(model, {"x": (2, 3)}) is not None


def test_negative_declared_dimension_is_unknown():
    """paddle2onnx writes `dim_value: -1` for an unknown dimension (inputs and outputs):
    input_shapes fills it in, and without them it is a dynamic shape, not a clash."""
    model = make([node("Relu", ["x"], ["y"])], {"x": (-1, 3, "h")}, {"y": (-1, 3, -1)})
    assert _errors(model) == [
        "<model>: error: input 'x': dynamic shape (-1, 3, h); give its shape with "
        "input_shapes={'x': (...)} (dlc-run: --input-shape x=...)"
    ]
    x = randn(2, 3, 5)
    np.testing.assert_array_equal(run(model, x, input_shapes={"x": (2, 3, 5)}), np.maximum(x, 0))


def test_file_name_locates_the_errors(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(make([node("Xyz", ["x"], ["y"])], {"x": (2,)}, {"y": None}), str(path))
    with pytest.raises(OnnxImportError) as info:
        dlc.compile_onnx(path)
    assert str(info.value) == f"{path}: error: node 'y' (Xyz): operator Xyz is not supported"
    assert info.value.filename == str(path) and info.value.problems == [
        "node 'y' (Xyz): operator Xyz is not supported"
    ]


def _one(op: str, inputs=("x",), inits=None, opset=17, outputs=("y",), shape=X4, **attrs):
    return make([node(op, list(inputs), list(outputs), **attrs)], shape, {"y": None}, inits, opset)


W = {"w": randn(2, 4, 3, 3)}
CASES = {
    "domain": (
        make(
            [helper.make_node("Relu", ["x"], ["y"], name="y", domain="com.microsoft")],
            X4,
            {"y": None},
        ),
        "node 'y' (Relu): operator domain 'com.microsoft' is not supported "
        "(map com.microsoft::Relu to a DLVM function with custom_ops=)",
    ),
    "attribute": (_one("Relu", foo=1), "node 'y' (Relu): attribute 'foo' is not supported"),
    "attribute value": (
        _one("Conv", ["x", "w"], W, auto_pad="BOGUS"),
        "node 'y' (Conv): auto_pad='BOGUS' is not supported",
    ),
    "missing input": (_one("Add", ["x", ""]), "node 'y' (Add): input 1 is missing"),
    "undefined input": (
        _one("Relu", ["z"]),
        "node 'y' (Relu): input 'z' is not defined before the node",
    ),
    "not constant": (
        make([node("Reshape", ["x", "s"], ["y"])], {**X4, "s": (2,)}, {"y": None}),
        "node 'y' (Reshape): shape (input 1) must be a constant",
    ),
    "axis": (_one("Softmax", axis=4), "node 'y' (Softmax): axis 4 is out of range for rank 4"),
    "legacy broadcast": (
        _one("Add", ["x", "b"], {"b": randn(3)}, opset=6, broadcast=1, axis=1),
        "node 'y' (Add): broadcast=1 cannot place [3] in [1, 4, 5, 5] at axis 1",
    ),
    "legacy broadcast axis": (
        _one("Mul", ["x", "b"], {"b": randn(5, 5)}, opset=6, broadcast=1, axis=3),
        "node 'y' (Mul): broadcast=1 cannot place [5, 5] in [1, 4, 5, 5] at axis 3",
    ),
    "legacy shapes": (
        _one("Sub", ["x", "b"], {"b": randn(5)}, opset=6),
        "node 'y' (Sub): shapes [1, 4, 5, 5] and [5] differ without broadcast=1",
    ),
    "lrn size": (
        _one("LRN", size=0),
        "node 'y' (LRN): size must be a positive integer, got 0",
    ),
    "lrn rank": (
        _one("LRN", shape={"x": (4, 5)}, size=3),
        "node 'y' (LRN): input (4, 5) needs rank ≥ 3",
    ),
    "instance norm rank": (
        _one(
            "InstanceNormalization",
            ["x", "s", "b"],
            {"s": randn(4), "b": randn(4)},
            shape={"x": (4, 5)},
        ),
        "node 'y' (InstanceNormalization): input (4, 5) needs rank ≥ 3",
    ),
    "reflect pad": (
        _one("Pad", ["x", "p"], {"p": np.array([0, 0, 5, 0, 0, 0, 0, 0])}, mode="reflect"),
        "node 'y' (Pad): reflect pads (5, 0) need at most 4 (size 5 - 1)",
    ),
    "constant of shape value": (
        _one(
            "ConstantOfShape",
            ["s"],
            {"s": np.array([300, 300])},
            value=onnx.numpy_helper.from_array(np.ones(2, np.float32)),
        ),
        "node 'y' (ConstantOfShape): value must have one element, got 2",
    ),
    "constant of shape negative": (
        make([node("ConstantOfShape", ["s"], ["y"])], {"s": (2,)}, {"y": None}),
        "node 'y' (ConstantOfShape): shape (input 0) must be a constant",
    ),
    "matmul batch": (
        make([node("MatMul", ["a", "b"], ["y"])], {"a": (2, 3, 4), "b": (3, 4, 5)}, {"y": None}),
        "node 'y' (MatMul): batch dimensions of (2, 3, 4) and (3, 4, 5) do not broadcast",
    ),
    "gemm rank": (
        _one("Gemm", ["x", "x"]),
        "node 'y' (Gemm): Gemm needs 2-D A and B, got [1, 4, 5, 5]",
    ),
    "strides": (
        _one("Conv", ["x", "w"], W, strides=[1]),
        "node 'y' (Conv): strides and dilations need 2 entries",
    ),
    "pads": (
        _one("Conv", ["x", "w"], W, pads=[1, 1]),
        "node 'y' (Conv): pads must be 4 non-negative integers",
    ),
    "conv rank": (
        _one("Conv", ["x", "w"], {"w": randn(2, 4)}),
        "node 'y' (Conv): input (1, 4, 5, 5) and weight (2, 4) need equal rank ≥ 3",
    ),
    "kernel_shape": (
        _one("Conv", ["x", "w"], W, kernel_shape=[2, 2]),
        "node 'y' (Conv): kernel_shape [2, 2] differs from the weight's [3, 3]",
    ),
    "groups": (
        _one("Conv", ["x", "w"], W, group=3),
        "node 'y' (Conv): convolve: 3 groups do not fit input channels 4 and kernel <2 x 4 x 3 x 3 x f32>",
    ),
    "group channels": (
        _one("Conv", ["x", "w"], {"w": randn(2, 1, 3, 3)}, group=3),
        "node 'y' (Conv): input channels 4 are not group=3 times 1",
    ),
    "pool rank": (
        _one("MaxPool", shape={"x": (4, 5)}, kernel_shape=[2]),
        "node 'y' (MaxPool): input (4, 5) needs rank ≥ 3",
    ),
    "pool indices": (
        _one("MaxPool", outputs=["y", "i"], kernel_shape=[17, 17], shape={"x": (1, 1, 20, 20)}),
        "node 'y' (MaxPool): the Indices output of windows over 256 elements",
    ),
    "pool kernel": (_one("AveragePool"), "node 'y' (AveragePool): kernel_shape needs 2 entries"),
    "lp pool p": (
        _one("LpPool", kernel_shape=[2, 2], p=0),
        "node 'y' (LpPool): p must be a positive number, got 0",
    ),
    "pool dilations same": (
        _one("MaxPool", kernel_shape=[2, 2], dilations=[2, 2], auto_pad="SAME_UPPER"),
        "node 'y' (MaxPool): auto_pad=SAME_UPPER with dilations is not supported",
    ),
    "storage_order": (
        _one("MaxPool", kernel_shape=[2, 2], storage_order=2),
        "node 'y' (MaxPool): storage_order=2 is not supported",
    ),
    "batch norm training": (
        make(
            [
                node(
                    "BatchNormalization",
                    ["x", "s", "s", "s", "s"],
                    ["y", "m", "v", "sm", "sv"],
                )
            ],
            {**X4, "s": (4,)},
            {"y": None},
            opset=9,
        ),
        "node 'y' (BatchNormalization): training outputs before opset 14 are not supported",
    ),
    "reshape missing": (_one("Reshape", ["x"]), "node 'y' (Reshape): the shape input is missing"),
    "reshape target": (
        _one("Reshape", ["x", "s"], {"s": np.array([-1, -1])}),
        "node 'y' (Reshape): shape [-1, -1] is not a valid target shape",
    ),
    "reshape size": (
        _one("Reshape", ["x", "s"], {"s": np.array([7, -1])}),
        "node 'y' (Reshape): cannot reshape [1, 4, 5, 5] to [7, -1]",
    ),
    "flatten axis": (
        _one("Flatten", axis=5),
        "node 'y' (Flatten): axis 5 is out of range for rank 4",
    ),
    "perm": (
        _one("Transpose", perm=[0, 0, 1, 2]),
        "node 'y' (Transpose): perm [0, 0, 1, 2] is not a permutation of 4 axes",
    ),
    "transpose rank": (
        _one("Transpose", shape={"x": (1,) * 7}),
        "node 'y' (Transpose): transposes of rank > 6 are not supported",
    ),
    "squeeze": (
        _one("Squeeze", ["x", "a"], {"a": np.array([1])}),
        "node 'y' (Squeeze): cannot squeeze axes [1] of [1, 4, 5, 5]",
    ),
    "dropout training": (
        _one("Dropout", ["x", "", "t"], {"t": np.array(True)}),
        "node 'y' (Dropout): training_mode=true without a seed draws random numbers",
    ),
    "dropout is_test": (
        _one("Dropout", opset=6),
        "node 'y' (Dropout): is_test=0 (training) is not supported",
    ),
    "constant dtype": (
        _one("Add", ["x", "c"], {"c": np.ones(5, np.complex64)}),
        "node 'y' (Add): constants of type complex64 are not supported",
    ),
    "constant attributes": (
        make([helper.make_node("Constant", [], ["y"], name="y")], {}, {"y": None}),
        "node 'y' (Constant): needs exactly one value attribute",
    ),
    "constant string": (
        _one("Constant", [], value_string="a"),
        "node 'y' (Constant): attribute 'value_string' is not supported",
    ),
    "malformed": (
        _one("Reshape", ["x", "s"], {"s": np.array(["a"])}),
        "node 'y' (Reshape): malformed node: ValueError: invalid literal for int() with base 10: 'a'",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_node_errors(case):
    model, message = CASES[case]
    assert _errors(model) == [f"<model>: error: {message}"]


@pytest.mark.parametrize(
    ("inputs", "outputs", "shapes", "message"),
    [
        (
            {"x": (2,)},
            {"y": None},
            {"z": (2,)},
            "input_shapes names 'z', which is not a graph input",
        ),
        (
            {"x": (2,)},
            {"y": None},
            {"x": (3,)},
            "input 'x': input_shapes gives (3,), the model declares (2)",
        ),
        (
            {"x": ("n",)},
            {"y": None},
            {"x": (2**41,)},
            "input 'x': tensor type <2199023255552 x f32> has more than 2^40 elements",
        ),
        (
            {"x": (2,)},
            {"y": (3,)},
            None,
            "output 'y': dlc computes <2 x f32>, the model declares (3)",
        ),
        ({"x": (2,)}, {"y": None, "z": None}, None, "output 'z' is not computed by any node"),
    ],
)
def test_graph_errors(inputs, outputs, shapes, message):
    model = make([node("Relu", ["x"], ["y"])], inputs, outputs)
    assert _errors(model, input_shapes=shapes) == [f"<model>: error: {message}"]


def test_input_element_type():
    model = make(
        [node("Relu", ["x"], ["y"])], {"x": (2,)}, {"y": None}, dtype=onnx.TensorProto.COMPLEX64
    )
    message = (
        "<model>: error: input 'x': element type COMPLEX64 is not supported "
        "(f16, bf16, f32, f64, i8-i64, u8-u64, bool)"
    )
    assert _errors(model) == [message]  # and nothing about the nodes that read it


def test_output_element_type():
    model = make([node("Relu", ["x"], ["y"])], {"x": (2,)}, {"y": (2,)})
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.INT64
    assert _errors(model) == [
        "<model>: error: output 'y': dlc computes <2 x f32>, the model declares INT64"
    ]


def test_no_default_opset():
    model = make([node("Relu", ["x"], ["y"])], {"x": (2,)}, {"y": None})
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    assert _errors(model) == ["<model>: error: the model imports no default-domain (ai.onnx) opset"]


def test_reading_errors(tmp_path, monkeypatch):
    with pytest.raises(dlc.DiagnosticError, match=r"cannot read '.*nothere.onnx': No such file"):
        dlc.onnx.load(tmp_path / "nothere.onnx")
    with pytest.raises(dlc.DiagnosticError, match=r"^x.onnx: error: not an ONNX model: "):
        dlc.onnx.load(b"\xff\xff", filename="x.onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(
        dlc.DiagnosticError, match=r"needs the onnx package: pip install 'dlc\[onnx\]'"
    ):
        dlc.onnx.load("model.onnx")
