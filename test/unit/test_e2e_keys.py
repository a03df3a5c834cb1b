"""End to end: `extract` / `insert` with every kind of key (integer, `#field`, value)
into tensors, arrays, tuples, structs and nestings of them, against the reference
interpreter; out-of-range value keys (bounds-check builds: a located IndexError; other
builds: the key is clamped into range); `insert` never modifies its container."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function
from dlc.semantics.values import UndefinedBehaviorError

f32, i64, i32 = np.float32, np.int64, np.int32

TEXT = """module "keys"
stage raw

struct $S {
    #a: f32
    #m: <3 x 2 x f32>
    #arr: [3 x <2 x f32>]
}

func @t_get: (<4 x f32>, i64) -> f32 {
'entry(%t: <4 x f32>, %i: i64):
    %e = extract %i: i64 from %t: <4 x f32>
    return %e: f32
}

func @t_get32: (<4 x f32>, i32) -> f32 {
'entry(%t: <4 x f32>, %i: i32):
    %e = extract %i: i32 from %t: <4 x f32>
    return %e: f32
}

func @t_set: (<4 x f32>, f32, i64) -> <4 x f32> {
'entry(%t: <4 x f32>, %v: f32, %i: i64):
    %u = insert %v: f32 to %t: <4 x f32> at %i: i64
    return %u: <4 x f32>
}

func @t_set_keep: (<4 x f32>, f32, i64) -> (<4 x f32>, <4 x f32>, f32) {
'entry(%t: <4 x f32>, %v: f32, %i: i64):
    %u = insert %v: f32 to %t: <4 x f32> at %i: i64
    %old = extract %i: i64 from %t: <4 x f32>
    %r = literal (%u: <4 x f32>, %t: <4 x f32>, %old: f32): (<4 x f32>, <4 x f32>, f32)
    return %r: (<4 x f32>, <4 x f32>, f32)
}

func @m_row: (<3 x 2 x f32>, i64) -> <2 x f32> {
'entry(%m: <3 x 2 x f32>, %i: i64):
    %e = extract %i: i64 from %m: <3 x 2 x f32>
    return %e: <2 x f32>
}

func @m_mixed: (<3 x 2 x f32>, i64) -> f32 {
'entry(%m: <3 x 2 x f32>, %i: i64):
    %e = extract %i: i64, 1 from %m: <3 x 2 x f32>
    return %e: f32
}

func @m_mixed2: (<3 x 2 x f32>, i64) -> f32 {
'entry(%m: <3 x 2 x f32>, %j: i64):
    %e = extract 2, %j: i64 from %m: <3 x 2 x f32>
    return %e: f32
}

func @m_set_row: (<3 x 2 x f32>, <2 x f32>, i64) -> <3 x 2 x f32> {
'entry(%m: <3 x 2 x f32>, %r: <2 x f32>, %i: i64):
    %u = insert %r: <2 x f32> to %m: <3 x 2 x f32> at %i: i64
    return %u: <3 x 2 x f32>
}

func @m_set_both: (<3 x 2 x f32>, f32, i64, i64) -> <3 x 2 x f32> {
'entry(%m: <3 x 2 x f32>, %v: f32, %i: i64, %j: i64):
    %u = insert %v: f32 to %m: <3 x 2 x f32> at %i: i64, %j: i64
    return %u: <3 x 2 x f32>
}

func @m_const: (<3 x 2 x f32>, f32) -> (f32, <3 x 2 x f32>) {
'entry(%m: <3 x 2 x f32>, %v: f32):
    %e = extract 1, 0 from %m: <3 x 2 x f32>
    %u = insert %v: f32 to %m: <3 x 2 x f32> at 2, 1
    %r = literal (%e: f32, %u: <3 x 2 x f32>): (f32, <3 x 2 x f32>)
    return %r: (f32, <3 x 2 x f32>)
}

func @a_get: ([3 x <2 x f32>], i64) -> <2 x f32> {
'entry(%a: [3 x <2 x f32>], %i: i64):
    %e = extract %i: i64 from %a: [3 x <2 x f32>]
    return %e: <2 x f32>
}

func @a_get_elem: ([3 x <2 x f32>], i64, i64) -> f32 {
'entry(%a: [3 x <2 x f32>], %i: i64, %j: i64):
    %e = extract %i: i64, %j: i64 from %a: [3 x <2 x f32>]
    return %e: f32
}

func @a_set: ([3 x <2 x f32>], <2 x f32>, i64) -> [3 x <2 x f32>] {
'entry(%a: [3 x <2 x f32>], %v: <2 x f32>, %i: i64):
    %u = insert %v: <2 x f32> to %a: [3 x <2 x f32>] at %i: i64
    return %u: [3 x <2 x f32>]
}

func @a_set_elem: ([3 x <2 x f32>], f32, i64, i64) -> [3 x <2 x f32>] {
'entry(%a: [3 x <2 x f32>], %v: f32, %i: i64, %j: i64):
    %u = insert %v: f32 to %a: [3 x <2 x f32>] at %i: i64, %j: i64
    return %u: [3 x <2 x f32>]
}

func @a_const: ([3 x <2 x f32>], f32) -> (f32, [3 x <2 x f32>]) {
'entry(%a: [3 x <2 x f32>], %v: f32):
    %e = extract 2, 1 from %a: [3 x <2 x f32>]
    %u = insert %v: f32 to %a: [3 x <2 x f32>] at 0, 1
    %r = literal (%e: f32, %u: [3 x <2 x f32>]): (f32, [3 x <2 x f32>])
    return %r: (f32, [3 x <2 x f32>])
}

func @tup: (f32, <2 x i32>, i32) -> (i32, (f32, <2 x i32>)) {
'entry(%a: f32, %b: <2 x i32>, %v: i32):
    %t = literal (%a: f32, %b: <2 x i32>): (f32, <2 x i32>)
    %e = extract 1, 0 from %t: (f32, <2 x i32>)
    %u = insert %v: i32 to %t: (f32, <2 x i32>) at 1, 1
    %r = literal (%e: i32, %u: (f32, <2 x i32>)): (i32, (f32, <2 x i32>))
    return %r: (i32, (f32, <2 x i32>))
}

func @tup_dyn: (f32, <2 x i32>, i64) -> i32 {
'entry(%a: f32, %b: <2 x i32>, %i: i64):
    %t = literal (%a: f32, %b: <2 x i32>): (f32, <2 x i32>)
    %e = extract 1, %i: i64 from %t: (f32, <2 x i32>)
    return %e: i32
}

func @s_get: ($S, i64, i64) -> (f32, <2 x f32>, f32, <2 x f32>, f32) {
'entry(%s: $S, %i: i64, %j: i64):
    %a = extract #a from %s: $S
    %row = extract #m, %i: i64 from %s: $S
    %x = extract #m, %i: i64, %j: i64 from %s: $S
    %ar = extract #arr, %i: i64 from %s: $S
    %ax = extract #arr, %i: i64, %j: i64 from %s: $S
    %r = literal (%a: f32, %row: <2 x f32>, %x: f32, %ar: <2 x f32>, %ax: f32): (f32, <2 x f32>, f32, <2 x f32>, f32)
    return %r: (f32, <2 x f32>, f32, <2 x f32>, f32)
}

func @s_get_index: ($S, i64) -> f32 {
'entry(%s: $S, %i: i64):
    %x = extract #m, %i: i64, 0 from %s: $S
    return %x: f32
}

func @s_set: ($S, f32, i64, i64) -> ($S, $S, $S) {
'entry(%s: $S, %v: f32, %i: i64, %j: i64):
    %s1 = insert %v: f32 to %s: $S at #m, %i: i64, %j: i64
    %s2 = insert %v: f32 to %s: $S at #arr, %i: i64, %j: i64
    %s3 = insert %v: f32 to %s: $S at #a
    %r = literal (%s1: $S, %s2: $S, %s3: $S): ($S, $S, $S)
    return %r: ($S, $S, $S)
}

func @nested: ([2 x (i64, <3 x i64>)], i64, i64, i64) -> ([2 x (i64, <3 x i64>)], i64) {
'entry(%a: [2 x (i64, <3 x i64>)], %v: i64, %i: i64, %j: i64):
    %u = insert %v: i64 to %a: [2 x (i64, <3 x i64>)] at %i: i64, 1, %j: i64
    %e = extract %i: i64, 1, %j: i64 from %u: [2 x (i64, <3 x i64>)]
    %r = literal (%u: [2 x (i64, <3 x i64>)], %e: i64): ([2 x (i64, <3 x i64>)], i64)
    return %r: ([2 x (i64, <3 x i64>)], i64)
}

func @empty: (<0 x f32>, f32, i64) -> (f32, <0 x f32>) {
'entry(%t: <0 x f32>, %v: f32, %i: i64):
    %e = extract %i: i64 from %t: <0 x f32>
    %u = insert %v: f32 to %t: <0 x f32> at %i: i64
    %r = literal (%e: f32, %u: <0 x f32>): (f32, <0 x f32>)
    return %r: (f32, <0 x f32>)
}
"""

T4 = np.array([1.5, -2.0, 3.25, 4.0], f32)
M = np.arange(6, dtype=f32).reshape(3, 2) + 0.5
ARR = tuple(np.array([10 * k + 1, 10 * k + 2], f32) for k in range(3))
TUP = (f32(2.5), np.array([7, -8], np.int32))
S = (f32(9.5), M, ARR)
M_SET = M.copy()
M_SET[2, 0] = -3  # m_set_both at (3, -1), clamped to (2, 0)
NESTED = tuple((i64(k), np.array([k, k + 1, k + 2], np.int64)) for k in range(2))


def _in_range_cases() -> list[tuple[str, tuple]]:
    cases: list[tuple[str, tuple]] = []
    for i in range(4):
        cases += [("t_get", (T4, i64(i))), ("t_set", (T4, f32(-7), i64(i)))]
        cases += [("t_get32", (T4, i32(i))), ("t_set_keep", (T4, f32(8), i64(i)))]
    for i in range(3):
        cases += [("m_row", (M, i64(i))), ("m_mixed", (M, i64(i))), ("a_get", (ARR, i64(i)))]
        cases += [("m_set_row", (M, np.array([-1, -2], f32), i64(i)))]
        cases += [("a_set", (ARR, np.array([-1, -2], f32), i64(i))), ("s_get_index", (S, i64(i)))]
        for j in range(2):
            cases += [("m_set_both", (M, f32(-3), i64(i), i64(j)))]
            cases += [("a_get_elem", (ARR, i64(i), i64(j)))]
            cases += [("a_set_elem", (ARR, f32(-4), i64(i), i64(j)))]
            cases += [("s_get", (S, i64(i), i64(j))), ("s_set", (S, f32(-5), i64(i), i64(j)))]
    for j in range(2):
        cases += [("m_mixed2", (M, i64(j))), ("tup_dyn", (*TUP, i64(j)))]
        for i in range(2):
            cases += [("nested", (NESTED, i64(99), i64(i), i64(j)))]
    cases += [("m_const", (M, f32(-6))), ("a_const", (ARR, f32(-6))), ("tup", (*TUP, i32(5)))]
    return cases


CASES = _in_range_cases()


@pytest.fixture(scope="module")
def module():  # noqa: ANN201
    return parse_module(TEXT, "keys.dl")


@pytest.fixture(scope="module")
def compiled() -> dlc.CompiledModule:  # type: ignore[name-defined]
    # explicitly unchecked (also under DLC_BOUNDS_CHECK=1): the clamping tests need it
    return dlc.compile(TEXT, filename="keys.dl", bounds_check=False)


@pytest.fixture(scope="module")
def checked() -> dlc.CompiledModule:  # type: ignore[name-defined]
    return dlc.compile(TEXT, filename="keys.dl", bounds_check=True)


def _same(got: object, want: object) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    else:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _copy(value: object) -> object:
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return np.array(value, copy=True)


@pytest.mark.parametrize(
    ("name", "args"), CASES, ids=[f"{n}-{k}" for k, (n, _) in enumerate(CASES)]
)
def test_keys_match_reference(module, compiled, checked, name: str, args: tuple) -> None:  # noqa: ANN001
    want = run_function(module, name, args)
    before = _copy(args)
    _same(compiled[name](*args), want)
    _same(checked[name](*args), want)
    _same(args, before)  # insert never writes into its container


def test_insert_keeps_the_original_value(compiled) -> None:  # noqa: ANN001
    t = T4.copy()
    updated, original, old = compiled.t_set_keep(t, f32(8), i64(2))
    np.testing.assert_array_equal(updated, [1.5, -2.0, 8.0, 4.0])
    np.testing.assert_array_equal(original, T4)  # later uses see the old value
    assert old == f32(3.25)
    np.testing.assert_array_equal(t, T4)  # the caller's array is unchanged


OUT_OF_RANGE = [
    ("t_get", (T4, i64(4)), 4.0),
    ("t_get", (T4, i64(-1)), 1.5),
    ("t_get32", (T4, i32(-100)), 1.5),
    ("t_get", (T4, i64(-(2**63))), 1.5),
    ("t_get", (T4, i64(2**63 - 1)), 4.0),
    ("t_set", (T4, f32(-7), i64(9)), [1.5, -2.0, 3.25, -7.0]),
    ("t_set", (T4, f32(-7), i64(-3)), [-7.0, -2.0, 3.25, 4.0]),
    ("m_mixed", (M, i64(5)), M[2, 1]),
    ("m_mixed2", (M, i64(2)), M[2, 1]),
    ("m_set_both", (M, f32(-3), i64(3), i64(-1)), M_SET),
    ("a_get", (ARR, i64(3)), ARR[2]),
    ("a_get_elem", (ARR, i64(-1), i64(2)), ARR[0][1]),
    ("tup_dyn", (*TUP, i64(7)), TUP[1][1]),
    ("s_get_index", (S, i64(-4)), M[0, 0]),
]


@pytest.mark.parametrize(("name", "args", "clamped"), OUT_OF_RANGE)
def test_out_of_range_key(module, compiled, checked, name, args, clamped) -> None:  # noqa: ANN001
    with pytest.raises(UndefinedBehaviorError):
        run_function(module, name, args)
    with pytest.raises(
        IndexError, match=r"^keys\.dl:\d+:\d+: out-of-bounds (extract|insert) index -?\d+ into "
    ) as caught:
        checked[name](*args)
    index = int(str(caught.value).split(" index ")[1].split()[0])
    assert index in {int(a) for a in args if isinstance(a, np.integer)}  # the offending key
    before = _copy(args)
    got = compiled[name](*args)  # no crash: the key is clamped into range
    _same(args, before)
    np.testing.assert_array_equal(got, clamped)
    assert checked.t_get(T4, i64(1)) == f32(-2.0)  # the status was reset


def test_out_of_range_into_an_array_insert(compiled, checked) -> None:  # noqa: ANN001
    with pytest.raises(IndexError, match=r"out-of-bounds insert index 3 into \[3 x <2 x f32>\]$"):
        checked.a_set_elem(ARR, f32(1), i64(3), i64(0))
    got = compiled.a_set_elem(ARR, f32(1), i64(3), i64(5))
    _same(got, (ARR[0], ARR[1], np.array([21, 1], f32)))


def test_empty_dimension(compiled, checked) -> None:  # noqa: ANN001
    empty = np.zeros(0, f32)
    e, u = compiled.empty(empty, f32(1), i64(0))
    assert e == 0 and u.shape == (0,)
    with pytest.raises(IndexError, match=r"out-of-bounds extract index 0 into <0 x f32>$"):
        checked.empty(empty, f32(1), i64(0))


def test_no_value_key_error_left() -> None:
    text = dlc.compile(TEXT, filename="keys.dl").ir("tensor")
    assert "tensor.index_check" in text
