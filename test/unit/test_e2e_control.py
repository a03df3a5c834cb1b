"""End to end: control flow (multi-block functions, branches with block arguments,
loops, several returns) and calls (recursion, mutual recursion, tuples, extern C
functions), compiled to native code and checked against the reference interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.diagnostics import DiagnosticError
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function

PROGRAM = """
module "control"
stage raw

func @gcd: (i64, i64) -> i64 {
'entry(%a: i64, %b: i64):
    %z = equal %b: i64, 0: i64
    conditional %z: bool then 'done(%a: i64) else 'rec(%a: i64, %b: i64)
'done(%r: i64):
    return %r: i64
'rec(%x: i64, %y: i64):
    %m = modulo %x: i64, %y: i64
    %g = apply @gcd(%y: i64, %m: i64): (i64, i64) -> i64
    return %g: i64
}

func @even: (i64) -> bool {
'entry(%n: i64):
    %z = equal %n: i64, 0: i64
    conditional %z: bool then 'yes() else 'no(%n: i64)
'yes():
    return true: bool
'no(%m: i64):
    %m1 = subtract %m: i64, 1: i64
    %r = apply @odd(%m1: i64): (i64) -> bool
    return %r: bool
}

func @odd: (i64) -> bool {
'entry(%n: i64):
    %z = equal %n: i64, 0: i64
    conditional %z: bool then 'no() else 'yes(%n: i64)
'no():
    return false: bool
'yes(%m: i64):
    %m1 = subtract %m: i64, 1: i64
    %r = apply @even(%m1: i64): (i64) -> bool
    return %r: bool
}

func @repeat: (<3 x 4 x f32>, i64) -> <3 x 4 x f32> {
'entry(%x: <3 x 4 x f32>, %n: i64):
    branch 'head(%x: <3 x 4 x f32>, 0: i64)
'head(%v: <3 x 4 x f32>, %i: i64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body(%v: <3 x 4 x f32>, %i: i64) else 'exit(%v: <3 x 4 x f32>)
'body(%w: <3 x 4 x f32>, %j: i64):
    %sq = multiply %w: <3 x 4 x f32>, %w: <3 x 4 x f32>
    %t = tanh %sq: <3 x 4 x f32>
    %j1 = add %j: i64, 1: i64
    branch 'head(%t: <3 x 4 x f32>, %j1: i64)
'exit(%r: <3 x 4 x f32>):
    return %r: <3 x 4 x f32>
}

func @choose: (<5 x f64>, <5 x f64>) -> <5 x f64> {
'entry(%a: <5 x f64>, %b: <5 x f64>):
    %sa = reduce %a: <5 x f64> by add init 0: f64 along 0
    %sb = reduce %b: <5 x f64> by add init 0: f64 along 0
    %c = greaterThan %sa: f64, %sb: f64
    conditional %c: bool then 'first(%a: <5 x f64>) else 'second(%b: <5 x f64>)
'first(%x: <5 x f64>):
    %e = exp %x: <5 x f64>
    return %e: <5 x f64>
'second(%y: <5 x f64>):
    %n = negate %y: <5 x f64>
    return %n: <5 x f64>
}

func @swap: (f32, f32, i64) -> (f32, f32) {
'entry(%a: f32, %b: f32, %n: i64):
    branch 'head(%a: f32, %b: f32, %n: i64)
'head(%x: f32, %y: f32, %k: i64):
    %c = greaterThan %k: i64, 0: i64
    %k1 = subtract %k: i64, 1: i64
    conditional %c: bool then 'head(%y: f32, %x: f32, %k1: i64) else 'exit(%x: f32, %y: f32)
'exit(%p: f32, %q: f32):
    %t = literal (%p: f32, %q: f32): (f32, f32)
    return %t: (f32, f32)
}

func @stats: (<6 x f32>) -> (f32, (f32, <6 x f32>)) {
'entry(%x: <6 x f32>):
    %s = reduce %x: <6 x f32> by add init 0: f32 along 0
    %m = reduce %x: <6 x f32> by max init -inf: f32 along 0
    %d = subtract %x: <6 x f32>, %m: f32
    %i = literal (%m: f32, %d: <6 x f32>): (f32, <6 x f32>)
    %t = literal (%s: f32, %i: (f32, <6 x f32>)): (f32, (f32, <6 x f32>))
    return %t: (f32, (f32, <6 x f32>))
}

func @use_stats: (<6 x f32>) -> <6 x f32> {
'entry(%x: <6 x f32>):
    %t = apply @stats(%x: <6 x f32>): (<6 x f32>) -> (f32, (f32, <6 x f32>))
    branch 'next(%t: (f32, (f32, <6 x f32>)))
'next(%u: (f32, (f32, <6 x f32>))):
    %s = extract 0 from %u: (f32, (f32, <6 x f32>))
    %d = extract 1, 1 from %u: (f32, (f32, <6 x f32>))
    %r = multiply %d: <6 x f32>, %s: f32
    return %r: <6 x f32>
}

[extern]
func @tanhf: (f32) -> f32

[extern]
func @pow: (f64, f64) -> f64

func @use_extern: (f32, f64) -> (f32, f64) {
'entry(%x: f32, %y: f64):
    %a = apply @tanhf(%x: f32): (f32) -> f32
    %b = apply @pow(%y: f64, 3: f64): (f64, f64) -> f64
    %t = literal (%a: f32, %b: f64): (f32, f64)
    return %t: (f32, f64)
}
"""


@pytest.fixture(scope="module")
def program() -> tuple[Any, Any]:
    module = parse_module(PROGRAM, "control.dl")
    return module, compile_graph_module(module, externs=["tanhf", "pow"])


def _check(program: tuple[Any, Any], name: str, *args: Any, rtol: float = 1e-6) -> None:
    module, compiled = program
    want = run_function(module, name, list(args))
    got = compiled[name](*args)
    flat_want, flat_got = _leaves(want), _leaves(got)
    assert len(flat_want) == len(flat_got)
    for w, g in zip(flat_want, flat_got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol)


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [np.asarray(value)]


@pytest.mark.parametrize(("a", "b"), [(48, 18), (17, 5), (0, 7), (7, 0), (1071, 462)])
def test_recursive_gcd(program: tuple[Any, Any], a: int, b: int) -> None:
    _check(program, "gcd", np.int64(a), np.int64(b))


@pytest.mark.parametrize("n", [0, 1, 10, 37])
def test_mutual_recursion(program: tuple[Any, Any], n: int) -> None:
    _check(program, "even", np.int64(n))
    _check(program, "odd", np.int64(n))


@pytest.mark.parametrize("n", [0, 1, 5])
def test_loop_over_a_tensor(program: tuple[Any, Any], n: int) -> None:
    x = np.random.default_rng(n).uniform(-1.5, 1.5, (3, 4)).astype(np.float32)
    _check(program, "repeat", x, np.int64(n), rtol=1e-5)


def test_conditional_chooses_a_tensor_and_several_returns(program: tuple[Any, Any]) -> None:
    rng = np.random.default_rng(1)
    for _ in range(4):
        _check(program, "choose", rng.normal(size=5), rng.normal(size=5))


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_swapping_block_arguments_is_a_parallel_copy(program: tuple[Any, Any], n: int) -> None:
    _check(program, "swap", np.float32(1.5), np.float32(-2.0), np.int64(n))


def test_calls_returning_nested_tuples(program: tuple[Any, Any]) -> None:
    x = np.random.default_rng(2).normal(size=6).astype(np.float32)
    _check(program, "stats", x, rtol=1e-5)
    _check(program, "use_stats", x, rtol=1e-5)


def test_extern_c_functions_take_scalars_by_value(program: tuple[Any, Any]) -> None:
    _, compiled = program
    a, b = compiled.use_extern(np.float32(0.5), 1.5)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, np.tanh(np.float32(0.5)), rtol=1e-6)
    assert b == pytest.approx(1.5**3)


def test_missing_extern_symbol_is_a_located_error() -> None:
    text = """module "m"
stage raw

[extern]
func @dlc_no_such_symbol: (f32) -> f32

func @f: (f32) -> f32 {
'entry(%x: f32):
    %y = apply @dlc_no_such_symbol(%x: f32): (f32) -> f32
    return %y: f32
}
"""
    with pytest.raises(DiagnosticError) as info:
        compile_graph_module(parse_module(text, "m.dl"), externs=["dlc_no_such_symbol"])
    assert "no symbol 'dlc_no_such_symbol'" in info.value.message
    assert info.value.line == 5


def test_deep_recursion_with_tensors(program: tuple[Any, Any]) -> None:
    _check(program, "even", np.int64(2000))
