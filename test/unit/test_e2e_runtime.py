"""End to end: `random` (seedable SplitMix64, statistics instead of bit-equality with
NumPy), growable stacks (createStack/push/pop/destroyStack) and function combinators
of reduce/reduceWindow, against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc import TrapError
from dlc.lowering.graph_to_tensor.runtime_ops import splitmix64
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function

RANDOM = """module "r"
stage raw

func @u: (f32, f32) -> <100 x 100 x f32> {
'entry(%lo: f32, %hi: f32):
    %r = random 100 x 100 from %lo: f32 upto %hi: f32
    return %r: <100 x 100 x f32>
}

func @d: (f64, f64) -> <4 x f64> {
'entry(%lo: f64, %hi: f64):
    %r = random 4 from %lo: f64 upto %hi: f64
    return %r: <4 x f64>
}

func @h: (f16, f16) -> <1000 x f16> {
'entry(%lo: f16, %hi: f16):
    %r = random 1000 from %lo: f16 upto %hi: f16
    return %r: <1000 x f16>
}

func @k: (i32, i32) -> <7000 x i32> {
'entry(%lo: i32, %hi: i32):
    %r = random 7000 from %lo: i32 upto %hi: i32
    return %r: <7000 x i32>
}

func @b: (i8, i8) -> <500 x i8> {
'entry(%lo: i8, %hi: i8):
    %r = random 500 from %lo: i8 upto %hi: i8
    return %r: <500 x i8>
}

func @s: () -> f32 {
'entry():
    %r = random scalar from 0: f32 upto 1: f32
    return %r: f32
}
"""


@pytest.fixture(scope="module")
def rmod() -> dlc.CompiledModule:
    return dlc.compile(RANDOM, seed=7)


def test_random_float_range_and_statistics(rmod) -> None:  # noqa: ANN001
    rmod.seed(7)
    x = rmod.u(np.float32(-2), np.float32(3))
    assert x.dtype == np.float32 and x.shape == (100, 100)
    assert x.min() >= -2 and x.max() < 3
    # uniform on [-2, 3): mean 0.5, variance 25/12; n = 10^4 -> std of mean ~0.0144
    assert abs(x.mean() - 0.5) < 0.06
    assert abs(x.var() - 25 / 12) < 0.1
    hist = np.histogram(x, bins=5, range=(-2, 3))[0]
    assert hist.min() > 1800 and hist.max() < 2200


def test_random_int_range_and_statistics(rmod) -> None:  # noqa: ANN001
    k = rmod.k(np.int32(-3), np.int32(4))
    assert k.dtype == np.int32 and k.min() == -3 and k.max() == 3
    counts = np.bincount(k + 3)
    assert counts.min() > 850 and counts.max() < 1150  # 1000 expected per value
    b = rmod.b(np.int8(-128), np.int8(127))
    assert b.min() >= -128 and b.max() < 127 and abs(b.astype(float).mean() + 0.5) < 8


def test_random_other_float_types(rmod) -> None:  # noqa: ANN001
    h = rmod.h(np.float16(1), np.float16(1.5))
    assert h.dtype == np.float16 and h.min() >= 1 and h.max() < 1.5
    d = rmod.d(np.float64(0), np.float64(1e-300))
    assert d.min() >= 0 and d.max() < 1e-300
    s = rmod.s()
    assert s.shape == () and 0 <= s < 1


def test_random_empty_range_gives_lo(rmod) -> None:  # noqa: ANN001
    assert (rmod.u(np.float32(3), np.float32(3)) == 3).all()
    assert (rmod.u(np.float32(5), np.float32(1)) == 5).all()
    assert (rmod.k(np.int32(9), np.int32(-9)) == 9).all()
    ref = run_function(parse_module(RANDOM), "k", [np.int32(9), np.int32(-9)])
    assert (ref == 9).all()


def test_random_reproducible_per_seed_and_seeds_differ() -> None:
    a = dlc.compile(RANDOM, seed=1)
    b = dlc.compile(RANDOM, seed=1)
    c = dlc.compile(RANDOM, seed=2)
    lo, hi = np.float32(0), np.float32(1)
    first = a.u(lo, hi)
    assert np.array_equal(first, b.u(lo, hi))
    assert not np.array_equal(first, c.u(lo, hi))
    second = a.u(lo, hi)  # the counter advances between calls
    assert not np.array_equal(first, second)
    a.seed(1)  # reseeding restarts the sequence
    assert np.array_equal(a.u(lo, hi), first)
    with pytest.raises(TypeError):
        a.seed(1.5)  # type: ignore[arg-type]


def test_random_matches_documented_generator() -> None:
    """Element k of the first draw is lo + (hi - lo) * (splitmix64(seed, k) >> 11) / 2^53."""
    mod = dlc.compile(RANDOM, seed=123)
    got = mod.d(np.float64(0), np.float64(1))
    want = [(splitmix64(123, k) >> 11) * 2.0**-53 for k in range(4)]
    assert got.tolist() == want


STACK = """module "s"
stage raw

struct $Pair {
    #a: f32
    #b: <2 x i64>
}

func @lifo: (f32, <3 x i32>, $Pair) -> (f32, <3 x i32>, $Pair, i64) {
'entry(%x: f32, %v: <3 x i32>, %p: $Pair):
    %s = createStack
    push %x: f32 to %s: stack
    push %v: <3 x i32> to %s: stack
    push %p: $Pair to %s: stack
    %q = pop $Pair from %s: stack
    %w = pop <3 x i32> from %s: stack
    %y = pop f32 from %s: stack
    destroyStack %s: stack
    %t = literal (%y: f32, %w: <3 x i32>, %q: $Pair, 1: i64): (f32, <3 x i32>, $Pair, i64)
    return %t: (f32, <3 x i32>, $Pair, i64)
}

func @many: (i64) -> i64 {
'entry(%n: i64):
    %s = createStack
    branch 'push(0: i64)
'push(%i: i64):
    %more = lessThan %i: i64, %n: i64
    conditional %more: bool then 'body(%i: i64) else 'drain(0: i64, %n: i64)
'body(%j: i64):
    push %j: i64 to %s: stack
    %k = add %j: i64, 1: i64
    branch 'push(%k: i64)
'drain(%acc: i64, %left: i64):
    %done = lessThanOrEqual %left: i64, 0: i64
    conditional %done: bool then 'out(%acc: i64) else 'pop(%acc: i64, %left: i64)
'pop(%a: i64, %l: i64):
    %top = pop i64 from %s: stack
    %m = multiply %a: i64, 3: i64
    %a2 = add %m: i64, %top: i64
    %l2 = subtract %l: i64, 1: i64
    branch 'drain(%a2: i64, %l2: i64)
'out(%r: i64):
    destroyStack %s: stack
    return %r: i64
}

func @underflow: (f32) -> f32 {
'entry(%x: f32):
    %s = createStack
    push %x: f32 to %s: stack
    %a = pop f32 from %s: stack
    %b = pop f32 from %s: stack
    destroyStack %s: stack
    return %b: f32
}
"""


def test_stack_lifo_of_aggregates() -> None:
    mod = dlc.compile(STACK)
    ref = parse_module(STACK)
    args = [np.float32(2.5), np.array([1, -2, 3], np.int32), (np.float32(-1), np.array([4, 5]))]
    got = mod.lifo(*args)
    want = run_function(ref, "lifo", args)
    assert got[0] == want[0] == np.float32(2.5)
    assert np.array_equal(got[1], want[1])
    assert got[2][0] == want[2][0] and np.array_equal(got[2][1], want[2][1])


@pytest.mark.parametrize("n", [0, 1, 5, 200])
def test_stack_grows_and_pops_in_reverse(n: int) -> None:
    mod = dlc.compile(STACK)
    want = run_function(parse_module(STACK), "many", [np.int64(n)])
    assert mod.many(np.int64(n)) == want


def test_stack_pop_of_empty_stack_traps() -> None:
    mod = dlc.compile(STACK)
    with pytest.raises(TrapError, match="pop from an empty stack"):
        mod.underflow(np.float32(1))


COMBINATORS = """module "c"
stage raw

func @f: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %t = multiply %a: f32, 0.5: f32
    %u = subtract %t: f32, %b: f32
    return %u: f32
}

func @imax: (i32, i32) -> i32 {
'entry(%a: i32, %b: i32):
    %big = greaterThan %a: i32, %b: i32
    conditional %big: bool then 'l() else 'r()
'l():
    return %a: i32
'r():
    return %b: i32
}

func @both: (bool, bool) -> bool {
'entry(%a: bool, %b: bool):
    %c = and %a: bool, %b: bool
    return %c: bool
}

func @r1: (<3 x 4 x 5 x f32>) -> <4 x f32> {
'entry(%x: <3 x 4 x 5 x f32>):
    %y = reduce %x: <3 x 4 x 5 x f32> by @f: (f32, f32) -> f32 init 1.0: f32 along 0, 2
    return %y: <4 x f32>
}

func @r2: (<6 x i32>, i32) -> i32 {
'entry(%x: <6 x i32>, %i: i32):
    %y = reduce %x: <6 x i32> by @imax: (i32, i32) -> i32 init %i: i32 along 0
    return %y: i32
}

func @r3: (<2 x 3 x bool>) -> <2 x bool> {
'entry(%x: <2 x 3 x bool>):
    %y = reduce %x: <2 x 3 x bool> by @both: (bool, bool) -> bool init true: bool along 1
    return %y: <2 x bool>
}

func @w: (<5 x 6 x f32>) -> <3 x 3 x f32> {
'entry(%x: <5 x 6 x f32>):
    %0.0 = reduceWindow %x: <5 x 6 x f32> by @f: (f32, f32) -> f32 init 0.25: f32 dims 3, 2 strides 2, 2 padding half
    return %0.0: <3 x 3 x f32>
}
"""


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("r1", lambda rng: [rng.standard_normal((3, 4, 5)).astype(np.float32)]),
        ("r2", lambda rng: [rng.integers(-50, 50, 6).astype(np.int32), np.int32(7)]),
        ("r2", lambda rng: [rng.integers(-50, 0, 6).astype(np.int32), np.int32(-60)]),
        ("r3", lambda rng: [rng.random((2, 3)) < 0.8]),
        ("w", lambda rng: [rng.standard_normal((5, 6)).astype(np.float32)]),
    ],
)
def test_function_combinators_match_reference(name: str, make) -> None:  # noqa: ANN001
    mod = dlc.compile(COMBINATORS)
    args = make(np.random.default_rng(11))
    got = mod[name](*args)
    want = run_function(parse_module(COMBINATORS), name, args)
    np.testing.assert_allclose(got, want, rtol=1e-5)  # f is not associative: order matters
