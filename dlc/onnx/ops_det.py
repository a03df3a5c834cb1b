"""ONNX Det by the Leibniz formula: det A = Σ_σ sign(σ) Π_i A[i, σ(i)] over the n!
permutations, as one gather of the n entries of every permutation from the flattened
matrices, a product and a signed sum. Exact in its arithmetic, it is used up to 4 × 4
(24 products); larger matrices need an LU decomposition with pivoting (data-dependent
row swaps), which dlc does not build in the graph, so they are refused."""

from __future__ import annotations

import itertools

import numpy as np
from xdsl.dialects.builtin import IntAttr, StringAttr

from dlc.dialects.graph_elementwise import DataTypeCastOp
from dlc.dialects.graph_gather import GatherOp
from dlc.onnx.emitter import ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result

MAX_ORDER = 4


def permutation_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(flat positions i·n + σ(i) of each permutation σ: n! × n, their signs)."""
    perms = list(itertools.permutations(range(n)))
    positions = np.array([[i * n + p for i, p in enumerate(perm)] for perm in perms], np.int64)
    inversions = [sum(a > b for a, b in itertools.combinations(perm, 2)) for perm in perms]
    return positions, np.array([(-1) ** k for k in inversions])


def det(node: Node) -> list[Result]:
    e, x = node.emit, node.input(0)
    dims, dt = shape_of(x), tensor_type(x).dt
    if len(dims) < 2 or dims[-1] != dims[-2]:
        raise ImportProblem(f"the input {dims} must hold square matrices")
    n = dims[-1]
    if n > MAX_ORDER:
        raise ImportProblem(
            f"{n} × {n} matrices are not supported (the Leibniz formula is used up to "
            f"{MAX_ORDER} × {MAX_ORDER}; dlc builds no LU decomposition)"
        )
    if dt not in ("f16", "f32", "f64", "bf16"):
        raise ImportProblem(f"Det of {dt} matrices is not supported")
    wide = dt in ("f16", "bf16")  # computed in f32, rounded once
    if wide:
        x = e.op(DataTypeCastOp, [x], dtype=StringAttr("f32"))
    batch = dims[:-2]
    positions, signs = permutation_table(n)
    flat = e.reshape(x, (*batch, n * n))
    entries = e.op(GatherOp, [flat, e.constant(positions)], axis=IntAttr(len(batch)))
    products = e.reduce(entries, "multiply", 1.0, [len(batch) + 1], keepdims=False)
    signs = signs.astype(np.float64 if dt == "f64" else np.float32)
    y = e.reduce(
        e.binary("multiply", products, e.constant(signs)), "add", 0.0, [len(batch)], keepdims=False
    )
    return [e.op(DataTypeCastOp, [y], dtype=StringAttr(dt)) if wide else y]


CONVERTERS: dict[str, Converter] = {"Det": det}
