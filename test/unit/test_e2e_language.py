"""End to end: every function of examples/language_tour.dl (recursion, loops, tensor
conditionals, tuple results, globals across calls, structs, enums, pointers, stack
memory, boxes, bitCast) against the reference interpreter; pointer arguments as NumPy
buffers; a bounds-checked out-of-range `load` through `elementPointer`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.parser import parse_module
from dlc.semantics.interpreter import Interpreter, run_function

TOUR = Path(__file__).resolve().parents[2] / "examples" / "language_tour.dl"
TEXT = TOUR.read_text()
f32, i64 = np.float32, np.int64
V4 = np.array([0.5, -1.0, 2.0, 0.25], f32)

CASES = [
    ("gcd", (i64(48), i64(18))),
    ("gcd", (i64(17), i64(5))),
    ("even", (i64(10),)),
    ("odd", (i64(7),)),
    ("even", (i64(7),)),
    ("repeat_tanh", (V4, i64(3))),
    ("repeat_tanh", (V4, i64(0))),
    ("choose", (np.bool_(True), V4, V4 * 2)),
    ("choose", (np.bool_(False), V4, V4 * 2)),
    ("min_max", (V4,)),
    ("range", (V4,)),
    ("make_point", (f32(2), V4[:3].copy())),
    ("norm_point", ((f32(3), V4[:3].copy()),)),
    ("maybe_half", (f32(3),)),
    ("maybe_half", (f32(-3),)),
    ("unwrap_or", (("some", (f32(1.5), i64(2))), f32(9))),
    ("unwrap_or", (("none", ()), f32(9))),
    ("stack_sum", (f32(1.25), f32(2))),
    ("boxed", (f32(4),)),
    ("bits", (f32(1.5),)),
]


@pytest.fixture(scope="module")
def compiled() -> dlc.CompiledModule:  # type: ignore[name-defined]
    return dlc.compile(TEXT, filename="language_tour.dl")


def _same(got: object, want: object) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    elif isinstance(want, str):
        assert got == want
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


@pytest.mark.parametrize(
    ("name", "args"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)]
)
def test_tour_matches_reference(compiled, name: str, args: tuple) -> None:
    module = parse_module(TEXT, "language_tour.dl")
    _same(compiled[name](*args), run_function(module, name, list(args)))


def test_globals_persist_across_calls(compiled) -> None:
    interp = Interpreter(parse_module(TEXT, "language_tour.dl"))
    fresh = dlc.compile(TEXT, filename="language_tour.dl")
    for value in (1.5, 2.0, -0.25):
        _same(fresh.accumulate(f32(value)), interp.call("accumulate", [f32(value)]))


def test_pointer_argument_is_a_numpy_buffer_written_in_place(compiled) -> None:
    buf = np.arange(4, dtype=f32)
    assert compiled.scale_at(buf, i64(2), f32(10)) == 20.0
    np.testing.assert_array_equal(buf, [0, 1, 20, 3])
    with pytest.raises(TypeError, match=r"argument 0 \(%p\) of @scale_at"):
        compiled.scale_at(np.arange(4, dtype=np.float64), i64(0), f32(1))
    with pytest.raises(TypeError, match=r"argument 0 \(%m\) of @unwrap_or"):
        compiled.unwrap_or(("maybe", ()), f32(1))
    with pytest.raises(TypeError, match=r"%d"):
        compiled.unwrap_or(("none", ()), "x")


def test_bounds_checked_load_through_element_pointer() -> None:
    checked = dlc.compile(TEXT, filename="language_tour.dl", bounds_check=True)
    buf = np.arange(4, dtype=f32)
    assert checked.scale_at(buf, i64(3), f32(2)) == 6.0
    with pytest.raises(IndexError, match=r"^language_tour\.dl:\d+:\d+: out-of-bounds load"):
        checked.scale_at(buf, i64(4), f32(2))
    np.testing.assert_array_equal(buf, [0, 1, 2, 6])  # nothing written past the check
    assert checked.scale_at(buf, i64(0), f32(2)) == 0.0  # status was reset


def test_bitcast_size_mismatch_is_a_located_error() -> None:
    text = 'module "m"\nstage raw\n\nfunc @f: (f32) -> i64 {\n\'entry(%a: f32):\n    %b = bitCast %a: f32 to i64\n    return %b: i64\n}\n'
    with pytest.raises(dlc.DiagnosticError) as info:  # type: ignore[attr-defined]
        dlc.compile(text, filename="m.dl")
    assert "differ in size" in info.value.message
    assert info.value.line == 6
