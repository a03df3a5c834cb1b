"""Regression tests: programs that once compiled to wrong results, against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import dlc
from dlc.runtime.compiled import compile_graph_module
from dlc.runtime.reference import run_function

HERE = Path(__file__).parent


def test_fused_nest_does_not_overwrite_a_buffer_it_still_reads() -> None:
    """plan-memory once gave `%g = tanh %g0` the bytes of `%f` in place, although the fused
    nest that stores g reads f (for `%fc = multiply %f, %c`) after that store."""
    module = dlc.parse((HERE / "regress_fused_inplace.dl").read_text(), "regress_fused_inplace.dl")
    rng = np.random.default_rng(1)
    shapes = [(4, 16), (4, 8), (4, 8), (16, 32), (8, 32), (1, 32), (4, 8)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    expected = run_function(module, "cg", args)
    compiled = compile_graph_module(module)
    np.testing.assert_allclose(compiled.cg(*args), expected, rtol=1e-5, atol=1e-6)
