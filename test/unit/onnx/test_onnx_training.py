"""ONNX training-mode forms: Dropout with a seed, BatchNormalization's running
statistics, MaxPool's Indices output, and the refusal of random generators, compiled
by dlc and interpreted, against onnx's reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_models import check_reference, typed_model

import dlc
import dlc.onnx
from dlc.onnx import OnnxImportError

F32 = TensorProto.FLOAT


X = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize("ratio_is_input", [False, True])
def test_dropout_training_with_a_seed_draws_the_references_mask(ratio_is_input):
    """The mask is RandomState(seed)'s, as in onnx's reference; dropped negative
    elements are -0.0 (x · 0)."""
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=3)
    inputs = {"x": ((3, 4, 5), F32)}
    constants = {"t": np.array(True)}
    ratio = np.array(0.3, np.float32)
    if ratio_is_input:
        inputs["r"] = ((), F32)
        check_reference(typed_model([node], inputs, constants), X, ratio)
    else:
        check_reference(typed_model([node], inputs, {**constants, "r": ratio}), X)


def test_dropout_training_with_ratio_zero_is_the_identity():
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    constants = {"r": np.array(0.0, np.float32), "t": np.array(True)}
    check_reference(typed_model([node], {"x": ((3, 4, 5), F32)}, constants), X)


def test_batch_norm_training_outputs_the_running_statistics():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    params = [rng.uniform(0.5, 1.5, 3).astype(np.float32) for _ in range(4)]
    node = helper.make_node(
        "BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
        training_mode=1, momentum=0.8, epsilon=1e-3,
    )  # fmt: skip
    inputs = {"x": ((2, 3, 4, 5), F32), **{n: ((3,), F32) for n in "sbmv"}}
    check_reference(typed_model([node], inputs, opset=15), x, *params, rtol=2e-6)


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
        {"kernel_shape": [2, 3], "strides": [2, 1], "ceil_mode": 1, "storage_order": 1},
        {"kernel_shape": [2, 2], "dilations": [2, 1], "pads": [0, 1, 1, 0]},
    ],
)
def test_max_pool_indices(attrs):
    """Flat indices into the whole input; among equal maxima the first wins."""
    x = np.random.default_rng(2).integers(0, 4, (2, 3, 6, 7)).astype(np.float32)
    x[0, 0, :2, :2] = -np.inf  # a window of -inf picks its first element, not the padding
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    check_reference(typed_model([node], {"x": ((2, 3, 6, 7), F32)}, opset=12), x)


def test_max_pool_indices_1d():
    x = np.random.default_rng(3).standard_normal((1, 2, 9)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3], strides=[2])
    check_reference(typed_model([node], {"x": ((1, 2, 9), F32)}, opset=12), x)


@pytest.mark.parametrize("op", ["RandomUniformLike", "RandomNormalLike", "Bernoulli"])
def test_random_generators_are_refused(op):
    model = typed_model(
        [helper.make_node(op, ["x"], ["y"], seed=1.0)], {"x": ((4,), F32)}, opset=15
    )
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(model)
    assert err.value.problems == [
        f"node #0 ({op}): random values are not supported (onnx's tests compare NumPy's draws)"
    ]


def test_dropout_masks_beyond_the_import_limit_are_refused():
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=0)
    constants = {"r": np.array(0.5, np.float32), "t": np.array(True)}
    model = typed_model([node], {"x": ((1025, 1024), F32)}, constants)
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(model)
    assert err.value.problems == [
        "node #0 (Dropout): a training mask of more than 1048576 elements"
    ]
