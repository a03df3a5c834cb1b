"""ONNX Pad's wrap mode and computed pads, Slice with any step, empty (size-0)
results of Slice and Split, and ops on empty tensors, compiled by dlc and
interpreted, against onnx's reference implementation."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx_models import check_reference, typed_model

import dlc
import dlc.onnx
import dlc.onnx.backend as backend
from dlc.onnx import OnnxImportError

F32 = TensorProto.FLOAT
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("pads", [[0, 1, 2, 0, 2, 1], [1, 4, 9, 1, 0, 5]])
def test_pad_wrap_repeats_rows_periodically(pads):
    """Pads longer than the dimension wrap around more than once (as np.pad)."""
    model = typed_model(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
        {"x": ((2, 3, 4), F32)},
        {"pads": np.array(pads, np.int64)},
    )
    check_reference(model, X)


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ([0, 3], [3, 0], [1, 2], [2, -3]),  # strided both ways
        ([-1], [-100], [2], [-2]),
        ([10], [20], [1], [1]),  # starts beyond the end: empty
        ([2, 0], [2, 1], [2, 0], [1, 1]),  # an empty range
    ],
)
def test_slice_steps_and_empty_results(starts, ends, axes, steps):
    constants = {
        "s": np.array(starts, np.int64), "e": np.array(ends, np.int64),
        "a": np.array(axes, np.int64), "t": np.array(steps, np.int64),
    }  # fmt: skip
    model = typed_model(
        [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
        {"x": ((2, 3, 4), F32)},
        constants,
    )
    check_reference(model, X)


def test_split_into_parts_of_size_zero_and_an_empty_concat_operand():
    model = typed_model(
        [
            helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], axis=2),
            helper.make_node("Concat", ["b", "c"], ["y"], axis=2),
        ],
        {"x": ((2, 3, 4), F32)},
        {"sizes": np.array([0, 4, 0], np.int64)},
        outputs=["a", "y"],
    )
    check_reference(model, X)


def test_ops_on_empty_inputs():
    """Element-wise ops, products, reductions and convolutions of tensors with a
    dimension of size 0 (the graph dialect has empty tensors)."""
    model = typed_model(
        [
            helper.make_node("MatMul", ["a", "b"], ["p"]),
            helper.make_node("ReduceSum", ["a", "axis"], ["s"], keepdims=0),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Conv", ["c", "w"], ["v"]),
        ],
        {"a": ((2, 0), F32), "b": ((0, 3), F32), "c": ((0, 2, 4, 4), F32)},
        {"axis": np.array([1], np.int64), "w": np.ones((3, 2, 3, 3), np.float32)},
        outputs=["p", "s", "r", "v"],
    )
    empty = np.zeros((0, 2, 4, 4), np.float32)
    check_reference(model, np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32), empty)


def _center_crop_pad(shape_is_input: bool) -> onnx.ModelProto:
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[0, 2])
    shape = np.array([1, 7], np.int64)
    if shape_is_input:
        return typed_model([node], {"x": ((2, 3, 4), F32), "shape": ((2,), TensorProto.INT64)})
    return typed_model([node], {"x": ((2, 3, 4), F32)}, {"shape": shape})


def test_center_crop_pad_folds_its_pads_from_a_constant_shape():
    check_reference(_center_crop_pad(shape_is_input=False), X)


def test_pads_computed_from_a_graph_input_name_it_as_wanted():
    """Pads computed from an integer graph input (CenterCropPad's target shape) fold
    once that input is a constant: the import error names it, and the backend
    compiles the model for its value."""
    model = _center_crop_pad(shape_is_input=True)
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(model)
    assert err.value.wanted_constants == ["shape"]
    assert "pads (input 1) must be a constant" in err.value.problems[0]
    shape = np.array([1, 7], np.int64)
    (y,) = backend.prepare(model).run([X, shape])
    (expected,) = ReferenceEvaluator(model).run(None, {"x": X, "shape": shape})
    np.testing.assert_array_equal(y, expected)


def test_wrap_pad_of_an_empty_dimension_is_refused():
    model = typed_model(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
        {"x": ((0, 3), F32)},
        {"pads": np.array([1, 0, 0, 0], np.int64)},
    )
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(model)
    assert err.value.problems == ["node #0 (Pad): wrap pads of an empty dimension are not defined"]


def test_tf_same_padding_computed_from_shapes_folds():
    """timm's TF-"same" padding as the TorchScript exporter writes it: the pads of a
    stride-2 3x3 convolution from the input's shape (Shape, Gather, Cast, Div, Ceil,
    Sub, Mul, Add, Clip for max(p, 0), Cast, Unsqueeze, Concat), all known at import."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    c = {
        "axis": np.array(2, np.int64), "one": np.array(1, np.int64), "two": np.array(2, np.int64),
        "stride": np.array(2.0, np.float32), "k": np.array(3, np.int64),
        "zero": np.array(0, np.int64), "ax0": np.array([0], np.int64),
        "zeros": np.zeros(2, np.int64),
    }  # fmt: skip
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]), n("Gather", ["s", "axis"], ["h"], axis=0),
        n("Cast", ["h"], ["hf"], to=f), n("Div", ["hf", "stride"], ["q"]), n("Ceil", ["q"], ["cq"]),
        n("Cast", ["cq"], ["ci"], to=i64), n("Sub", ["ci", "one"], ["c1"]),
        n("Mul", ["c1", "two"], ["m"]), n("Add", ["m", "k"], ["t"]), n("Sub", ["t", "h"], ["p"]),
        n("Clip", ["p", "zero"], ["pc"]), n("Div", ["pc", "two"], ["lo"]),
        n("Sub", ["pc", "lo"], ["hi"]),
        n("Unsqueeze", ["lo", "ax0"], ["lo1"]), n("Unsqueeze", ["hi", "ax0"], ["hi1"]),
        n("Concat", ["zeros", "lo1", "lo1", "zeros", "hi1", "hi1"], ["pads_raw"], axis=0),
        n("Slice", ["pads_raw", "start", "end"], ["pads"]),
        n("Pad", ["x", "pads"], ["y"]),
    ]  # fmt: skip
    c |= {"start": np.array([0], np.int64), "end": np.array([8], np.int64)}
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", f, (1, 2, 15, 16))],
        [helper.make_tensor_value_info("y", f, None)],
        [onnx.numpy_helper.from_array(v, k) for k, v in c.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((1, 2, 15, 16)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert want.shape == (1, 2, 17, 18)
    np.testing.assert_array_equal(dlc.compile_onnx(model).g(x), want)
