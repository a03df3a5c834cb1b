"""dlc-run: any int as --seed, random inputs in the parameter's dtype and within a size
limit, and entries that differentiation defines (`[adjoint ...]`, synthesized `@g_grad`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_cli import ADD_ONE, assert_one_line_error, run, write

from dlc.cli import run_io

GRAD = """module "g"
stage raw

func @f: (<3 x f32>, f32) -> f32 {
'entry(%x: <3 x f32>, %w: f32):
    %y = multiply %x: <3 x f32>, %w: f32
    %s = reduce %y: <3 x f32> by add init 0: f32 along 0
    %t = apply @sq(%s: f32): (f32) -> f32
    return %t: f32
}

func @sq: (f32) -> f32 {
'entry(%a: f32):
    %b = multiply %a: f32, %a: f32
    return %b: f32
}

[adjoint @f]
func @f_grad: (<3 x f32>, f32) -> (<3 x f32>, f32)
"""

TYPES = """module "types"
stage raw

func @big: (<100000 x 200000 x f32>) -> f32 {
'entry(%x: <100000 x 200000 x f32>):
    %s = reduce %x: <100000 x 200000 x f32> by add init 0: f32 along 0, 1
    return %s: f32
}
"""


def outputs(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("output ")]


# -- --seed --------------------------------------------------------------------------------


def test_negative_seed_is_taken_mod_2_64(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "m.dl", ADD_ONE)
    negative = run(capsys, path, "--random-inputs", "--seed", "-1")
    assert (negative.code, negative.err) == (0, "")
    same = run(capsys, path, "--random-inputs", "--seed", str(2**64 - 1))
    assert negative.out == same.out
    x = np.random.default_rng(2**64 - 1).standard_normal(4, dtype=np.float32)
    assert outputs(negative.out) == [repr(x + np.float32(1))]
    assert (
        run(capsys, path, "--random-inputs", "--seed", str(2**64)).out
        == run(capsys, path, "--random-inputs", "--seed", "0").out
    )


# -- random inputs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.bool_]
)
def test_random_inputs_are_made_in_the_dtype(dtype: type) -> None:
    rng = np.random.default_rng(0)
    x = run_io.random_array(rng, (1000,), dtype)
    assert x.dtype == np.dtype(dtype) and x.shape == (1000,)
    if np.dtype(dtype).kind == "i":
        assert x.min() >= -10 and x.max() <= 10 and len(np.unique(x)) == 21
    if np.dtype(dtype).kind == "b":
        assert 400 < x.sum() < 600
    if np.dtype(dtype).kind == "f":
        assert abs(float(x.astype(np.float64).std()) - 1) < 0.1


def test_random_f32_is_drawn_in_f32() -> None:
    """No float64 array the size of the input is made (it was, then cast)."""
    x = run_io.random_array(np.random.default_rng(3), (5,), np.float32)
    np.testing.assert_array_equal(x, np.random.default_rng(3).standard_normal(5, dtype=np.float32))


def test_too_large_random_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = run(capsys, write(tmp_path, "t.dl", TYPES), "--entry", "big", "--random-inputs")
    assert_one_line_error(r, "dlc-run")
    assert r.err == (
        "dlc-run: error: --random-inputs: parameter %x (<100000 x 200000 x f32>) takes "
        "80000000000 bytes, more than the limit of 2147483648; give it with --input x=PATH.npy\n"
    )


def test_the_limit_is_inclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "m.dl", ADD_ONE)  # <4 x f32>: 16 bytes
    monkeypatch.setattr(run_io, "MAX_RANDOM_INPUT_BYTES", 16)
    assert run(capsys, path, "--random-inputs").code == 0
    monkeypatch.setattr(run_io, "MAX_RANDOM_INPUT_BYTES", 15)
    r = run(capsys, path, "--random-inputs")
    assert_one_line_error(r, "dlc-run")
    assert "takes 16 bytes, more than the limit of 15;" in r.err


def test_the_limit_is_2_gib() -> None:
    assert run_io.MAX_RANDOM_INPUT_BYTES == 2**31


# -- entries defined by differentiation ------------------------------------------------------


def test_entry_defined_by_an_adjoint_declaration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.array([1, 2, 3], np.float32)
    w = np.array(0.5, np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    path = write(tmp_path, "g.dl", GRAD)
    r = run(
        capsys,
        path,
        "--entry",
        "f_grad",
        "-i",
        f"x={tmp_path / 'x.npy'}",
        "-i",
        f"%w={tmp_path / 'w.npy'}",
    )
    assert (r.code, r.err) == (0, "")
    # f = (sum(x w))**2 = 9: df/dx = 2 (x . w) w = 3, df/dw = 2 (x . w) sum(x) = 36
    assert r.out.splitlines() == [
        "output 0: <3 x f32>",
        "array([3., 3., 3.], dtype=float32)",
        "output 1: f32",
        "array(36., dtype=float32)",
    ]


def test_synthesized_callee_gradient_is_an_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "g.dl", GRAD)
    r = run(capsys, path, "--entry", "@sq_grad", "--random-inputs")
    assert (r.code, r.err) == (0, "")
    assert r.out.startswith("output 0: f32\n")
    r = run(capsys, path, "--entry", "sq_grad", "--input", "b=x.npy")
    assert_one_line_error(r, "dlc-run")
    assert r.err.startswith("dlc-run: error: --input b: no such parameter (parameters: %a")


def test_without_entry_the_synthesized_functions_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = run(capsys, write(tmp_path, "g.dl", GRAD), "--random-inputs")
    assert r.err == (
        "dlc-run: error: choose a function with --entry (defined functions: @f, @sq, @f_grad, @sq_grad)\n"
    )
