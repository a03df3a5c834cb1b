"""ONNX Det by the Leibniz formula (up to 4 × 4), compiled by dlc and interpreted,
against NumPy's LU-based `det`; the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx_models import interpret, make, node, run

import dlc.onnx
from dlc.onnx import OnnxImportError
from dlc.onnx.ops_det import permutation_table


def test_permutation_signs():
    positions, signs = permutation_table(3)
    assert positions.shape == (6, 3) and sorted(signs) == [-1, -1, -1, 1, 1, 1]
    eye = np.eye(3).reshape(-1)
    assert (signs * eye[positions].prod(axis=1)).sum() == 1


@pytest.mark.parametrize("shape", [(2, 2), (3, 1, 1), (2, 2, 4, 4)])
def test_det_matches_numpy(shape):
    x = np.random.default_rng(1).standard_normal(shape)
    model = make([node("Det", ["x"], ["y"])], {"x": shape}, {"y": None}, dtype=TensorProto.DOUBLE)
    np.testing.assert_allclose(run(model, x), np.linalg.det(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(interpret(model, x), np.linalg.det(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((2, 3), "the input (2, 3) must hold square matrices"),
        ((5, 5), "5 × 5 matrices are not supported (the Leibniz formula is used up to 4 × 4; "
                 "dlc builds no LU decomposition)"),
    ],
)  # fmt: skip
def test_det_refusals(shape, message):
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(make([node("Det", ["x"], ["y"])], {"x": shape}, {"y": None}))
    assert info.value.problems == [f"node 'y' (Det): {message}"]
