"""Calling compiled functions like Python functions: keyword arguments by DLVM parameter
name, no bool where a number is expected, no finite scalar that becomes inf, and seeds
taken mod 2**64."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dlc
from dlc.lowering.graph_to_tensor.runtime_ops import splitmix64

SOURCE = """module "kw"
stage raw

func @axpy: (f32, <3 x f32>, <3 x f32>) -> <3 x f32> {
'entry(%a: f32, %x: <3 x f32>, %y: <3 x f32>):
    %ax = multiply %a: f32, %x: <3 x f32>
    %r = add %ax: <3 x f32>, %y: <3 x f32>
    return %r: <3 x f32>
}

func @pair: ((f32, <2 x i32>), i64) -> (<2 x i32>, f32) {
'entry(%p: (f32, <2 x i32>), %k: i64):
    %f = extract 0 from %p: (f32, <2 x i32>)
    %v = extract 1 from %p: (f32, <2 x i32>)
    %r = literal (%v: <2 x i32>, %f: f32): (<2 x i32>, f32)
    return %r: (<2 x i32>, f32)
}

func @kinds: (f16, f64, i8, i64, bool) -> f64 {
'entry(%h: f16, %d: f64, %b8: i8, %n: i64, %flag: bool):
    %w = dataTypeCast %h: f16 to f64
    %s = add %w: f64, %d: f64
    return %s: f64
}

func @draw: () -> <4 x f64> {
'entry():
    %r = random 4 from 0.0: f64 upto 1.0: f64
    return %r: <4 x f64>
}
"""

X = np.array([1, 2, 3], np.float32)
Y = np.array([10, 20, 30], np.float32)


@pytest.fixture(scope="module")
def mod():  # noqa: ANN201
    return dlc.compile(SOURCE, filename="kw.dl")


# -- keyword arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {"a": 2.0, "x": X, "y": Y}),
        ((), {"y": Y, "x": X, "a": np.float32(2)}),
        ((2.0,), {"y": Y, "x": X}),
        ((2.0, X), {"y": Y}),
        ((2.0, X, Y), {}),
    ],
)
def test_keywords_and_positionals(mod, args: tuple, kwargs: dict) -> None:  # noqa: ANN001
    np.testing.assert_array_equal(mod.axpy(*args, **kwargs), 2 * X + Y)


def test_keywords_of_a_tuple_parameter(mod) -> None:  # noqa: ANN001
    v, f = mod.pair(k=np.int64(3), p=(np.float32(1.5), np.array([4, 5], np.int32)))
    assert v.tolist() == [4, 5] and f == 1.5


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            (),
            {"a": 2.0, "x": X, "z": Y},
            "axpy() got an unexpected keyword argument 'z' (parameters: a, x, y)",
        ),
        ((2.0, X, Y), {"a": 1.0}, "axpy() got multiple values for argument 'a'"),
        ((2.0,), {"x": X}, "axpy() missing 1 argument: 'y'"),
        ((), {"x": X}, "axpy() missing 2 arguments: 'a', 'y'"),
        ((2.0, X, Y, Y), {"a": 1.0}, "axpy() takes 3 arguments (a, x, y), got 4"),
        (
            (),
            {"a": 2.0, "x": X, "y": Y[:2]},
            "argument 2 (%y) of @axpy: expected <3 x f32>, got float32 array of shape (2,)",
        ),
    ],
)
def test_keyword_errors_name_the_arguments(mod, args: tuple, kwargs: dict, message: str) -> None:  # noqa: ANN001
    error = ValueError if "shape" in message else TypeError
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        mod.axpy(*args, **kwargs)


# -- bools are not numbers ----------------------------------------------------------------


@pytest.mark.parametrize("flag", [True, False, np.True_, np.False_])
@pytest.mark.parametrize(
    ("position", "name", "type_"),
    [(0, "h", "f16"), (1, "d", "f64"), (2, "b8", "i8"), (3, "n", "i64")],
)
def test_bool_for_a_number_is_a_type_error(
    mod, flag: object, position: int, name: str, type_: str
) -> None:  # noqa: ANN001
    args: list[object] = [1.0, 2.0, 3, 4, True]
    args[position] = flag
    message = f"argument {position} (%{name}) of @kinds: expected {type_}, got {type(flag).__name__} {flag!r}"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        mod.kinds(*args)


def test_a_bool_parameter_takes_bools(mod) -> None:  # noqa: ANN001
    for flag in (True, np.False_, 1, 0, np.array(True)):
        assert mod.kinds(1.0, 2.0, 3, 4, flag) == 3.0
    with pytest.raises(
        TypeError, match=r"argument 4 \(%flag\) of @kinds: expected bool, got int 2"
    ):
        mod.kinds(1.0, 2.0, 3, 4, 2)


# -- floats out of range --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "position", "shown"),
    [
        (10**40, 0, "int 10000000000000000000000000000000000000000"),
        (1e39, 0, "float 1e+39"),
        (-(10**39), 0, "int -1000000000000000000000000000000000000000"),
        (np.float64(3.5e38), 0, "float64 np.float64(3.5e+38)"),
        (10**400, 0, f"int {10**400}"),
        (65520.0, 0, "float 65520.0"),  # above f16's largest finite value (65504) after rounding
    ],
)
def test_finite_scalar_beyond_the_float_range_is_a_value_error(
    mod, value: object, position: int, shown: str
) -> None:  # noqa: ANN001
    if isinstance(value, float | np.floating) and abs(value) < 1e5:
        message = f"argument 0 (%h) of @kinds: expected f16, got {shown}, out of the range of f16"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            mod.kinds(value, 2.0, 3, 4, True)
        return
    message = f"argument 0 (%a) of @axpy: expected f32, got {shown}, out of the range of f32"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        mod.axpy(value, X, Y)


def test_largest_finite_values_still_pass(mod) -> None:  # noqa: ANN001
    f32_max = float(np.finfo(np.float32).max)
    assert mod.axpy(f32_max, np.ones(3, np.float32), np.zeros(3, np.float32))[0] == np.float32(
        f32_max
    )
    assert mod.kinds(65504.0, 0.0, 3, 4, True) == 65504.0
    assert mod.kinds(65519.0, 0.0, 3, 4, True) == 65504.0  # rounds down to the largest f16
    assert mod.kinds(1.0, 1e300, 3, 4, True) == 1e300 + 1  # f64 holds it


@pytest.mark.parametrize(
    "value", [float("inf"), -float("inf"), float("nan"), np.float32("inf"), np.float64("nan")]
)
def test_inf_and_nan_pass_through_unchanged(mod, value: object) -> None:  # noqa: ANN001
    got = mod.axpy(value, np.ones(3, np.float32), np.zeros(3, np.float32))
    np.testing.assert_array_equal(got, np.full(3, value, np.float32))
    got = mod.kinds(1.0, value, 3, 4, True)
    np.testing.assert_array_equal(got, np.float64(value) + 1)


# -- seeds ----------------------------------------------------------------------------------


def draws(seed: int) -> list[float]:
    return [(splitmix64(seed, k) >> 11) * 2.0**-53 for k in range(4)]


def test_seed_is_taken_mod_2_64(mod) -> None:  # noqa: ANN001
    """Documented: any int is a seed, taken mod 2**64 (the generator's u64 state word), so
    -1 seeds like 2**64 - 1; dlc-run's --seed follows the same rule."""
    mod.seed(-1)
    negative = mod.draw()
    mod.seed(2**64 - 1)
    assert mod.draw().tolist() == negative.tolist() == draws(2**64 - 1)
    mod.seed(2**64 + 5)
    assert mod.draw().tolist() == draws(5)
    assert dlc.compile(SOURCE, seed=-1).draw().tolist() == negative.tolist()
    with pytest.raises(TypeError, match="^seed: expected an int, got bool$"):
        mod.seed(True)
