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
    assert ir.count('define void @"dlc.fn.f$nest') >= 4
    assert "noinline" in ir
    reference = run_function(dlc.parse(PROGRAM), "f", [A, B, C])
    np.testing.assert_allclose(split.f(A, B, C), reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(split.f(A, B, C), whole.f(A, B, C), rtol=1e-6, atol=1e-6)


def test_nests_are_outlined_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a large run budget consecutive nests share a function (a copy or an
    allocation between them still ends a run), the values flow inside."""
    one_each = compiled(monkeypatch, 0).ir("llvm").count('define void @"dlc.fn.f$nest')
    split = compiled(monkeypatch, 0, chunk=10**6)
    assert 1 <= split.ir("llvm").count('define void @"dlc.fn.f$nest') < one_each
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


def _chain(steps: int, shape: str, axes: str) -> str:
    """A chain of `steps` softmaxes over `shape`, one source line per op."""
    lines = [f"    %x{i + 1} = divide %e{i}: {shape}, %z{i}: f32" for i in range(steps)]
    body = []
    for i, last in enumerate(lines):
        body += [
            f"    %m{i} = reduce %x{i}: {shape} by max init -inf: f32 along {axes}",
            f"    %s{i} = subtract %x{i}: {shape}, %m{i}: f32",
            f"    %e{i} = exp %s{i}: {shape}",
            f"    %z{i} = reduce %e{i}: {shape} by add init 0.0: f32 along {axes}",
            last,
        ]
    return "\n".join(
        [
            'module "chain"',
            "stage raw",
            "",
            f"func @chain: ({shape}) -> {shape} {{",
            f"'entry(%x0: {shape}):",
            *body,
            f"    return %x{steps}: {shape}",
            "}",
            "",
        ]
    )


def _functions(ir: str) -> tuple[int, int]:
    """(outlined run functions defined, calls of them) in LLVM IR text."""
    defined = re.findall(r'^define [^@]*@"dlc\.fn\.chain\$nest', ir, re.MULTILINE)
    return len(defined), len(re.findall(r'\bcall [^@\n]*@"dlc\.fn\.chain\$nest', ir))


def test_alike_runs_share_one_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain repeats itself: its runs are cut at the same phase and those alike are
    one function called several times, with the bits of the unsplit function."""
    program = _chain(12, "<256 x f32>", "0")
    x = RNG.standard_normal(256).astype(np.float32)
    whole = dlc.compile(program, opt_level=1)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", 150)
    split = dlc.compile(program, opt_level=1)
    defined, calls = _functions(split.ir("llvm"))
    assert 2 <= defined < calls
    np.testing.assert_array_equal(split.chain(x), whole.chain(x))
    reference = run_function(dlc.parse(program), "chain", [x])
    np.testing.assert_allclose(dlc.compile(program).chain(x), reference, rtol=1e-5, atol=1e-7)


def test_runs_with_located_messages_stay_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """An outer loop polls the interrupt flag with its own source line in the message:
    nests alike but for their lines keep a function each."""
    program = _chain(3, "<8 x 16 x f32>", "0, 1")
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", 1)
    defined, calls = _functions(dlc.compile(program, opt_level=1).ir("llvm"))
    assert defined == calls >= 6


def test_checked_runs_stay_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """With bounds checks every access names its source line: no run is shared."""
    program = _chain(3, "<256 x f32>", "0")
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", 1)
    shared = _functions(dlc.compile(program, opt_level=1).ir("llvm"))
    checked = _functions(dlc.compile(program, opt_level=1, bounds_check=True).ir("llvm"))
    assert shared[0] < shared[1]
    assert checked[0] == checked[1] == shared[1]


def test_parallel_loops_of_several_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs with a parallel loop each: their outlined workers are named after the
    run (`@dlc.fn.f$nest<k>$omp<j>`), not both `$omp0` (a duplicate symbol before)."""
    program = """module "s"
stage raw

func @f: (<64 x 96 x f32>, <96 x 128 x f32>, <128 x 64 x f32>) -> <64 x 64 x f32> {
'entry(%a: <64 x 96 x f32>, %b: <96 x 128 x f32>, %c: <128 x 64 x f32>):
    %p = dot %a: <64 x 96 x f32>, %b: <96 x 128 x f32>
    %e = exp %p: <64 x 128 x f32>
    %q = dot %e: <64 x 128 x f32>, %c: <128 x 64 x f32>
    return %q: <64 x 64 x f32>
}
"""
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", 1)
    split = dlc.compile(program, num_threads=2)
    a, b, c = A * 0.1, B * 0.1, RNG.standard_normal((128, 64)).astype(np.float32)
    reference = run_function(dlc.parse(program), "f", [a, b, c])
    np.testing.assert_allclose(split.f(a, b, c), reference, rtol=1e-4, atol=1e-4)
