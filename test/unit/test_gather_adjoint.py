"""Adjoints of the gathers and scatters against central differences (float64) of the
reference interpreter, and the compiled adjoint against the reference adjoint."""

from __future__ import annotations

import numpy as np
import pytest
from autodiff_util import check_gradients, differentiate

import dlc
from dlc.diagnostics import DiagnosticError
from dlc.semantics.interpreter import run_function

RNG = np.random.default_rng(7)


def text(params: list[tuple[str, str]], inst: str, rtype: str, wrt: str) -> str:
    """@f(params) = inst, and `[adjoint @f wrt … seedable]` named @df."""
    sig = ", ".join(t for _, t in params)
    entry = ", ".join(f"%{n}: {t}" for n, t in params)
    return f"""module "m"
stage raw

func @f: ({sig}) -> {rtype} {{
'entry({entry}):
    %y = {inst}
    %z = multiply %y: {rtype}, %y: {rtype}
    return %z: {rtype}
}}

[adjoint @f wrt {wrt} seedable]
func @df: ({sig}, {rtype}) -> ({", ".join(t for i, (_, t) in enumerate(params) if str(i) in wrt.split(", "))})
"""


CASES = [  # params, instruction, result type, wrt, indices (position, value)
    (
        [("t", "<4 x 3 x f64>"), ("i", "<5 x i64>")],
        "gather %t: <4 x 3 x f64> at %i: <5 x i64> along 0",
        "<5 x 3 x f64>",
        "0",
        (1, np.array([0, -1, 2, 0, 3])),
    ),
    (
        [("t", "<2 x 4 x 3 x f64>"), ("i", "<2 x 2 x i32>")],
        "gather %t: <2 x 4 x 3 x f64> at %i: <2 x 2 x i32> along 1",
        "<2 x 2 x 2 x 3 x f64>",
        "0",
        (1, np.array([[1, 1], [-4, 3]], np.int32)),
    ),
    (
        [("t", "<3 x 4 x f64>"), ("i", "<3 x 2 x i64>")],
        "gatherElements %t: <3 x 4 x f64> at %i: <3 x 2 x i64> along 1",
        "<3 x 2 x f64>",
        "0",
        (1, np.array([[0, 0], [3, -1], [2, 1]])),
    ),
    (
        [("t", "<3 x 4 x f64>"), ("i", "<4 x 2 x i64>")],
        "gatherND %t: <3 x 4 x f64> at %i: <4 x 2 x i64>",
        "<4 x f64>",
        "0",
        (1, np.array([[0, 0], [2, 3], [0, 0], [-1, 1]])),
    ),
    (
        [("u", "<2 x 3 x f64>"), ("t", "<4 x 3 x f64>"), ("i", "<2 x 3 x i64>")],
        "scatterElements %u: <2 x 3 x f64> to %t: <4 x 3 x f64> at %i: <2 x 3 x i64> along 0",
        "<4 x 3 x f64>",
        "0, 1",
        (2, np.array([[1, 0, 3], [1, 2, -1]])),  # column 0: two updates to row 1, last wins
    ),
    (
        [("u", "<2 x 3 x f64>"), ("t", "<4 x 3 x f64>"), ("i", "<2 x 3 x i64>")],
        "scatterElements %u: <2 x 3 x f64> to %t: <4 x 3 x f64> at %i: <2 x 3 x i64> along 0 by add",
        "<4 x 3 x f64>",
        "0, 1",
        (2, np.array([[1, 0, 3], [1, 2, -1]])),
    ),
    (
        [("u", "<3 x 2 x f64>"), ("t", "<4 x 2 x f64>"), ("i", "<3 x 1 x i32>")],
        "scatterND %u: <3 x 2 x f64> to %t: <4 x 2 x f64> at %i: <3 x 1 x i32>",
        "<4 x 2 x f64>",
        "0, 1",
        (2, np.array([[2], [0], [2]], np.int32)),  # row 2 written twice: the last wins
    ),
    (
        [("u", "<3 x 2 x f64>"), ("t", "<4 x 2 x f64>"), ("i", "<3 x 1 x i32>")],
        "scatterND %u: <3 x 2 x f64> to %t: <4 x 2 x f64> at %i: <3 x 1 x i32> by add",
        "<4 x 2 x f64>",
        "0, 1",
        (2, np.array([[2], [0], [-2]], np.int32)),
    ),
]


def _args(params: list[tuple[str, str]], index: tuple[int, np.ndarray]) -> list[np.ndarray]:
    args = []
    for k, (_, t) in enumerate(params):
        if k == index[0]:
            args.append(index[1])
            continue
        dims = [int(d) for d in t.strip("<>").split(" x ")[:-1]]
        args.append(RNG.uniform(-1, 1, dims))
    return args


@pytest.mark.parametrize(
    "case", range(len(CASES)), ids=[c[1].split()[0] + str(i) for i, c in enumerate(CASES)]
)
def test_adjoint_matches_central_differences(case: int) -> None:
    params, inst, rtype, wrt, index = CASES[case]
    args = _args(params, index)
    dims = [int(d) for d in rtype.strip("<>").split(" x ")[:-1]]
    seed = RNG.normal(size=dims)
    check_gradients(
        text(params, inst, rtype, wrt),
        "f",
        "df",
        args,
        wrt=[int(w) for w in wrt.split(", ")],
        seed=seed,
    )


def test_compiled_adjoints_equal_the_reference() -> None:
    """One module with every case's primal and adjoint, compiled once."""
    for case in (0, 4, 6):
        params, inst, rtype, wrt, index = CASES[case]
        source = text(params, inst, rtype, wrt)
        args = _args(params, index)
        dims = [int(d) for d in rtype.strip("<>").split(" x ")[:-1]]
        seed = RNG.normal(size=dims)
        compiled = dlc.compile(source)
        got = compiled.df(*args, seed)
        want = run_function(differentiate(source), "df", [*args, seed])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12)


def test_scatter_by_max_has_no_adjoint() -> None:
    params, _, rtype, wrt, _ = CASES[5]
    inst = (
        "scatterElements %u: <2 x 3 x f64> to %t: <4 x 3 x f64> at %i: <2 x 3 x i64> along 0 by max"
    )
    with pytest.raises(DiagnosticError, match="cannot differentiate through 'scatterElements'"):
        differentiate(text(params, inst, rtype, wrt))
