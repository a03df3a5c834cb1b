"""Transcendental activations in a register tile's epilogue (`epilogue n` with
compares, selects and math functions on whole vectors: `lane_plan(functions=True)`,
`loop.vcmpf` / `loop.vselect`, math-approx's vector expansions): MatMul + bias +
Gelu (erf and tanh forms), Sigmoid, Tanh, LeakyRelu; odd sizes with column tails,
1, 2 and 3 threads, bounds checks, f64, haswell. Without fma the epilogue's bits are
those of opt_level=0's plain nests (the same scalar expansion in every lane); with
fma the results stay within the bound of the length-K sum, measured against the
reference interpreter."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx_models import make, node, randn

import dlc
import dlc.onnx
from dlc.passes.tensor import schedule_policy as policy
from dlc.semantics.interpreter import run_function

ACTIVATIONS = {
    "gelu": [node("Gelu", ["h"], ["z"])],
    "gelu_tanh": [node("Gelu", ["h"], ["z"], approximate="tanh")],
    "sigmoid": [node("Sigmoid", ["h"], ["z"])],
    "tanh": [node("Tanh", ["h"], ["z"])],
    "leaky_relu": [node("LeakyRelu", ["h"], ["z"], alpha=0.1)],
}


@pytest.fixture(autouse=True)
def _small_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy, "MIN_WORK", 0)


def _model(act: str, m: int, k: int, n: int, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """MatMul (constant B) + Add(bias) + the activation."""
    np_type = np.float32 if dtype == TensorProto.FLOAT else np.float64
    inits = {"w": randn(k, n, seed=1).astype(np_type), "b": randn(n, seed=2).astype(np_type)}
    nodes = [node("MatMul", ["x", "w"], ["y"]), node("Add", ["y", "b"], ["h"])]
    return make(
        nodes + ACTIVATIONS[act], {"x": (m, k)}, {"z": (m, n)}, inits, opset=20, dtype=dtype
    )


def _check(
    model: onnx.ModelProto, x: np.ndarray, k: int, fma: bool, **options: object
) -> dlc.CompiledModule:
    """Bits of opt_level=0 without fma, the reference within K ε (plus the
    functions' few ULP) with fma; returns the compiled module."""
    want = np.asarray(run_function(dlc.onnx.load(model), "g", [x]))
    plain = dlc.compile_onnx(model, opt_level=0, **options).g(x)
    compiled = dlc.compile_onnx(model, fma=fma, **options)
    got = compiled.g(x)
    if not fma:
        np.testing.assert_array_equal(got, plain)
    eps = np.finfo(x.dtype).eps
    bound = (k + 8) * eps * (np.abs(want).max() + 1)
    assert np.abs(plain - want).max() <= bound
    assert np.abs(got - want).max() <= bound
    return compiled


@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_activation_in_epilogue(act: str) -> None:
    """12 rows (whole row tiles of 6 or 12), 37 columns (a tail)."""
    threads = 1 + len(act) % 3
    model = _model(act, 12, 40, 37)
    x = randn(12, 40, seed=3)
    compiled = _check(
        model, x, 40, fma=act == "gelu", num_threads=threads, bounds_check=threads == 2
    )
    assert "epilogue 1" in compiled.ir("tensor")
    loop_ir = compiled.ir("loop")
    assert ("loop.vcmpf" in loop_ir) == (act != "sigmoid")  # erf, tanh, select: lane masks


def test_f64_and_haswell() -> None:
    """f64: exact libm calls lane by lane (math-approx keeps f64); haswell's 8-lane
    AVX2 vectors for the f32 layer."""
    model = _model("gelu", 17, 23, 45, TensorProto.DOUBLE)
    x = np.random.default_rng(4).standard_normal((17, 23))
    assert "epilogue 1" in _check(model, x, 23, fma=True, num_threads=3).ir("tensor")
    f32 = _model("gelu_tanh", 12, 30, 33)
    compiled = _check(f32, randn(12, 30, seed=5), 30, fma=False, target_cpu="haswell")
    ir = compiled.ir("tensor")
    assert "epilogue 1" in ir and "vectorize d1.1 x 8" in ir


def test_special_values_through_the_epilogue() -> None:
    """inf, -inf and NaN reach the activations through the product: the epilogue
    gives what the plain nests give (±1 for erf's and tanh's infinities, NaN kept)."""
    model = _model("gelu", 6, 16, 35)
    x = randn(6, 16, seed=6)
    x[1, :] = np.inf
    x[2, 0] = -np.inf
    x[3, 5] = np.nan
    plain = dlc.compile_onnx(model, opt_level=0).g(x)
    got = dlc.compile_onnx(model, fma=False, num_threads=2).g(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(plain))
    np.testing.assert_array_equal(got[~np.isnan(got)], plain[~np.isnan(plain)])
