"""einsum, topK and topKIndices (dlc's additions to DLVM): the reference interpreter
against NumPy and onnx's TopK, compiled code (after `decompose-composites`) against
the interpreter at opt levels 0 and 2, and the adjoints against central differences."""

from __future__ import annotations

import numpy as np
import pytest
from autodiff_util import check_gradients, differentiate
from onnx.reference.ops.op_topk import topk_sorted_implementation

import dlc
from dlc.diagnostics import DiagnosticError
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function

RNG = np.random.default_rng(11)


def ty(shape, dt="f32"):
    return f"<{' x '.join(map(str, shape))} x {dt}>" if shape else dt


def einsum_text(equation, shapes, dt="f32"):
    terms, out = equation.split("->")
    size = {c: d for t, s in zip(terms.split(","), shapes) for c, d in zip(t, s)}
    rtype = ty([size[c] for c in out], dt)
    params = [f"%a{i}: {ty(s, dt)}" for i, s in enumerate(shapes)]
    sig = ", ".join(ty(s, dt) for s in shapes)
    return (
        f"""module "m"
stage raw

func @f: ({sig}) -> {rtype} {{
'entry({", ".join(params)}):
    %y = einsum "{equation}" {", ".join(params)}
    return %y: {rtype}
}}
""",
        rtype,
    )


EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(3, 2, 5), (3, 5, 4)]),
    ("abc,cd,bd->da", [(2, 3, 4), (4, 5), (3, 5)]),
    ("bii->bi", [(2, 4, 4)]),
    ("ijk,kji->", [(2, 3, 4), (4, 3, 2)]),
    ("i,j->ji", [(3,), (4,)]),
    ("ij->", [(3, 5)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EINSUMS)
def test_einsum_matches_numpy(equation, shapes):
    text, _ = einsum_text(equation, shapes)
    args = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.einsum(equation, *args)
    ref = run_function(parse_module(text, "e.dl"), "f", args)
    np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-5)
    compiled = dlc.compile(text, opt_level=0 if len(shapes) == 1 else 2)
    np.testing.assert_allclose(compiled.f(*args), want, rtol=1e-4, atol=1e-5)


def test_integer_einsum_is_exact():
    text, _ = einsum_text("ij,kj->ik", [(3, 4), (2, 4)], "i32")
    a, b = RNG.integers(-50, 50, (3, 4), np.int32), RNG.integers(-50, 50, (2, 4), np.int32)
    np.testing.assert_array_equal(dlc.compile(text).f(a, b), a @ b.T)


@pytest.mark.parametrize(
    ("equation", "shapes", "wrt"),
    [
        ("ij,jk->ik", [(2, 3), (3, 4)], "0, 1"),
        ("bij,jk,bk->bi", [(2, 3, 4), (4, 5), (2, 5)], "0, 1, 2"),
    ],
)
def test_einsum_adjoint_matches_central_differences(equation, shapes, wrt):
    text, rtype = einsum_text(equation, shapes, "f64")
    params = [ty(s, "f64") for s in shapes]
    wanted = [params[int(w)] for w in wrt.split(", ")]
    text += f"\n[adjoint @f wrt {wrt} seedable]\nfunc @df: ({', '.join(params)}, {rtype}) -> ({', '.join(wanted)})\n"
    args = [RNG.standard_normal(s) for s in shapes]
    seed = RNG.standard_normal(np.einsum(equation, *args).shape)
    module = check_gradients(
        text, "f", "df", args, wrt=[int(w) for w in wrt.split(", ")], seed=seed
    )
    got = dlc.compile(text).df(*args, seed)
    for g, w in zip(got, run_function(module, "df", [*args, seed]), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10)


def test_einsum_with_a_diagonal_cannot_be_differentiated():
    text, rtype = einsum_text("ii->i", [(3, 3)], "f64")
    text += (
        f"\n[adjoint @f wrt 0 seedable]\nfunc @df: (<3 x 3 x f64>, {rtype}) -> (<3 x 3 x f64>)\n"
    )
    with pytest.raises(DiagnosticError, match="cannot differentiate through 'einsum'"):
        differentiate(text)


def top_k_text(shape, count, axis, smallest, dt="f32"):
    out = list(shape)
    out[axis] = count
    tail = " smallest" if smallest else ""
    x, v, i = ty(shape, dt), ty(out, dt), ty(out, "i64")
    return (
        f"""module "m"
stage raw

func @f: ({x}) -> ({v}, {i}) {{
'entry(%x: {x}):
    %v = topK %x: {x} count {count} along {axis}{tail}
    %i = topKIndices %x: {x} count {count} along {axis}{tail}
    %t = literal (%v: {v}, %i: {i}): ({v}, {i})
    return %t: ({v}, {i})
}}
""",
        v,
    )


@pytest.mark.parametrize("smallest", [False, True])
@pytest.mark.parametrize("opt_level", [0, 2])
def test_top_k_orders_ties_and_nans_as_onnx(smallest, opt_level):
    x = np.array([[1, np.nan, 3, 3, -np.inf, np.nan, -0.0], [0, -0.0, 2, 2, 2, 1, np.inf],
                  [5, 4, 3, 2, 1, 0, -1]], np.float32)  # fmt: skip
    text, _ = top_k_text(x.shape, 4, 1, smallest)
    want = topk_sorted_implementation(x, 4, 1, not smallest)
    for got in (
        run_function(parse_module(text, "t.dl"), "f", [x]),
        dlc.compile(text, opt_level=opt_level).f(x),
    ):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_top_k_of_integers_along_the_first_axis():
    x = RNG.integers(0, 4, (6, 3, 2)).astype(np.int64)
    text, _ = top_k_text(x.shape, 3, 0, False, "i64")
    want = topk_sorted_implementation(x, 3, 0, True)
    got = dlc.compile(text).f(x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_top_k_adjoint_scatters_to_the_chosen_positions():
    x = RNG.standard_normal((3, 5))
    text = """module "m"
stage raw

func @f: (<3 x 5 x f64>) -> <3 x 2 x f64> {
'entry(%x: <3 x 5 x f64>):
    %v = topK %x: <3 x 5 x f64> count 2 along 1 smallest
    %w = multiply %v: <3 x 2 x f64>, %v: <3 x 2 x f64>
    return %w: <3 x 2 x f64>
}

[adjoint @f wrt 0 seedable]
func @df: (<3 x 5 x f64>, <3 x 2 x f64>) -> (<3 x 5 x f64>)
"""
    seed = RNG.standard_normal((3, 2))
    check_gradients(text, "f", "df", [x], seed=seed)
    (got,) = dlc.compile(text).df(x, seed)
    want = np.zeros_like(x)
    order = np.argsort(x, axis=1, kind="stable")[:, :2]
    np.put_along_axis(want, order, 2 * np.take_along_axis(x, order, 1) * seed, 1)
    np.testing.assert_allclose(got, want, rtol=1e-12)
