"""Real models through dlc: onnx's light CNNs and its PyTorch model tests through
`onnx.backend.test.BackendTest`, and small random-weight networks built of the same
operators against onnxruntime (relative error 1e-4).

Kept in the suite: the light models whose compile takes a few seconds (AlexNet,
ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512; the light models' weights are
`ConstantOfShape` fills, so compile and run are quick) and every PyTorch model test.
DenseNet-121 and Inception v1/v2 (about 15 s each) and the light models with random
weights against onnxruntime (minutes: dense weights) run with
`tools/onnx_model_tests.py`."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import unittest
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.backend.test import BackendTest
from onnx_models import make, node, randn

import dlc
import dlc.onnx.backend as backend

LIGHT_IN_SUITE = ["bvlc_alexnet", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512"]
LIGHT_IN_TOOL = ["densenet121", "inception_v1", "inception_v2"]
REFUSED: dict[str, str] = {}
"""PyTorch model tests dlc refuses, with the reason its error gives."""

if "ONNX_HOME" not in os.environ:  # BackendTest writes the light models' inputs there
    os.environ["ONNX_HOME"] = tempfile.mkdtemp(prefix="dlc-test-onnx-home-")
    atexit.register(shutil.rmtree, os.environ["ONNX_HOME"], ignore_errors=True)


def _model_test_cases() -> dict[str, type[unittest.TestCase]]:
    """BackendTest's real-model and PyTorch classes, without the refused tests and the
    light models of the tool."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = BackendTest(backend, __name__)
    runner.include(r"^test_(" + "|".join(LIGHT_IN_SUITE) + r")_cpu$")
    runner.include(
        r"^test_(operator_\w+|[A-Z]\w+|(log_)?softmax_(functional_dim3|dim3|lastdim))_cpu$"
    )
    kept = {}
    for kind in ("Real", "PyTorchConverted", "PyTorchOperator"):
        case = runner.test_cases[f"OnnxBackend{kind}ModelTest"]
        for name in list(vars(case)):
            method = getattr(case, name)
            skipped = getattr(method, "__unittest_skip__", False)
            base = name[: -len("_cpu")]
            if name.startswith("test_") and (skipped or base in REFUSED):
                delattr(case, name)
        kept[case.__name__] = case
    return kept


globals().update(_model_test_cases())


def test_the_model_tests_are_all_there():
    """Every light model of the suite runs, and no PyTorch test is lost to a rename."""
    real = globals()["OnnxBackendRealModelTest"]
    assert sorted(n for n in vars(real) if n.startswith("test_")) == sorted(
        f"test_{n}_cpu" for n in LIGHT_IN_SUITE
    )
    converted = globals()["OnnxBackendPyTorchConvertedModelTest"]
    operator = globals()["OnnxBackendPyTorchOperatorModelTest"]
    count = sum(n.startswith("test_") for c in (converted, operator) for n in vars(c))
    assert count + len(REFUSED) == 82 + 35  # the data sets of onnx 1.15 to 1.23


# ---- small random-weight networks against onnxruntime ---------------------------------

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _ort(model: onnx.ModelProto, *args: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort  # the test extra's

    model.ir_version = min(model.ir_version, 8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])  # fmt: skip
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, args, strict=True)))


def _dlc(model: onnx.ModelProto, *args: np.ndarray) -> list[np.ndarray]:
    return list(backend.prepare(model).run(list(args)))


def _compare(model: onnx.ModelProto, *args: np.ndarray) -> None:
    want = _ort(model, *args)
    got = _dlc(model, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, **TOL)


def _he(*shape: int, seed: int) -> np.ndarray:
    return randn(*shape, seed=seed) * np.float32(np.sqrt(2.0 / np.prod(shape[1:])))


def test_alexnet_like_lrn_grouped_conv_pools_dropout_gemm_opset9():
    w = {
        "k1": _he(8, 3, 5, 5, seed=1), "b1": randn(8, seed=2) * 0.1,
        "k2": _he(8, 4, 3, 3, seed=3), "b2": randn(8, seed=4) * 0.1,
        "fc": _he(10, 72, seed=5), "fb": randn(10, seed=6) * 0.1,
    }  # fmt: skip
    nodes = [
        node("Conv", ["x", "k1", "b1"], ["c1"], strides=[2, 2], pads=[2, 2, 2, 2]),
        node("Relu", ["c1"], ["r1"]),
        node("LRN", ["r1"], ["n1"], size=5, alpha=1e-3, beta=0.75, bias=2.0),
        node("MaxPool", ["n1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]),
        node("Conv", ["p1", "k2", "b2"], ["c2"], group=2, pads=[1, 1, 1, 1]),
        node("LRN", ["c2"], ["n2"], size=3),
        node(
            "AveragePool",
            ["n2"],
            ["p2"],
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            count_include_pad=1,
        ),  # fmt: skip
        node("Dropout", ["p2"], ["d", "mask"], ratio=0.5),
        node("Flatten", ["d"], ["f"]),
        node("Gemm", ["f", "fc", "fb"], ["logits"], transB=1),
        node("Softmax", ["logits"], ["y"]),
    ]
    model = make(nodes, {"x": (1, 3, 23, 23)}, {"y": None, "mask": None}, w, opset=9)
    x = randn(1, 3, 23, 23, seed=9)
    want = _ort(model, x)
    y, mask = _dlc(model, x)
    np.testing.assert_allclose(y, want[0], **TOL)
    assert mask.dtype == np.float32 and np.all(mask == 1) and mask.shape == want[1].shape


@pytest.mark.parametrize(
    ("attrs", "shape"),
    [
        ({"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [2, 2], "ceil_mode": 1}, (2, 3, 12, 11)),
        ({"kernel_shape": [2], "dilations": [4]}, (1, 2, 9)),
    ],
)  # fmt: skip
def test_dilated_max_pool(attrs: dict, shape: tuple[int, ...]):
    model = make([node("MaxPool", ["x"], ["y"], **attrs)], {"x": shape}, {"y": None}, opset=12)
    _compare(model, randn(*shape))


def test_resnet_block_batchnorm_sum_ceil_pool():
    w = {"k1": _he(4, 4, 3, 3, seed=1), "k2": _he(4, 4, 3, 3, seed=2)}
    for i in (1, 2):
        w |= {f"s{i}": randn(4, seed=10 + i) * 0.2 + 1, f"bb{i}": randn(4, seed=20 + i) * 0.1}
        w |= {f"m{i}": randn(4, seed=30 + i) * 0.1, f"v{i}": np.abs(randn(4, seed=40 + i)) + 0.5}
    nodes = [
        node("Conv", ["x", "k1"], ["c1"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c1", "s1", "bb1", "m1", "v1"], ["n1"], epsilon=1e-5),
        node("Relu", ["n1"], ["r1"]),
        node("Conv", ["r1", "k2"], ["c2"], auto_pad="SAME_UPPER"),
        node("BatchNormalization", ["c2", "s2", "bb2", "m2", "v2"], ["n2"]),
        node("Sum", ["n2", "x", "r1"], ["s"]),
        node("Relu", ["s"], ["r"]),
        node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        node("GlobalAveragePool", ["p"], ["y"]),
    ]
    _compare(make(nodes, {"x": (2, 4, 10, 10)}, {"y": None}, w, opset=13), randn(2, 4, 10, 10))


def test_shufflenet_unit_channel_shuffle_depthwise_concat():
    w = {"g": _he(8, 2, 1, 1, seed=1), "dw": _he(8, 1, 3, 3, seed=2), "g2": _he(4, 2, 1, 1, seed=3)}
    shuffle = {"to5": np.array([1, 2, 4, 5, 5]), "to4": np.array([1, 8, 5, 5])}
    nodes = [
        node("Conv", ["x", "g"], ["c1"], group=4),
        node("Relu", ["c1"], ["r1"]),
        node("Reshape", ["r1", "to5"], ["s5"]),
        node("Transpose", ["s5"], ["t5"], perm=[0, 2, 1, 3, 4]),
        node("Reshape", ["t5", "to4"], ["sh"]),
        node("Conv", ["sh", "dw"], ["d"], group=8, pads=[1, 1, 1, 1], strides=[1, 1]),
        node("Conv", ["d", "g2"], ["c2"], group=4),
        node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        node("Concat", ["c2", "a"], ["y"], axis=1),
    ]
    model = make(nodes, {"x": (1, 8, 5, 5)}, {"y": None}, w | shuffle, opset=9)
    _compare(model, randn(1, 8, 5, 5))


def test_densenet_batchnorm_as_unsqueezed_mul_add_concat():
    w = {"scale": randn(6, seed=1) * 0.2 + 1, "shift": randn(6, seed=2) * 0.1}
    w |= {"k": _he(3, 6, 1, 1, seed=3)}
    nodes = [
        node("Unsqueeze", ["scale"], ["su"], axes=[1, 2]),
        node("Unsqueeze", ["shift"], ["hu"], axes=[1, 2]),
        node("Mul", ["x", "su"], ["m"]),
        node("Add", ["m", "hu"], ["a"]),
        node("Relu", ["a"], ["r"]),
        node("Conv", ["r", "k"], ["c"]),
        node("Concat", ["x", "c"], ["cat"], axis=1),
        node("AveragePool", ["cat"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    _compare(make(nodes, {"x": (1, 6, 6, 6)}, {"y": None}, w, opset=9), randn(1, 6, 6, 6))


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_of_4d_input_by_opset(opset: int):
    """Before opset 13 Softmax normalizes the input coerced to 2-D at `axis`."""
    model = make([node("Softmax", ["x"], ["y"], axis=1)], {"x": (2, 3, 4, 5)}, {"y": None}, opset=opset)  # fmt: skip
    _compare(model, randn(2, 3, 4, 5))


def test_instance_norm_reflect_and_edge_pads():
    nodes = [
        node("InstanceNormalization", ["x", "s", "b"], ["n"], epsilon=1e-3),
        node("Pad", ["n"], ["p"], mode="reflect", pads=[0, 0, 2, 1, 0, 0, 1, 3]),
        node("Pad", ["p"], ["y"], mode="edge", pads=[0, 0, 1, 0, 0, 0, 0, 2]),
    ]
    w = {"s": randn(3, seed=1), "b": randn(3, seed=2)}
    _compare(make(nodes, {"x": (2, 3, 4, 5)}, {"y": None}, w, opset=10), randn(2, 3, 4, 5))


def test_opset6_broadcast_and_channel_prelu():
    """Opset < 7 (onnxruntime has no kernels for it): B placed at `axis`, PRelu's 1-D
    slope per channel."""
    nodes = [
        node("Add", ["x", "c"], ["a"], broadcast=1, axis=1),
        node("Mul", ["a", "r"], ["m"], broadcast=1),
        node("PRelu", ["m", "slope"], ["y"]),
    ]
    w = {"c": randn(3, seed=1), "r": randn(4, 5, seed=2), "slope": randn(3, seed=3)}
    x = randn(2, 3, 4, 5)
    m = (x + w["c"].reshape(1, 3, 1, 1)) * w["r"]
    want = np.where(m < 0, m * w["slope"].reshape(1, 3, 1, 1), m)
    got = _dlc(make(nodes, {"x": (2, 3, 4, 5)}, {"y": None}, w, opset=6), x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_constant_of_shape_large_fill_stays_one_scalar():
    nodes = [
        node(
            "ConstantOfShape",
            ["shape"],
            ["w"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.25]),
        ),  # fmt: skip
        node("MatMul", ["x", "w"], ["y"]),
    ]
    model = make(nodes, {"x": (2, 512)}, {"y": None}, {"shape": np.array([512, 512])})
    assert "literal 0.25: <512 x 512 x f32>" in dlc.print_module(dlc.onnx.load(model))
    x = randn(2, 512)
    np.testing.assert_allclose(_dlc(model, x)[0], x @ np.full((512, 512), 0.25), rtol=1e-5)


def test_numeric_onnx_names_become_valid_value_names():
    """torch.onnx names values `0`, `1`, ...; xDSL reads `_5` as name "" + suffix."""
    nodes = [node("Relu", ["0"], ["5"]), node("Reshape", ["5", "s"], ["_7"])]
    model = make(nodes, {"0": (2, 6)}, {"_7": None}, {"s": np.array([3, 4])})
    x = randn(2, 6)
    np.testing.assert_array_equal(_dlc(model, x)[0], np.maximum(x, 0).reshape(3, 4))
