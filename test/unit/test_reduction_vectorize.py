"""Vectorized reductions: `reassoc` float folds over a contiguous innermost axis
(`scalar_ops.mark_reassociable`): vector code in the IR, results against the reference
for awkward lengths, NaN / inf for min and max, exact integer folds."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function

LENGTHS = (1, 15, 17, 1000, 1023)
INITS = {
    "f32": {"add": "0.0", "multiply": "1.0", "max": "-inf", "min": "inf"},
    "f64": {"add": "0.0", "multiply": "1.0", "max": "-inf", "min": "inf"},
    "i32": {"add": "0", "multiply": "1", "max": "-2147483648", "min": "2147483647"},
    "i64": {
        "add": "0",
        "multiply": "1",
        "max": "-9223372036854775808",
        "min": "9223372036854775807",
    },
}


def _reduce_program(shape: tuple[int, ...], dtype: str, comb: str) -> str:
    """`@f` reduces its input along its last axis by `comb`."""
    dims = " x ".join(str(n) for n in shape)
    rest = " x ".join(str(n) for n in shape[:-1])
    out = f"<{rest} x {dtype}>" if rest else dtype
    axis = len(shape) - 1
    return f"""module "m"
stage raw
func @f: (<{dims} x {dtype}>) -> {out} {{
'entry(%x: <{dims} x {dtype}>):
    %r = reduce %x: <{dims} x {dtype}> by {comb} init {INITS[dtype][comb]}: {dtype} along {axis}
    return %r: {out}
}}
"""


def _run_both(text: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    module = parse_module(text)
    got = compile_graph_module(module).f(x)
    return np.asarray(got), np.asarray(run_function(module, "f", [x]))


SOFTMAX = """module "m"
stage raw
func @f: (<1000 x f32>) -> <1000 x f32> {
'entry(%x: <1000 x f32>):
    %m = reduce %x: <1000 x f32> by max init -inf: f32 along 0
    %s = subtract %x: <1000 x f32>, %m: f32
    %e = exp %s: <1000 x f32>
    %z = reduce %e: <1000 x f32> by add init 0.0: f32 along 0
    %y = divide %e: <1000 x f32>, %z: f32
    return %y: <1000 x f32>
}
"""


def test_softmax_sum_and_max_are_vector_reductions() -> None:
    mod = compile_graph_module(parse_module(SOFTMAX))
    loop_ir = mod.ir("loop")
    assert loop_ir.count("fastmath<reassoc>") == 1  # the sum's combine only
    ir = mod.ir("llvm")
    assert re.search(r"fadd reassoc <\d+ x float>", ir), "sum not vectorized"
    assert "llvm.vector.reduce.fadd" in ir
    assert "llvm.vector.reduce.fmaximum" in ir
    # the polynomial exp feeding the sum is in the same vector loop: vector fma + shl
    assert re.search(r"<\d+ x float> @llvm\.fma\.v\d+f32", ir)
    assert re.search(r"shl <\d+ x i32>", ir)


def test_row_reduction_vectorizes_and_int_sum_too() -> None:
    mod = compile_graph_module(parse_module(_reduce_program((4, 1023), "f32", "add")))
    assert re.search(r"fadd reassoc <\d+ x float>", mod.ir("llvm"))
    mod = compile_graph_module(parse_module(_reduce_program((1023,), "i32", "add")))
    ir = mod.ir("llvm")
    assert re.search(r"add <\d+ x i32>", ir) and "llvm.vector.reduce.add" in ir


def test_strided_reduction_keeps_sequential_order() -> None:
    text = """module "m"
stage raw
func @f: (<64 x 8 x f32>) -> <8 x f32> {
'entry(%x: <64 x 8 x f32>):
    %r = reduce %x: <64 x 8 x f32> by add init 0.0: f32 along 0
    return %r: <8 x f32>
}
"""
    mod = compile_graph_module(parse_module(text))
    assert "reassoc" not in mod.ir("loop")
    x = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    want = x[0].astype(np.float32) * 0
    for row in x:  # the strict left-to-right fold, bit for bit
        want = (want + row).astype(np.float32)
    np.testing.assert_array_equal(mod.f(x), want)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("comb", ["add", "multiply", "max", "min"])
def test_float_reduction_matches_reference(n: int, dtype: str, comb: str) -> None:
    rng = np.random.default_rng(n)
    np_dtype = np.float32 if dtype == "f32" else np.float64
    if comb == "multiply":
        x = rng.uniform(0.9, 1.1, n).astype(np_dtype)
    else:
        x = rng.standard_normal(n).astype(np_dtype)
    got, want = _run_both(_reduce_program((n,), dtype, comb), x)
    if comb in ("max", "min"):
        np.testing.assert_array_equal(got, want)
    else:
        rtol = 1e-5 if dtype == "f32" else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(x).sum())


@pytest.mark.parametrize("n", LENGTHS)
def test_row_sums_match_reference(n: int) -> None:
    x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
    got, want = _run_both(_reduce_program((3, n), "f32", "add"), x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(x).sum())


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("comb", ["max", "min"])
def test_max_min_propagate_nan_and_handle_inf(n: int, comb: str) -> None:
    rng = np.random.default_rng(n)
    cases = []
    for special in (np.nan, np.inf, -np.inf):
        for where in {0, n // 2, n - 1}:
            x = rng.standard_normal(n).astype(np.float32)
            x[where] = special
            cases.append(x)
    cases.append(np.full(n, -np.inf, np.float32))
    cases.append(np.full(n, np.inf, np.float32))
    both = rng.standard_normal(n).astype(np.float32)
    both[0], both[-1] = np.inf, np.nan
    cases.append(both)
    text = _reduce_program((n,), "f32", comb)
    for x in cases:
        got, want = _run_both(text, x)
        np.testing.assert_array_equal(got, want)  # NaN positions equal too


def test_sum_of_signed_zeros_and_infinities() -> None:
    text = _reduce_program((17,), "f32", "add")
    for x in (
        np.full(17, -0.0, np.float32),
        np.array([np.inf] * 8 + [1.0] * 9, np.float32),
        np.array([np.inf, -np.inf] + [1.0] * 15, np.float32),
    ):
        got, want = _run_both(text, x)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("comb", ["add", "multiply", "max", "min"])
def test_int_reduction_is_exact(n: int, dtype: str, comb: str) -> None:
    rng = np.random.default_rng(n)
    info = np.iinfo(np.int32 if dtype == "i32" else np.int64)
    x = rng.integers(info.min, info.max, n, dtype=info.dtype)  # add / multiply wrap
    got, want = _run_both(_reduce_program((n,), dtype, comb), x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("data", ["normal", "uniform"])
def test_opt_levels_differ_within_the_documented_bound(data: str) -> None:
    """docs/design/numerics.md, "Reassociated reductions": at opt_level 0/1 a float sum is the
    strict left fold, at 2/3 K partial sums; each within its error bound of the exact sum,
    (n - 1) u S and (n / K + log2 K + 1) u S (u = 2**-24, S = sum |x_i|, K >= 4 lanes), so
    they differ by at most (n - 1 + n / K + log2 K + 1) u S."""
    n, u, k = 10**6, 2.0**-24, 4
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32) if data == "normal" else rng.random(n, np.float32)
    program = parse_module(_reduce_program((n,), "f32", "add"))
    strict, vectorized = (float(compile_graph_module(program, opt_level=o).f(x)) for o in (0, 2))
    assert float(compile_graph_module(program, opt_level=1).f(x)) == strict
    exact = math.fsum(x.astype(np.float64))
    s = float(np.abs(x.astype(np.float64)).sum())
    assert abs(strict - exact) <= (n - 1) * u * s
    assert abs(vectorized - exact) <= (n / k + math.log2(k) + 1) * u * s
    assert abs(vectorized - strict) <= (n - 1 + n / k + math.log2(k) + 1) * u * s


SQUEEZE = """module "m"
stage raw
func @f: (<1 x 300 x 1 x 1 x f32>, <5 x 300 x 1 x 1 x f32>) -> <1 x 5 x 1 x 1 x f32> {
'entry(%x: <1 x 300 x 1 x 1 x f32>, %k: <5 x 300 x 1 x 1 x f32>):
    %y = convolve %x: <1 x 300 x 1 x 1 x f32> kernel %k: <5 x 300 x 1 x 1 x f32> strides 1, 1 padding (0, 0), (0, 0) rightDilation 1, 1 groups 1
    return %y: <1 x 5 x 1 x 1 x f32>
}
"""


@pytest.mark.parametrize("target", ["host", "haswell"])
def test_a_channel_sum_before_taps_of_one_is_a_vector_reduction(target: str) -> None:
    """A 1 x 1 convolution over a 1 x 1 image (a squeeze-and-excitation's): the channel
    sum is the innermost reduction longer than 1 and walks the last dimension longer
    than 1 of its reads, so it is reassociated into vector partial sums (it was one
    chain of 300 dependent adds); within the documented bound of the exact sum."""
    from dlc.target import check_runnable

    try:
        check_runnable(target)
    except ValueError:
        pytest.skip(f"this machine cannot run {target} code")
    mod = compile_graph_module(parse_module(SQUEEZE), target_cpu=target)
    assert re.search(r"fadd reassoc (contract )?<\d+ x float>", mod.ir("llvm"))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 300, 1, 1)).astype(np.float32)
    k = rng.standard_normal((5, 300, 1, 1)).astype(np.float32)
    got = np.asarray(mod.f(x, k)).reshape(5)
    products = k[:, :, 0, 0].astype(np.float64) * x[0, :, 0, 0].astype(np.float64)
    bound = (300 / 16 + 10) * np.finfo(np.float32).eps * np.abs(products).sum(axis=1)
    assert np.all(np.abs(got - products.sum(axis=1)) <= bound)
