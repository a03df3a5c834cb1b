"""reduceWindow into padding (dlc/lowering/graph_to_tensor/windows.py `_padded`): the
input is copied into a buffer padded with the window's init, and the window reads it
at affine indices. For max, min and products the compiled results equal the reference
interpreter's bit for bit; float sums within 9 eps of the magnitudes (the reference
sums a window with NumPy's reduction order, the compiled code in window order), and
opt_level 0 and 2 agree bit for bit (the schedule keeps each window's order), at 1
and 3 threads, with bounds checks."""

from __future__ import annotations

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.dialects.graph_tensor import window_shape
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function
from dlc.semantics.tensor import window_padding

CASES = [
    ("max", "-inf", "f32", "half", "1, 1, 1, 1"),
    ("add", "0.5", "f32", "full", "1, 1, 2, 2"),
    ("min", "7", "i32", "half", "1, 1, 2, 1"),
    ("add", "0", "f64", "half", "1, 1, 1, 1"),
    ("multiply", "1", "f64", "full", "1, 1, 3, 1"),
]


def _source(comb: str, init: str, dt: str, padding: str, strides: str) -> tuple[str, str]:
    """The program and the type of its padded copy of x."""
    shape, window = (2, 3, 9, 11), (1, 1, 3, 3)
    steps = tuple(int(s) for s in strides.split(","))
    out = window_shape(shape, window, steps, padding)  # DLVM's output size
    pads = window_padding(shape, window, steps, padding, out)  # what the windows reach
    padded = [n + lo + hi for n, (lo, hi) in zip(shape, pads, strict=True)]
    x = f"<{' x '.join(map(str, shape))} x {dt}>"
    y = f"<{' x '.join(map(str, out))} x {dt}>"
    return (
        f'module "w"\nstage raw\nfunc @w: ({x}) -> {y} {{\n'
        f"'entry(%x: {x}):\n"
        f"    %p = reduceWindow %x: {x} by {comb} init {init}: {dt} dims 1, 1, 3, 3 "
        f"strides {strides} padding {padding}\n"
        f"    return %p: {y}\n}}\n"
    ), f"tensor<{'x'.join(map(str, padded))}x{dt}>"


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
@pytest.mark.parametrize("threads", [1, 3])
def test_padded_windows_match_the_reference(case: tuple[str, ...], threads: int) -> None:
    text, padded = _source(*case)
    dt = case[2]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 11))
    x = (x * 4).astype(np.int32) if dt == "i32" else x.astype(dt.replace("f", "float"))
    want = np.asarray(run_function(parse_module(text), "w", [x]))
    compiled = compile_graph_module(parse_module(text), num_threads=threads, bounds_check=True)
    assert f"-> !graph.{padded}" in compiled.ir("tensor")  # the padded copy
    got = compiled["w"](x)
    plain = compile_graph_module(parse_module(text), opt_level=0)["w"](x)
    np.testing.assert_array_equal(got, plain)
    if case[0] == "add":
        scale = np.abs(want).max() + abs(float(case[1])) * 9
        assert np.abs(got - want).max() <= 9 * np.finfo(x.dtype).eps * scale
    else:
        np.testing.assert_array_equal(got, want)
