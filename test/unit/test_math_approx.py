"""Polynomial f32 exp / log / tanh / erf (dlc/passes/loop/math_approx.py): ULP error sweeps.

Each function is compiled once over a big array, so a sweep of 10^7 inputs plus the
special values stays fast. The reference is float64 NumPy (SciPy's erf) rounded to float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.parser import parse_module

N = 10_000_000
SPECIALS = np.array(
    [
        0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0,
        1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38, -1.1754944e-38, 3.4028235e38, -3.4028235e38,
        88.72283, 88.72284, 88.7229, 89.0, -87.33654, -87.33655, -103.97207, -103.97208,
        -104.0, -150.0, 0.625, -0.625, 0.62499994, 9.0, 9.1, -9.1, 1e-20, -1e-20,
        0.921875, 0.92187494, 4.0, -3.9999998,
    ],
    dtype=np.float32,
)  # fmt: skip
BOUNDS = {"exp": 2, "log": 2, "tanh": 5, "erf": 2}
OPS = list(BOUNDS)


def _program(op: str, n: int) -> str:
    return f"""module "approx"
stage raw
func @f: (<{n} x f32>) -> <{n} x f32> {{
'entry(%x: <{n} x f32>):
    %y = {op} %x: <{n} x f32>
    return %y: <{n} x f32>
}}
"""


def _inputs(op: str) -> np.ndarray:
    """Evenly spaced bit patterns over the interesting range, dense samples, specials."""
    half = (N - SPECIALS.size) // 2
    rng = np.random.default_rng(1)
    if op == "log":  # every positive binade, denormals included
        bits = np.linspace(0, 0x7F800000, half, dtype=np.int64).astype(np.int32)
        dense = rng.uniform(0.25, 4.0, N - SPECIALS.size - half).astype(np.float32)
    else:
        lo, hi = (-104.0, 89.0) if op == "exp" else (-10.0, 10.0)
        bits = np.linspace(0, 0x7F800000, half // 2, dtype=np.int64).astype(np.int32)
        dense = rng.uniform(lo, hi, N - SPECIALS.size - half).astype(np.float32)
        bits = np.concatenate([bits, bits | np.int32(-0x80000000)])
    return np.concatenate([SPECIALS, bits.view(np.float32), dense])[:N].astype(np.float32)


def _ordered(x: np.ndarray) -> np.ndarray:
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """ULP distance; nan vs nan is 0, nan vs number is huge."""
    d = np.abs(_ordered(got) - _ordered(want))
    both_nan = np.isnan(got) & np.isnan(want)
    one_nan = np.isnan(got) ^ np.isnan(want)
    return np.where(both_nan, 0, np.where(one_nan, 1 << 40, d))


@pytest.fixture(scope="module")
def compiled() -> dict:
    return {op: compile_graph_module(parse_module(_program(op, N)))["f"] for op in OPS}


def _reference(op: str, x: np.ndarray) -> np.ndarray:
    if op == "erf":
        special = pytest.importorskip("scipy.special")
        return special.erf(x.astype(np.float64)).astype(np.float32)
    with np.errstate(all="ignore"):
        return getattr(np, op)(x.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("op", OPS)
def test_sweep_within_ulp_bound(compiled: dict, op: str) -> None:
    x = _inputs(op)
    assert x.size >= N
    want = _reference(op, x)
    got = compiled[op](x)
    err = ulp_errors(got, want)
    worst = int(err.argmax())
    assert err.max() <= BOUNDS[op], f"{op}({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"


@pytest.mark.parametrize("op", OPS)
def test_special_values_exact(compiled: dict, op: str) -> None:
    x = np.resize(SPECIALS, N).astype(np.float32)
    want = _reference(op, x)
    got = compiled[op](x)[: SPECIALS.size]
    want = want[: SPECIALS.size]
    exact = ~np.isfinite(want) | (want == 0)
    assert np.array_equal(got[exact], want[exact], equal_nan=True)
    # IEEE 754 leaves the sign of a NaN unspecified (hosts differ): compare signs of
    # the non-NaN results only.
    signed = exact & ~np.isnan(want)
    assert np.array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


def test_no_libm_calls_and_vector_code() -> None:
    mod = compile_graph_module(parse_module(_program("tanh", 4096)))
    ir = mod.ir("llvm")
    assert "tanhf" not in ir and "@llvm.exp." not in ir
    assert "<16 x float>" in ir or "<8 x float>" in ir


def test_erf_has_no_libm_call() -> None:
    ir = compile_graph_module(parse_module(_program("erf", 4096))).ir("llvm")
    assert "erff" not in ir and ("<16 x float>" in ir or "<8 x float>" in ir)


def test_libm_option_keeps_calls() -> None:
    mod = compile_graph_module(parse_module(_program("tanh", 64)), fast_math_functions=False)
    assert "tanhf" in mod.ir("llvm")


def test_f16_goes_through_f32() -> None:
    text = _program("exp", 64).replace("f32", "f16")
    f = compile_graph_module(parse_module(text))["f"]
    x = np.linspace(-5, 5, 64).astype(np.float16)
    np.testing.assert_allclose(f(x), np.exp(x.astype(np.float64)).astype(np.float16), rtol=1e-3)


def _power_program(exponent: float, n: int) -> str:
    return f"""module "powers"
stage raw
func @f: (<{n} x f32>) -> <{n} x f32> {{
'entry(%x: <{n} x f32>):
    %y = power %x: <{n} x f32>, {exponent}: f32
    return %y: <{n} x f32>
}}
"""


@pytest.mark.parametrize(("exponent", "bound"), [(2.0, 0), (3.0, 2), (4.0, 2)])
def test_power_by_a_small_constant_is_multiplications(exponent: float, bound: int) -> None:
    """No pow call (so the loop vectorizes); x·x exact, x³ and x⁴ within 2 ULP over
    every binade and the special values, whose results are exact."""
    n = 1 << 20
    mod = compile_graph_module(parse_module(_power_program(exponent, n)))
    ir = mod.ir("llvm")
    assert "pow" not in ir and ("<16 x float>" in ir or "<8 x float>" in ir)
    bits = np.linspace(0, 0x7F800000, n - SPECIALS.size, dtype=np.int64).astype(np.int32)
    x = np.concatenate([SPECIALS, bits.view(np.float32) * np.float32(-1) ** np.arange(bits.size)])
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), exponent).astype(np.float32)
    got = mod["f"](x.astype(np.float32))
    err = ulp_errors(got, want)
    worst = int(err.argmax())
    assert err.max() <= bound, f"{x[worst]!r} ** {exponent} = {got[worst]!r}, want {want[worst]!r}"
    exact = ~np.isfinite(want) | (want == 0)
    assert np.array_equal(got[exact], want[exact], equal_nan=True)


@pytest.mark.parametrize("options", [{}, {"fast_math_functions": False}])
def test_other_powers_and_the_libm_option_keep_pow(options: dict) -> None:
    for exponent in (2.5, -2.0) if not options else (3.0,):
        ir = compile_graph_module(parse_module(_power_program(exponent, 64)), **options).ir("llvm")
        assert "pow" in ir
