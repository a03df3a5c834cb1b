"""End to end: `scan` with function (and identity-less) combinators against the
reference interpreter (bit-equal: same combination order), and call-depth limits of
the reference interpreter and of compiled code (errors instead of crashes)."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc import TrapError
from dlc.lowering.loop_to_llvm.context import MAX_CALL_DEPTH
from dlc.parser import parse_module
from dlc.semantics.interpreter import MAX_NESTED_INVOKES, UndefinedBehaviorError, run_function

SCANS = """module "s"
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
    %d = subtract %a: i32, 1: i32
    return %d: i32
'r():
    return %b: i32
}

func @xor: (bool, bool) -> bool {
'entry(%a: bool, %b: bool):
    conditional %a: bool then 'flip() else 'keep()
'flip():
    %c = not %b: bool
    return %c: bool
'keep():
    return %b: bool
}

func @d: (f64, f64) -> f64 {
'entry(%a: f64, %b: f64):
    %t = multiply %a: f64, 0.75: f64
    %u = add %t: f64, %b: f64
    return %u: f64
}

func @s1: (<7 x f32>) -> <7 x f32> {
'entry(%x: <7 x f32>):
    %y = scan %x: <7 x f32> by @f: (f32, f32) -> f32 along 0
    return %y: <7 x f32>
}

func @s2: (<3 x 4 x 5 x f32>) -> <3 x 4 x 5 x f32> {
'entry(%x: <3 x 4 x 5 x f32>):
    %y = scan %x: <3 x 4 x 5 x f32> by @f: (f32, f32) -> f32 along 2, 0
    return %y: <3 x 4 x 5 x f32>
}

func @s3: (<4 x 6 x i32>) -> <4 x 6 x i32> {
'entry(%x: <4 x 6 x i32>):
    %y = scan %x: <4 x 6 x i32> by @imax: (i32, i32) -> i32 along 1, 0
    return %y: <4 x 6 x i32>
}

func @s4: (<3 x 5 x bool>) -> <3 x 5 x bool> {
'entry(%x: <3 x 5 x bool>):
    %y = scan %x: <3 x 5 x bool> by @xor: (bool, bool) -> bool along 1
    return %y: <3 x 5 x bool>
}

func @s5: (<2 x 3 x 4 x f64>) -> <2 x 3 x 4 x f64> {
'entry(%x: <2 x 3 x 4 x f64>):
    %y = scan %x: <2 x 3 x 4 x f64> by @d: (f64, f64) -> f64 along 0, 1, 2
    return %y: <2 x 3 x 4 x f64>
}

func @s6: (<5 x 1 x f32>) -> <5 x 1 x f32> {
'entry(%x: <5 x 1 x f32>):
    %y = scan %x: <5 x 1 x f32> by @f: (f32, f32) -> f32 along 1
    %z = scan %y: <5 x 1 x f32> by @f: (f32, f32) -> f32 along 0
    %w = negate %z: <5 x 1 x f32>
    return %w: <5 x 1 x f32>
}

func @s7: (<6 x i16>) -> <6 x i16> {
'entry(%x: <6 x i16>):
    %y = scan %x: <6 x i16> by subtract along 0
    return %y: <6 x i16>
}
"""


def _float(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


CASES = [
    ("s1", lambda rng: [_float(rng, (7,), np.float32)]),
    ("s2", lambda rng: [_float(rng, (3, 4, 5), np.float32)]),
    ("s3", lambda rng: [rng.integers(-50, 50, (4, 6)).astype(np.int32)]),
    ("s4", lambda rng: [rng.random((3, 5)) < 0.5]),
    ("s5", lambda rng: [_float(rng, (2, 3, 4), np.float64)]),
    ("s6", lambda rng: [_float(rng, (5, 1), np.float32)]),
    ("s7", lambda rng: [rng.integers(-30000, 30000, 6).astype(np.int16)]),
]


@pytest.fixture(scope="module")
def scans() -> dlc.CompiledModule:
    return dlc.compile(SCANS)


@pytest.mark.parametrize(("name", "make"), CASES)
def test_scan_by_function_matches_reference_bitwise(scans, name: str, make) -> None:  # noqa: ANN001
    args = make(np.random.default_rng(5))
    got = scans[name](*args)
    want = run_function(parse_module(SCANS), name, args)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # bit-equal: the same combination order


def test_scan_by_function_is_not_a_prefix_reduction() -> None:
    """f(a, b) = a/2 - b is not associative: a wrong order would show."""
    mod = dlc.compile(SCANS)
    x = np.array([1, 2, 3, 4, 5, 6, 7], np.float32)
    want = [1.0]
    for v in x[1:]:
        want.append(want[-1] * 0.5 - float(v))
    np.testing.assert_array_equal(mod.s1(x), np.array(want, np.float32))


def test_scan_by_function_at_low_opt_levels_and_bounds_checked() -> None:
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    want = run_function(parse_module(SCANS), "s2", [x])
    for level in (0, 1):
        np.testing.assert_array_equal(dlc.compile(SCANS, opt_level=level).s2(x), want)
    checked = dlc.compile(SCANS, bounds_check=True)
    np.testing.assert_array_equal(checked.s2(x), want)


def test_scan_lowers_to_tensor_scan_per_dimension(scans) -> None:  # noqa: ANN001
    tensor_ir = scans.ir("tensor")
    assert (
        tensor_ir.count("= tensor.scan ") == 1 + 2 + 2 + 1 + 3 + 1 + 1
    )  # s6: none along its size-1 dim
    assert 'by "@f"' in tensor_ir


TRAPPING = """module "t"
stage raw

func @g: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %big = greaterThan %b: f32, 100: f32
    conditional %big: bool then 'bad() else 'ok()
'bad():
    trap
    return 0: f32
'ok():
    %s = add %a: f32, %b: f32
    return %s: f32
}

func @s: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = scan %x: <4 x f32> by @g: (f32, f32) -> f32 along 0
    return %y: <4 x f32>
}
"""


def test_trap_in_scan_combinator_raises_like_reference() -> None:
    mod = dlc.compile(TRAPPING)
    ok = np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(mod.s(ok), run_function(parse_module(TRAPPING), "s", [ok]))
    bad = np.array([1, 2, 300, 4], np.float32)
    with pytest.raises(TrapError):
        run_function(parse_module(TRAPPING), "s", [bad])
    with pytest.raises(TrapError):
        mod.s(bad)
    np.testing.assert_array_equal(mod.s(ok), np.cumsum(ok))  # usable after the trap


REENTRANT = """module "r"
stage raw

func @r: (<1 x f32>) -> f32 {
'entry(%x: <1 x f32>):
    %y = reduce %x: <1 x f32> by @c: (f32, f32) -> f32 init 0: f32 along 0
    return %y: f32
}

func @c: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %t = shapeCast %b: f32 to 1
    %r = apply @r(%t: <1 x f32>): (<1 x f32>) -> f32
    return %r: f32
}

func @inf: (i64) -> i64 {
'entry(%n: i64):
    %m = add %n: i64, 1: i64
    %r = apply @inf(%m: i64): (i64) -> i64
    return %r: i64
}

func @down: (<1 x f32>) -> f32 {
'entry(%x: <1 x f32>):
    %y = reduce %x: <1 x f32> by @dc: (f32, f32) -> f32 init 0: f32 along 0
    return %y: f32
}

func @dc: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %stop = lessThan %b: f32, 1: f32
    conditional %stop: bool then 'done() else 'more()
'done():
    return %b: f32
'more():
    %n = subtract %b: f32, 1: f32
    %t = shapeCast %n: f32 to 1
    %r = apply @down(%t: <1 x f32>): (<1 x f32>) -> f32
    %s = add %r: f32, 1: f32
    return %s: f32
}
"""


def test_reference_combinator_recursion_is_a_depth_error_not_recursion_error() -> None:
    module = parse_module(REENTRANT)
    with pytest.raises(UndefinedBehaviorError, match=r"call depth limit exceeded .* in @"):
        run_function(module, "r", [np.ones(1, np.float32)])
    # bounded re-entry below the limit still works
    depth = np.array([MAX_NESTED_INVOKES // 2 - 2], np.float32)
    assert run_function(module, "down", [depth]) == depth[0]


def test_reference_depth_error_holds_when_python_stack_is_already_deep() -> None:
    """Near the Python recursion limit, the nesting limit alone would not save us: the
    RecursionError is turned into the documented error at the outermost call."""
    module = parse_module(REENTRANT)

    def nest(k: int) -> object:
        return nest(k - 1) if k else run_function(module, "r", [np.ones(1, np.float32)])

    with pytest.raises(UndefinedBehaviorError, match="call depth limit exceeded"):
        nest(700)


def test_compiled_unbounded_recursion_traps_instead_of_crashing() -> None:
    mod = dlc.compile(REENTRANT, filename="r.dl")
    message = rf"r\.dl:\d+:\d+: call depth limit exceeded \({MAX_CALL_DEPTH}\) in @inf"
    for _ in range(2):  # the depth counter is back at 0 after the trap
        with pytest.raises(TrapError, match=message):
            mod.inf(np.int64(0))
    with pytest.raises(TrapError, match="call depth limit exceeded"):
        mod.r(np.ones(1, np.float32))  # through a reduction's function combinator
    assert mod.down(np.array([50], np.float32)) == 50.0
    assert mod.down(np.array([50], np.float32)) == 50.0


def test_compiled_unbounded_recursion_at_opt_level_0() -> None:
    mod = dlc.compile(REENTRANT, opt_level=0)
    with pytest.raises(TrapError, match="call depth limit exceeded"):
        mod.inf(np.int64(0))


def test_seed_without_random_is_harmless() -> None:
    mod = dlc.compile(REENTRANT)
    mod.seed(3)  # documented no-op: the module has no `random`
    with pytest.raises(TypeError):
        mod.seed(1.5)  # type: ignore[arg-type]
