"""Helpers of test_autodiff.py: run `differentiate`, compare with central differences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from dlc.dialects.graph_verify import verify_module
from dlc.parser import parse_module, print_module
from dlc.passes.graph.differentiate import DifferentiatePass
from dlc.semantics.interpreter import run_function

EPS, RTOL, ATOL = 1e-6, 1e-3, 1e-5


def differentiate(text: str) -> ModuleOp:
    """Parse, differentiate, verify and check that the result re-parses."""
    module = parse_module(text, "autodiff.dl")
    DifferentiatePass().apply(Context(), module)
    verify_module(module)
    module.verify()
    return parse_module(print_module(module), "printed.dl")


def numeric_gradient(
    module: ModuleOp,
    name: str,
    args: Sequence[np.ndarray],
    i: int,
    seed: np.ndarray | float = 1.0,
    source: int | None = None,
) -> np.ndarray:
    """d<seed, f(args)>/d args[i] by central differences."""

    def value(xs: list[np.ndarray]) -> float:
        out = run_function(module, name, xs)
        if source is not None:
            out = out[source]
        return float(np.sum(np.asarray(out, dtype=np.float64) * seed))

    x = np.array(args[i], dtype=np.float64)
    grad = np.zeros_like(x)
    flat = grad.reshape(-1)
    for k in range(x.size):
        plus, minus = x.copy(), x.copy()
        plus.reshape(-1)[k] += EPS
        minus.reshape(-1)[k] -= EPS
        lo = [*args[:i], minus, *args[i + 1 :]]
        hi = [*args[:i], plus, *args[i + 1 :]]
        flat[k] = (value(hi) - value(lo)) / (2 * EPS)
    return grad


def check_gradients(
    text: str,
    primal: str,
    adjoint: str,
    args: Sequence[np.ndarray],
    wrt: Sequence[int] | None = None,
    source: int | None = None,
    seed: np.ndarray | None = None,
) -> ModuleOp:
    """The adjoint's derivatives equal the central differences of the primal."""
    module = differentiate(text)
    wrt = list(range(len(args))) if wrt is None else list(wrt)
    call_args = [*args, seed] if seed is not None else list(args)
    got = run_function(module, adjoint, call_args)
    for k, i in enumerate(wrt):
        want = numeric_gradient(module, primal, args, i, 1.0 if seed is None else seed, source)
        np.testing.assert_allclose(
            np.asarray(got[k], np.float64), want, rtol=RTOL, atol=ATOL, err_msg=f"d/d arg {i}"
        )
    return module
