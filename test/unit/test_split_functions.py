"""Large functions are split for LLVM: every top-level loop nest of a function over
`SPLIT_OPS` loop-level ops is outlined into an internal `noinline` function
(lower-loop-to-llvm, `parallel.py`). Splitting changes no result bit where the code has
one summation order (opt_level 1); at opt_level 2 LLVM may vectorize a reassociable
sum (`mark_reassociable`) differently in the smaller function, within that bound.
Loop results come back from the outlined nest, parallel loops still run on threads."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dlc
from dlc.lowering.loop_to_llvm import lower_loop_to_llvm
from dlc.semantics.interpreter import run_function

# Two softmaxes (reductions whose results later nests read), a product with a
# parallel schedule and a bias: several top-level nests, loop-carried results.
PROGRAM = """module "s"
stage raw

func @f: (<64 x 96 x f32>, <96 x 128 x f32>, <64 x 128 x f32>) -> <64 x 128 x f32> {
'entry(%a: <64 x 96 x f32>, %b: <96 x 128 x f32>, %c: <64 x 128 x f32>):
    %p = dot %a: <64 x 96 x f32>, %b: <96 x 128 x f32>
    %q = add %p: <64 x 128 x f32>, %c: <64 x 128 x f32>
    %m = reduce %q: <64 x 128 x f32> by max init -inf: f32 along 0, 1
    %s = subtract %q: <64 x 128 x f32>, %m: f32
    %e = exp %s: <64 x 128 x f32>
    %z = reduce %e: <64 x 128 x f32> by add init 0.0: f32 along 0, 1
    %x = divide %e: <64 x 128 x f32>, %z: f32
    %m2 = reduce %x: <64 x 128 x f32> by max init -inf: f32 along 0, 1
    %y = subtract %x: <64 x 128 x f32>, %m2: f32
    return %y: <64 x 128 x f32>
}
"""

RNG = np.random.default_rng(3)
A = RNG.standard_normal((64, 96)).astype(np.float32)
B = RNG.standard_normal((96, 128)).astype(np.float32)
C = RNG.standard_normal((64, 128)).astype(np.float32)


@pytest.fixture(autouse=True)
def no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CACHE", "0")  # the split threshold is not part of the key


def compiled(
    monkeypatch: pytest.MonkeyPatch, split_ops: int, opt_level: int = 2, chunk: int = 1
) -> dlc.CompiledModule:
    """`PROGRAM` split when over `split_ops` ops, in runs of `chunk` ops (1: a function
    per nest)."""
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", split_ops)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", chunk)
    return dlc.compile(PROGRAM, num_threads=2, opt_level=opt_level)


def test_split_outlines_nests(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = compiled(monkeypatch, 10**9)
    split = compiled(monkeypatch, 0)
    assert "nest" not in whole.ir("llvm")
    ir = split.ir("llvm")
    assert ir.count("define void @f.nest") >= 4
    assert "noinline" in ir
    reference = run_function(dlc.parse(PROGRAM), "f", [A, B, C])
    np.testing.assert_allclose(split.f(A, B, C), reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(split.f(A, B, C), whole.f(A, B, C), rtol=1e-6, atol=1e-6)


def test_nests_are_outlined_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a large run budget consecutive nests share a function (a copy or an
    allocation between them still ends a run), the values flow inside."""
    one_each = compiled(monkeypatch, 0).ir("llvm").count("define void @f.nest")
    split = compiled(monkeypatch, 0, chunk=10**6)
    assert 1 <= split.ir("llvm").count("define void @f.nest") < one_each
    reference = run_function(dlc.parse(PROGRAM), "f", [A, B, C])
    np.testing.assert_allclose(split.f(A, B, C), reference, rtol=1e-5, atol=1e-5)


def test_split_changes_no_bit_of_one_summation_order(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = compiled(monkeypatch, 10**9, opt_level=1)
    split = compiled(monkeypatch, 0, opt_level=1)
    assert "nest" in split.ir("llvm")
    np.testing.assert_array_equal(split.f(A, B, C), whole.f(A, B, C))


def test_small_functions_are_not_split(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "nest" not in compiled(monkeypatch, lower_loop_to_llvm.SPLIT_OPS).ir("llvm")


def test_split_nests_run_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's parallel loop is still outlined for GOMP_parallel next to the
    split nests; one thread or two, the same bits."""
    split = compiled(monkeypatch, 0)
    ir = split.ir("llvm")
    if "GOMP_parallel" not in ir:
        pytest.skip("no OpenMP runtime here: parallel loops run serially")
    serial = dlc.compile(PROGRAM, num_threads=1)
    np.testing.assert_array_equal(split.f(A, B, C), serial.f(A, B, C))


TWO_PRODUCTS = """module "s2"
stage raw

func @g: (<64 x 96 x f32>, <96 x 128 x f32>, <128 x 128 x f32>) -> <64 x 128 x f32> {
'entry(%a: <64 x 96 x f32>, %b: <96 x 128 x f32>, %d: <128 x 128 x f32>):
    %p = dot %a: <64 x 96 x f32>, %b: <96 x 128 x f32>
    %r = dot %p: <64 x 128 x f32>, %d: <128 x 128 x f32>
    return %r: <64 x 128 x f32>
}
"""


def test_parallel_loops_of_split_nests_have_their_own_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each outlined nest names the parallel loops it outlines after itself
    (`@g.nest0.omp0`, `@g.nest3.omp0`): two split nests with a parallel loop each used
    to define `@g.omp0` twice (an internal error, found by the tuner)."""
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", 1)
    split = dlc.compile(TWO_PRODUCTS, num_threads=2)
    d = RNG.standard_normal((128, 128)).astype(np.float32)
    reference = run_function(dlc.parse(TWO_PRODUCTS), "g", [A, B, d])
    np.testing.assert_allclose(split.g(A, B, d), reference, rtol=1e-4, atol=1e-4)
    ir = split.ir("llvm")
    if "GOMP_parallel" not in ir:
        pytest.skip("no OpenMP runtime here: parallel loops run serially")
    assert len(set(re.findall(r"define [^@]*@(g\.nest\d+\.omp0)\(", ir))) == 2
