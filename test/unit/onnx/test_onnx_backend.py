"""dlc as an ONNX backend: a fixed subset of ONNX's own node tests through
`onnx.backend.test.BackendTest`, the `Backend` API, and clean refusals.

The whole node-test suite runs with `tools/onnx_node_tests.py` (a few minutes); the
subset here covers each family of ops the importer maps, in a few seconds."""

from __future__ import annotations

import functools
import sys
import unittest
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.backend.test import BackendTest
from onnx_models import make, node, randn

import dlc.onnx.backend as backend
from dlc.onnx import OnnxImportError

NODE_TESTS = [
    "test_abs", "test_add_bcast", "test_relu", "test_softmax_axis_1",
    "test_logsoftmax_axis_1", "test_conv_with_strides_padding", "test_maxpool_2d_pads",
    "test_averagepool_2d_default", "test_gemm_default_single_elem_vector_bias",
    "test_matmul_3d", "test_reshape_negative_dim", "test_slice",
    "test_split_equal_parts_1d_opset18", "test_expand_dim_changed",
    "test_reduce_l2_keep_dims_example", "test_where_example", "test_cast_FLOAT_to_DOUBLE",
    "test_cast_FLOAT_to_FLOAT16", "test_elu", "test_gelu_tanh_1", "test_batchnorm_example",
    "test_transpose_all_permutations_3", "test_concat_3d_axis_negative_1", "test_tile",
    "test_greater_equal_bcast", "test_not_2d", "test_isnan", "test_clip_default_inbounds",
    "test_hardswish_expanded", "test_shape_start_1", "test_size",
    "test_softmax_example_expanded", "test_unsqueeze_negative_axes",
    "test_flatten_negative_axis1", "test_prelu_broadcast", "test_asinh",
    "test_reduce_log_sum_exp_default_axes_keepdims_example", "test_mean_example",
    "test_and2d", "test_attention_4d_expanded", "test_gather_0",
    "test_gather_elements_negative_indices", "test_argmax_keepdims_random_select_last_index",
    "test_tril_neg", "test_layer_normalization_4d_axis1", "test_xor_bcast4v4d",
    "test_rms_normalization_3d_axis1_epsilon", "test_nllloss_NCd1_weight",
    "test_mod_mixed_sign_int32", "test_hardmax_axis_1", "test_lpnormalization_default",
    "test_cast_FLOAT16_to_FLOAT", "test_gathernd_example_int32_batch_dim1",
    "test_scatter_elements_with_duplicate_indices", "test_scatternd_max", "test_scatter_with_axis",
    "test_gridsample_reflection_padding", "test_gridsample_volumetric_nearest_align_corners_1",
    "test_roialign_aligned_true", "test_dft_irfft", "test_stft", "test_hannwindow",
    "test_convtranspose_group_2", "test_lppool_2d_dilations", "test_averagepool_2d_dilations",
    "test_einsum_batch_diagonal", "test_top_k_same_values_largest", "test_onehot_negative_indices",
    "test_eyelike_with_dtype", "test_col2im_pads", "test_maxunpool_export_with_output_shape",
    "test_det_nd",
    "test_if", "test_loop11", "test_scan9_sum", "test_scan_sum", "test_lstm_with_peepholes",
    "test_gru_seq_length", "test_range_float_type_positive_delta", "test_reversesequence_batch",
    "test_quantizelinear_blocked_asymmetric", "test_dequantizelinear_axis",
    "test_qlinearmatmul_3D_int8_float16", "test_convinteger_with_padding",
    "test_dynamicquantizelinear", "test_center_crop_pad_crop_and_pad", "test_wrap_pad",
    "test_slice_neg_steps", "test_split_zero_size_splits_opset18",
    "test_training_dropout_mask", "test_batchnorm_example_training_mode",
    "test_maxpool_with_argmax_2d_precomputed_strides", "test_tfidfvectorizer_tf_uniandbigrams_skip5",
]  # fmt: skip


@functools.cache
def _node_test_case() -> type[unittest.TestCase]:
    """BackendTest's node-test class with only the NODE_TESTS methods. Built when a
    node test first runs, not at import: BackendTest generates all of ONNX's node
    tests (20 s of NumPy), and every pytest-xdist worker imports every test file to
    collect it, while only one runs this file."""
    with warnings.catch_warnings():  # onnx's generators overflow on purpose
        warnings.simplefilter("ignore")
        runner = BackendTest(backend, __name__)
    runner.include("^(" + "|".join(NODE_TESTS) + ")_cpu$")
    case = runner.test_cases["OnnxBackendNodeModelTest"]
    for name in list(vars(case)):
        if name.startswith("test_") and getattr(getattr(case, name), "__unittest_skip__", False):
            delattr(case, name)
    return case


def test_subset_is_complete():
    """Every listed node test exists in this onnx (a renamed one would be skipped)."""
    runner = _node_test_case()
    assert sorted(n for n in vars(runner) if n.startswith("test_")) == sorted(
        f"{n}_cpu" for n in NODE_TESTS
    )


@pytest.mark.parametrize("name", NODE_TESTS)
def test_onnx_node_test(name: str) -> None:
    """ONNX's node test `name` through dlc's backend (unittest's own setUp, test and
    tearDown; its failures and skips are pytest's)."""
    _node_test_case()(f"{name}_cpu").debug()


def test_prepare_and_run_by_position_and_name():
    model = make([node("Add", ["a", "b"], ["y"]), node("Neg", ["a"], ["z"])], {"a": (2, 3), "b": (3,)}, {"y": None, "z": None})  # fmt: skip
    a, b = randn(2, 3), randn(3, seed=1)
    rep = backend.prepare(model, "CPU")
    y, z = rep.run([a, b])
    np.testing.assert_allclose(y, a + b)
    np.testing.assert_array_equal(rep.run({"a": a, "b": b})["z"], -a)


def test_dynamic_shapes_compile_per_input_shape():
    model = make([node("Relu", ["x"], ["y"])], {"x": ("n", 3)}, {"y": None})
    rep = backend.prepare(model)
    for n in (1, 4):
        x = randn(n, 3)
        np.testing.assert_array_equal(rep.run([x])[0], np.maximum(x, 0))


def test_shape_input_is_specialized_per_value():
    model = make([node("Reshape", ["x", "shape"], ["y"])], {"x": (2, 6)}, {"y": None})
    model.graph.input.append(helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, [2]))
    rep = backend.prepare(model)
    x = randn(2, 6)
    for shape in ([3, 4], [-1, 2]):
        y = rep.run([x, np.array(shape, np.int64)])[0]
        np.testing.assert_array_equal(y, x.reshape(shape))
    assert rep.specialized == ["shape"]


def test_run_node():
    a, b = randn(2, 3), randn(2, 3, seed=1)
    (y,) = backend.run_node(helper.make_node("Max", ["a", "b"], ["y"]), [a, b])
    np.testing.assert_array_equal(y, np.maximum(a, b))


def test_supports_device():
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    assert not backend.supports_device("TPU")


def test_refuses_unsupported_model_naming_the_node():
    model = make([node("Xyz", ["x"], ["y"])], {"x": (2, 3)}, {"y": None})
    with pytest.raises(OnnxImportError) as info:
        backend.prepare(model, "CPU")
    assert info.value.problems == ["node 'y' (Xyz): operator Xyz is not supported"]


def test_refuses_complex_input_and_other_devices():
    model = make([node("Relu", ["x"], ["y"])], {"x": (2,)}, {"y": None}, dtype=onnx.TensorProto.COMPLEX64)  # fmt: skip
    with pytest.raises(OnnxImportError, match="element type COMPLEX64 is not supported"):
        backend.prepare(model)
    with pytest.raises(ValueError, match="dlc runs on the CPU only, not on 'CUDA'"):
        backend.prepare(model, "CUDA")


def test_prepare_checks_options():
    model = make([node("Relu", ["x"], ["y"])], {"x": (2,)}, {"y": None})
    with pytest.raises(ValueError, match="opt_level must be in 0..3, got 7"):
        backend.prepare(model, opt_level=7)
    with pytest.raises(TypeError, match="opt_level must be an int in 0..3, got str"):
        backend.prepare(model, opt_level="2")
    with pytest.raises(TypeError, match="prepare: expected an onnx.ModelProto, got str"):
        backend.prepare("model.onnx")
    rep = backend.prepare(model, opt_level=0, rtol=1e-3)  # BackendTest's own keywords pass
    np.testing.assert_array_equal(rep.run([np.array([-1, 2], np.float32)])[0], [0, 2])


def test_run_checks_the_input_count():
    rep = backend.prepare(make([node("Relu", ["x"], ["y"])], {"x": (2,)}, {"y": None}))
    with pytest.raises(ValueError, match="run: the model has 1 inputs, got 2"):
        rep.run([randn(2), randn(2)])
    with pytest.raises(ValueError, match="run: input 'x' is not given"):
        rep.run({"z": randn(2)})


# ---- tools/onnx_node_tests.py ----------------------------------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
import onnx_node_tests as tool  # noqa: E402


def test_tool_scope_and_classes():
    f8 = make([node("Cast", ["x"], ["y"], to=onnx.TensorProto.FLOAT8E4M3FN)], {"x": (2,)}, {})
    assert tool.out_of_scope(f8) == "float8"
    relu = make([node("Relu", ["x"], ["y"])], {"x": (2,)}, {"y": None})
    assert tool.out_of_scope(relu) is None
    nonzero = make([node("NonZero", ["x"], ["y"])], {"x": (2,)}, {"y": None})
    assert tool.out_of_scope(nonzero) == "output shape depends on input values"
    assert tool.out_of_scope(nonzero, strict=True) is None
    case = _Case(relu, [([np.array([-1.0, 2.0], np.float32)], [np.array([0.0, 2.0], np.float32)])])
    assert tool.run_case(case)["class"] == "passed"
    case.data_sets[0][1][0] = np.array([0.0, 3.0], np.float32)
    assert tool.run_case(case)["class"] == "failed"
    det = make([node("Xyz", ["x"], ["y"])], {"x": (2,)}, {"y": None})
    assert tool.run_case(_Case(det, [([randn(2)], [randn(2)])])) == {
        "class": "unsupported",
        "reason": "node 'y' (Xyz): operator Xyz is not supported",
    }
    assert tool.unsupported_op("node 'y' (Xyz): operator Xyz is not supported") == "Xyz"


class _Case:
    def __init__(self, model: onnx.ModelProto, data_sets: list) -> None:
        self.model, self.data_sets, self.rtol, self.atol = model, data_sets, 1e-3, 1e-7
