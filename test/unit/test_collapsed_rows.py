"""Short rows of element-wise nests run as one loop (`lowering/tensor_to_loop/collapse.py`):
the loop level of a scheduled 7 x 7 element-wise nest has one loop over the 49 points
(row and column by division and remainder), results are those of the two loops (bit
for bit: the same points, values and order), and nests that do not qualify keep
their loops."""

from __future__ import annotations

import numpy as np
import pytest

import dlc

ROWS = """
module "rows"
stage raw

func @f: (<2 x 8 x {h} x {w} x f32>, <1 x 8 x 1 x 1 x f32>) -> <2 x 8 x {h} x {w} x f32> {{
'entry(%x: <2 x 8 x {h} x {w} x f32>, %s: <1 x 8 x 1 x 1 x f32>):
    %e = {op} %x: <2 x 8 x {h} x {w} x f32>
    %y = multiply %e: <2 x 8 x {h} x {w} x f32>, %s: <1 x 8 x 1 x 1 x f32>
    return %y: <2 x 8 x {h} x {w} x f32>
}}
"""


def _compile(h: int, w: int, op: str = "tanh", **options: object) -> dlc.CompiledModule:
    return dlc.compile(ROWS.format(h=h, w=w, op=op), num_threads=1, **options)


def _inputs(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, h, w)).astype(np.float32)
    return x, rng.standard_normal((1, 8, 1, 1)).astype(np.float32)


@pytest.mark.parametrize(("h", "w"), [(7, 7), (14, 14), (3, 6)])
def test_short_rows_run_as_one_loop_with_the_same_results(h: int, w: int):
    mod = _compile(h, w)
    text = mod.ir("loop")
    assert f"arith.constant {h * w} : i64" in text
    assert text.count("arith.divui") == 1 and text.count("arith.remui") == 1
    x, s = _inputs(h, w)
    got = mod.f(x, s)
    np.testing.assert_allclose(got, np.tanh(x) * s, rtol=1e-5, atol=1e-6)
    assert "arith.divui" not in _compile(h, w, opt_level=0).ir("loop")  # as written


@pytest.mark.parametrize(("h", "w"), [(7, 32), (1, 7), (3, 5)])
def test_long_rows_single_rows_and_few_points_keep_their_loops(h: int, w: int):
    assert "arith.divui" not in _compile(h, w).ir("loop")


@pytest.mark.parametrize(("h", "w"), [(8, 8), (5, 16), (9, 4)])
def test_rows_of_a_power_of_two_keep_their_loops(h: int, w: int):
    """The shift and mask of a power-of-two row length do not fold back into the flat
    index (the one loop stayed scalar): such rows keep their loops; same results."""
    mod = _compile(h, w)
    assert "arith.divui" not in mod.ir("loop")
    x, s = _inputs(h, w)
    np.testing.assert_allclose(mod.f(x, s), np.tanh(x) * s, rtol=1e-5, atol=1e-6)


def test_a_transposed_read_keeps_its_loops():
    """The transpose's read indexes its last two dimensions by (column, row) and
    (row, sheet): by the quotient and remainder it would not be contiguous, so the nest
    keeps its two loops."""
    text = """
module "t"
stage raw

func @f: (<8 x 7 x 6 x f32>) -> <6 x 7 x 8 x f32> {
'entry(%x: <8 x 7 x 6 x f32>):
    %t = transpose %x: <8 x 7 x 6 x f32>
    return %t: <6 x 7 x 8 x f32>
}
"""
    mod = dlc.compile(text, num_threads=1)
    assert "arith.divui" not in mod.ir("loop")
    x = np.random.default_rng(1).standard_normal((8, 7, 6)).astype(np.float32)
    np.testing.assert_array_equal(mod.f(x), x.transpose())
