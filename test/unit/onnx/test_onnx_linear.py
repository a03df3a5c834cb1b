"""ONNX MatMul, Gemm and Transpose, compiled by dlc and compared with NumPy (f32 within
rtol 1e-5 / atol 1e-5: dot products of ≤ 8 terms, summed in another order)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx_models import interpret, make, node, randn, run

import dlc.onnx
from dlc.onnx.emitter import block_reversals, tensor_type

TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((4,), (2, 4, 3)),
        ((4,), (4,)),
    ],
    ids=[
        "2d",
        "batched",
        "broadcast-batch",
        "vector-matrix",
        "matrix-vector",
        "vector-batch",
        "dot",
    ],
)
def test_matmul_is_numpy_matmul(a_shape, b_shape):
    a, b = randn(*a_shape), randn(*b_shape, seed=1)
    model = make([node("MatMul", ["a", "b"], ["y"])], {"a": a_shape, "b": b_shape}, {"y": None})
    np.testing.assert_allclose(run(model, a, b), np.matmul(a, b), **TOL)


@pytest.mark.parametrize("a_shape", [(5, 1, 4), (2, 3, 4), (3, 2, 1, 4)])
def test_matmul_with_one_weight_matrix_is_one_matrix_product(a_shape):
    """[..., m, k] · [k, n]: the rows of every batch times the one matrix, as a single
    rank-2 dot between two reshapes (not a batch of products over a broadcast weight)."""
    a, w = randn(*a_shape), randn(4, 6, seed=1)
    model = make([node("MatMul", ["a", "w"], ["y"])], {"a": a_shape}, {"y": None}, {"w": w})
    module = dlc.onnx.load(model)
    dots = [op for op in module.walk() if op.name == "graph.dot"]
    assert [len(tensor_type(v).dims) for d in dots for v in d.operands] == [2, 2]
    np.testing.assert_allclose(run(model, a), np.matmul(a, w), **TOL)
    np.testing.assert_allclose(interpret(model, a), np.matmul(a, w), **TOL)


@pytest.mark.parametrize(("trans_a", "trans_b"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_transposes(trans_a, trans_b):
    a, b, c = randn(3, 4), randn(4, 5, seed=1), randn(5, seed=2)
    a_in = a.T.copy() if trans_a else a
    b_in = b.T.copy() if trans_b else b
    model = make(
        [node("Gemm", ["a", "b", "c"], ["y"], transA=trans_a, transB=trans_b)],
        {"a": a_in.shape, "b": b_in.shape},
        {"y": (3, 5)},
        {"c": c},
    )
    np.testing.assert_allclose(run(model, a_in, b_in), a @ b + c, **TOL)


@pytest.mark.parametrize("c_shape", [(), (1,), (3, 1), (3, 5)])
def test_gemm_alpha_beta_and_c_broadcast(c_shape):
    a, b, c = randn(3, 4), randn(4, 5, seed=1), randn(*c_shape, seed=2)
    model = make(
        [node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=-2.0)],
        {"a": (3, 4), "b": (4, 5), "c": c_shape},
        {"y": (3, 5)},
    )
    np.testing.assert_allclose(run(model, a, b, c), 0.5 * (a @ b) - 2.0 * c, **TOL)


def test_gemm_without_c():
    a, b = randn(3, 4), randn(4, 5, seed=1)
    model = make(
        [node("Gemm", ["a", "b"], ["y"], alpha=2.0)], {"a": (3, 4), "b": (4, 5)}, {"y": None}
    )
    np.testing.assert_allclose(interpret(model, a, b), 2 * (a @ b), **TOL)


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 2, 3, 1], [3, 1, 0, 2], None])
def test_transpose_compiled(perm):
    x = randn(2, 3, 4) if perm is None or len(perm) == 3 else randn(2, 3, 4, 5)
    attrs = {} if perm is None else {"perm": perm}
    model = make([node("Transpose", ["x"], ["y"], **attrs)], {"x": x.shape}, {"y": None})
    np.testing.assert_array_equal(run(model, x), np.transpose(x, perm))


@pytest.mark.parametrize("rank", [2, 3, 4])
def test_every_permutation_by_the_reference(rank):
    x = randn(*range(2, 2 + rank))
    for perm in itertools.permutations(range(rank)):
        model = make(
            [node("Transpose", ["x"], ["y"], perm=list(perm))], {"x": x.shape}, {"y": None}
        )
        np.testing.assert_array_equal(interpret(model, x), np.transpose(x, perm))


def test_permutations_take_at_most_three_transposes_up_to_rank_5():
    for perm in itertools.permutations(range(5)):
        assert len(block_reversals(perm)) <= 3
