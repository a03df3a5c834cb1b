"""Gradient checks of the `differentiate` pass against float64 central differences.

Every rule of dlc/passes/graph/autodiff/adjoint_rules.py is checked on random inputs away from kinks
with the reference interpreter (eps 1e-6, rtol 1e-3, atol 1e-5); the MLP and LSTM
examples also run through the JIT (`compile_graph_module`).
"""

from __future__ import annotations

import numpy as np
import pytest
from autodiff_util import check_gradients, differentiate

from dlc.diagnostics import DiagnosticError
from dlc.dialects.graph import FuncOp
from dlc.semantics.interpreter import run_function

RNG = np.random.default_rng(1234)


def fn_text(
    params: list[tuple[str, str]], body: str, result: str, rtype: str, decl: str = "seedable"
) -> str:
    """A module with @f(params) -> rtype and `[adjoint @f <decl>]` named @df."""
    sig = ", ".join(t for _, t in params)
    entry = ", ".join(f"%{n}: {t}" for n, t in params)
    lines = "\n".join("    " + line.strip() for line in body.strip().splitlines())
    return f"""module "m"
stage raw

func @f: ({sig}) -> {rtype} {{
'entry({entry}):
{lines}
    return %{result}: {rtype}
}}

[adjoint @f {decl}]
func @df: {{DF}}
"""


def with_adjoint_type(text: str) -> str:
    """Fill in the adjoint's type from the verifier's error message."""
    from dlc.parser import parse_module

    try:
        parse_module(text.replace("{DF}", "() -> ()"))
    except DiagnosticError as err:
        expected = str(err).splitlines()[0].split("expected ")[-1].strip()
        return text.replace("{DF}", expected)
    raise AssertionError("the placeholder type should not verify")


def shape_of(t: str) -> tuple[int, ...]:
    t = t.strip("<>")
    return tuple(int(d) for d in t.split(" x ")[:-1]) if "x" in t else ()


def check(
    params: list[tuple[str, str]],
    body: str,
    result: str,
    rtype: str,
    *,
    low: float = -1.0,
    high: float = 1.0,
    args: list[np.ndarray] | None = None,
) -> None:
    """Seeded adjoint of @f w.r.t. all args vs central differences, random seed."""
    text = with_adjoint_type(fn_text(params, body, result, rtype))
    if args is None:
        args = [RNG.uniform(low, high, shape_of(t)) for _, t in params]
    seed = RNG.normal(size=shape_of(rtype))
    check_gradients(text, "f", "df", args, seed=seed)


M23 = "<2 x 3 x f64>"


# -- element-wise ------------------------------------------------------------------------

UNARY = "negate sign square sqrt rsqrt exp log sin cos tan sinh cosh tanh asin acos atan erf erfc lgamma round rint ceil floor"


@pytest.mark.parametrize("op", UNARY.split())
def test_unary(op: str) -> None:
    x = RNG.uniform(0.2, 0.8, (2, 3)) + 0.0137  # inside every domain, away from kinks
    check([("x", M23)], f"%y = {op} %x: {M23}", "y", M23, args=[x])


BROADCASTS = [
    (M23, M23),
    (M23, "f64"),
    ("f64", M23),
    (M23, "<1 x 3 x f64>"),
    ("<2 x 1 x f64>", M23),
    ("<2 x 1 x f64>", "<1 x 3 x f64>"),
]


@pytest.mark.parametrize("op", "add subtract multiply divide power min max".split())
@pytest.mark.parametrize("types", BROADCASTS)
def test_binary_with_broadcast(op: str, types: tuple[str, str]) -> None:
    a, b = types
    args = [RNG.uniform(0.5, 1.5, shape_of(a)), RNG.uniform(0.5, 1.5, shape_of(b))]
    out = "<2 x 3 x f64>" if (a, b) != ("f64", "f64") else "f64"
    check([("x", a), ("y", b)], f"%z = {op} %x: {a}, %y: {b}", "z", out, args=args)


def test_same_operand_twice_accumulates() -> None:
    check(
        [("x", M23)], f"%y = multiply %x: {M23}, %x: {M23}\n%z = add %y: {M23}, %x: {M23}", "z", M23
    )


def test_select_routes_through_chosen_values() -> None:
    body = f"""
        %m = greaterThan %x: {M23}, %y: {M23}
        %z = select %x: {M23}, %y: {M23} by %m: <2 x 3 x bool>
        %w = multiply %z: {M23}, %x: {M23}
    """
    check([("x", M23), ("y", M23)], body, "w", M23)


def test_select_with_scalar_operand() -> None:
    body = f"""
        %m = greaterThan %x: {M23}, 0: f64
        %z = select %x: {M23}, %s: f64 by %m: <2 x 3 x bool>
    """
    check([("x", M23), ("s", "f64")], body, "z", M23)


def test_data_type_cast_between_floats() -> None:
    body = """
        %y = dataTypeCast %x: <2 x 3 x f32> to f64
        %z = multiply %y: <2 x 3 x f64>, %y: <2 x 3 x f64>
    """
    args = [RNG.uniform(-1, 1, (2, 3)).astype(np.float32)]
    text = with_adjoint_type(fn_text([("x", "<2 x 3 x f32>")], body, "z", M23))
    module = differentiate(text)
    seed = RNG.normal(size=(2, 3))
    (got,) = run_function(module, "df", [*args, seed])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 2 * args[0].astype(np.float64) * seed, rtol=1e-5)


# -- linear algebra and reductions -----------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "out"),
    [
        ("<2 x 3 x f64>", "<3 x 4 x f64>", "<2 x 4 x f64>"),
        ("<2 x 2 x 3 x f64>", "<2 x 3 x 4 x f64>", "<2 x 2 x 4 x f64>"),
        ("<3 x 2 x 2 x 3 x f64>", "<3 x 2 x 3 x 1 x f64>", "<3 x 2 x 2 x 1 x f64>"),
        ("<5 x f64>", "<5 x f64>", "f64"),
    ],
)
def test_dot(a: str, b: str, out: str) -> None:
    check([("x", a), ("y", b)], f"%z = dot %x: {a}, %y: {b}", "z", out)


def test_transpose() -> None:
    check(
        [("x", "<2 x 3 x 4 x f64>")],
        "%y = transpose %x: <2 x 3 x 4 x f64>",
        "y",
        "<4 x 3 x 2 x f64>",
    )


@pytest.mark.parametrize("comb", ["add", "multiply", "max", "min"])
@pytest.mark.parametrize(
    ("dims", "out"),
    [("0", "<3 x 4 x f64>"), ("1", "<2 x 4 x f64>"), ("0, 2", "<3 x f64>"), ("0, 1, 2", "f64")],
)
def test_reduce(comb: str, dims: str, out: str) -> None:
    x = RNG.permutation(24).reshape(2, 3, 4) / 24.0 + 0.5  # distinct values: no ties
    init = {"add": 0, "multiply": 1, "max": -100, "min": 100}[comb]
    body = f"%y = reduce %x: <2 x 3 x 4 x f64> by {comb} init {init}: f64 along {dims}"
    check([("x", "<2 x 3 x 4 x f64>")], body, "y", out, args=[x])


def test_reduce_add_with_varied_init() -> None:
    body = "%y = reduce %x: <2 x 3 x f64> by add init %s: f64 along 1"
    check([("x", M23), ("s", "f64")], body, "y", "<2 x f64>")


@pytest.mark.parametrize("init", [1, 2.5])
@pytest.mark.parametrize(
    ("dims", "out"), [("1", "<2 x 4 x f64>"), ("0, 2", "<3 x f64>"), ("0, 1, 2", "f64")]
)
def test_reduce_multiply_with_exact_zeros(init: float, dims: str, out: str) -> None:
    """One zero and two zeros in a reduced fiber: the gradient is the product of the others."""
    x = RNG.uniform(0.5, 1.5, (2, 3, 4))
    x[0, 1, 2] = 0.0  # the only zero of its fiber along 1
    x[1, 0, 3] = x[1, 2, 3] = 0.0  # two zeros in one fiber along 1
    body = f"%y = reduce %x: <2 x 3 x 4 x f64> by multiply init {init}: f64 along {dims}"
    check([("x", "<2 x 3 x 4 x f64>")], body, "y", out, args=[x])


def test_reduce_multiply_gradient_at_zeros_is_exact() -> None:
    """d/dx prod(x) = prod of the others: finite at zeros, no 0/0 from dividing by x."""
    body = "%y = reduce %x: <2 x 3 x f64> by multiply init 1: f64 along 1"
    text = with_adjoint_type(fn_text([("x", M23)], body, "y", "<2 x f64>", decl=""))
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    (dx,) = run_function(differentiate(text), "df", [x])
    np.testing.assert_array_equal(dx, [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("comb", "x"), [("max", [[1, 3, 3], [2, 0, 1]]), ("min", [[1, 1, 1], [2, 0, 1]])]
)
def test_reduce_extremum_splits_ties_evenly(comb: str, x: list[list[float]]) -> None:
    body = f"%y = reduce %x: <2 x 3 x f64> by {comb} init {'-100' if comb == 'max' else '100'}: f64 along 1"
    text = with_adjoint_type(fn_text([("x", M23)], body, "y", "<2 x f64>"))
    seed = np.array([0.6, -1.5])
    (dx,) = run_function(differentiate(text), "df", [np.array(x, np.float64), seed])
    want = {"max": [[0, 0.3, 0.3], [-1.5, 0, 0]], "min": [[0.2, 0.2, 0.2], [0, -1.5, 0]]}
    np.testing.assert_allclose(dx, want[comb])


@pytest.mark.parametrize("op", ["max", "min"])
def test_elementwise_extremum_splits_ties_evenly(op: str) -> None:
    body = f"%z = {op} %x: <3 x f64>, %y: <3 x f64>"
    text = with_adjoint_type(
        fn_text([("x", "<3 x f64>"), ("y", "<3 x f64>")], body, "z", "<3 x f64>")
    )
    x, y, seed = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 4.0]), np.array([2.0, 4.0, 8.0])
    dx, dy = run_function(differentiate(text), "df", [x, y, seed])
    x_wins = [0, 4, 0] if op == "max" else [0, 0, 8]
    np.testing.assert_allclose(dx, np.array(x_wins) + [1, 0, 0])
    np.testing.assert_allclose(dy, seed - x_wins - [1, 0, 0])


@pytest.mark.parametrize(
    ("a", "b", "axis", "out"),
    [
        ("<2 x 3 x f64>", "<1 x 3 x f64>", 0, "<3 x 3 x f64>"),
        ("<2 x 3 x f64>", "<2 x 2 x f64>", 1, "<2 x 5 x f64>"),
        ("<2 x 3 x 2 x f64>", "<2 x 1 x 2 x f64>", 1, "<2 x 4 x 2 x f64>"),
        ("<2 x 3 x 2 x f64>", "<2 x 3 x 3 x f64>", 2, "<2 x 3 x 5 x f64>"),
    ],
)
def test_concatenate(a: str, b: str, axis: int, out: str) -> None:
    body = (
        f"%z = concatenate %x: {a}, %y: {b}, %x: {a} along {axis}"
        if a == b
        else f"%z = concatenate %x: {a}, %y: {b} along {axis}"
    )
    check([("x", a), ("y", b)], body, "z", out)


@pytest.mark.parametrize(("lo", "hi"), [(0, 1), (1, 2), (2, 3), (0, 3)])
def test_slice(lo: int, hi: int) -> None:
    out = f"<{hi - lo + 1} x 3 x f64>"
    check([("x", "<4 x 3 x f64>")], f"%y = slice %x: <4 x 3 x f64> from {lo} upto {hi}", "y", out)


def test_reverse() -> None:
    check(
        [("x", "<2 x 3 x 4 x f64>")],
        "%y = reverse %x: <2 x 3 x 4 x f64> along 0, 2",
        "y",
        "<2 x 3 x 4 x f64>",
    )


def test_shape_ops() -> None:
    body = """
        %a = shapeCast %x: <2 x 3 x f64> to 3 x 2
        %b = padShape %a: <3 x 2 x f64> at 1
        %c = squeezeShape %b: <3 x 1 x 2 x f64> at 1
        %d = padShape %c: <3 x 2 x f64> at 0
        %e = multiply %d: <1 x 3 x 2 x f64>, %d: <1 x 3 x 2 x f64>
    """
    check([("x", M23)], body, "e", "<1 x 3 x 2 x f64>")


def test_tensor_literal_and_extract() -> None:
    body = """
        %v = literal <%a: f64, %b: f64, %a: f64>: <3 x f64>
        %s = exp %v: <3 x f64>
        %e = extract 1 from %s: <3 x f64>
        %m = extract 0 from %x: <2 x 3 x f64>
        %p = multiply %m: <3 x f64>, %e: f64
        %q = add %p: <3 x f64>, %s: <3 x f64>
    """
    check([("a", "f64"), ("b", "f64"), ("x", M23)], body, "q", "<3 x f64>")


def test_tuple_literal_and_extract() -> None:
    body = """
        %t = literal (%a: f64, %x: <2 x 3 x f64>): (f64, <2 x 3 x f64>)
        %u = extract 1 from %t: (f64, <2 x 3 x f64>)
        %w = extract 0 from %t: (f64, <2 x 3 x f64>)
        %v = multiply %u: <2 x 3 x f64>, %w: f64
        %r = extract 1, 1, 2 from %t: (f64, <2 x 3 x f64>)
        %z = multiply %v: <2 x 3 x f64>, %r: f64
    """
    check([("a", "f64"), ("x", M23)], body, "z", M23)


# -- declarations: wrt, keeping, seedable, from --------------------------------------------

TUPLE_FN = """module "m"
stage raw

func @t: (f64, <3 x f64>) -> (f64, <3 x f64>) {
'entry(%a: f64, %x: <3 x f64>):
    %y = multiply %x: <3 x f64>, %a: f64
    %s = sin %y: <3 x f64>
    %r = reduce %s: <3 x f64> by add init 0: f64 along 0
    %o = literal (%r: f64, %y: <3 x f64>): (f64, <3 x f64>)
    return %o: (f64, <3 x f64>)
}
"""


def test_from_keeping_seedable() -> None:
    text = (
        TUPLE_FN
        + """
[adjoint @t from 1 wrt 0, 1 keeping 0, 1 seedable]
func @dt1: (f64, <3 x f64>, <3 x f64>) -> (f64, <3 x f64>, f64, <3 x f64>)

[adjoint @t from 0 wrt 1]
func @dt0: (f64, <3 x f64>) -> (<3 x f64>)
"""
    )
    a, x, seed = np.array(0.7), RNG.uniform(-1, 1, 3), RNG.normal(size=3)
    module = check_gradients(text, "t", "dt1", [a, x], source=1, seed=seed)
    got = run_function(module, "dt1", [a, x, seed])
    r, y = run_function(module, "t", [a, x])
    np.testing.assert_allclose(got[2], r)
    np.testing.assert_allclose(got[3], y)
    check_gradients(text, "t", "dt0", [a, x], wrt=[1], source=0)


def test_default_seed_is_ones_and_wrt_subset() -> None:
    body = f"%y = multiply %x: {M23}, %w: {M23}\n%z = exp %y: {M23}"
    text = with_adjoint_type(
        fn_text([("x", M23), ("w", M23)], body, "z", M23, decl="wrt 1 keeping 0")
    )
    x, w = RNG.uniform(-1, 1, (2, 3)), RNG.uniform(-1, 1, (2, 3))
    module = check_gradients(text, "f", "df", [x, w], wrt=[1])
    dw, kept = run_function(module, "df", [x, w])
    np.testing.assert_allclose(dw, x * np.exp(x * w))
    np.testing.assert_allclose(kept, np.exp(x * w))


def test_unused_argument_gets_zero() -> None:
    text = with_adjoint_type(
        fn_text([("x", M23), ("u", "f64")], f"%y = exp %x: {M23}", "y", M23, decl="")
    )
    module = differentiate(text)
    dx, du = run_function(module, "df", [np.zeros((2, 3)), 1.0])
    np.testing.assert_allclose(dx, np.ones((2, 3)))
    assert du == 0


def test_integer_argument_is_a_constant() -> None:
    body = """
        %m = greaterThan %k: i32, 0: i32
        %y = select %x: f64, 0: f64 by %m: bool
        %z = multiply %y: f64, %y: f64
    """
    text = with_adjoint_type(fn_text([("x", "f64"), ("k", "i32")], body, "z", "f64", decl=""))
    module = differentiate(text)
    dx, dk = run_function(module, "df", [1.5, np.int32(3)])
    assert float(dx) == pytest.approx(3.0)
    assert int(dk) == 0


# -- calls and control flow -----------------------------------------------------------------

CALLS = """module "m"
stage raw

func @mul: (f64, <3 x f64>) -> <3 x f64> {
'entry(%a: f64, %x: <3 x f64>):
    %y = multiply %x: <3 x f64>, %a: f64
    %z = tanh %y: <3 x f64>
    return %z: <3 x f64>
}

func @pair: (<3 x f64>) -> (f64, <3 x f64>) {
'entry(%x: <3 x f64>):
    %s = reduce %x: <3 x f64> by add init 0: f64 along 0
    %e = exp %x: <3 x f64>
    %t = literal (%s: f64, %e: <3 x f64>): (f64, <3 x f64>)
    return %t: (f64, <3 x f64>)
}

func @f: (f64, <3 x f64>) -> f64 {
'entry(%a: f64, %x: <3 x f64>):
    %u = apply @mul(%a: f64, %x: <3 x f64>): (f64, <3 x f64>) -> <3 x f64>
    %v = apply @mul(%a: f64, %u: <3 x f64>): (f64, <3 x f64>) -> <3 x f64>
    %p = apply @pair(%v: <3 x f64>): (<3 x f64>) -> (f64, <3 x f64>)
    %s = extract 0 from %p: (f64, <3 x f64>)
    %e = extract 1 from %p: (f64, <3 x f64>)
    %d = dot %e: <3 x f64>, %x: <3 x f64>
    %r = multiply %d: f64, %s: f64
    return %r: f64
}

[adjoint @f]
func @df: (f64, <3 x f64>) -> (f64, <3 x f64>)
"""


def test_calls_synthesize_callee_adjoints() -> None:
    module = check_gradients(CALLS, "f", "df", [np.array(0.8), RNG.uniform(-1, 1, 3)])
    names = [op.sym_name.data for op in module.body.block.ops if isinstance(op, FuncOp)]
    assert "mul_grad" in names and "pair_grad" in names and "pair_grad1" in names


CONDITIONAL = """module "m"
stage raw

func @f: (f64, <3 x f64>) -> f64 {
'entry(%a: f64, %x: <3 x f64>):
    %c = greaterThan %a: f64, 0: f64
    %y = multiply %x: <3 x f64>, %a: f64
    conditional %c: bool then 'pos(%y: <3 x f64>) else 'neg(%x: <3 x f64>, %a: f64)
'pos(%p: <3 x f64>):
    %e = exp %p: <3 x f64>
    branch 'join(%e: <3 x f64>)
'neg(%q: <3 x f64>, %b: f64):
    %s = sin %q: <3 x f64>
    %t = multiply %s: <3 x f64>, %b: f64
    branch 'join(%t: <3 x f64>)
'join(%j: <3 x f64>):
    %r = dot %j: <3 x f64>, %x: <3 x f64>
    return %r: f64
}

[adjoint @f]
func @df: (f64, <3 x f64>) -> (f64, <3 x f64>)
"""


@pytest.mark.parametrize("a", [0.6, -0.4])
def test_conditional_control_flow(a: float) -> None:
    check_gradients(CONDITIONAL, "f", "df", [np.array(a), RNG.uniform(-1, 1, 3)])


HIGHER_ORDER = """module "m"
stage raw

func @f: (f64, f64) -> f64 {
'entry(%x: f64, %y: f64):
    %a = multiply %x: f64, %x: f64
    %b = multiply %a: f64, %y: f64
    %c = sin %b: f64
    return %c: f64
}

{FIRST}

{SECOND}
"""
OUTER = "[adjoint @df from 0]\nfunc @ddf: (f64, f64) -> (f64, f64)"
INNER = "[adjoint @f]\nfunc @df: (f64, f64) -> (f64, f64)"


@pytest.mark.parametrize("inner_first", [True, False], ids=["inner-first", "outer-first"])
def test_higher_order_adjoint_of_adjoint(inner_first: bool) -> None:
    """The adjoint of an adjoint, whichever of the two is declared first."""
    first, second = (INNER, OUTER) if inner_first else (OUTER, INNER)
    text = HIGHER_ORDER.replace("{FIRST}", first).replace("{SECOND}", second)
    x, y = np.array(0.7), np.array(-0.3)
    module = check_gradients(text, "df", "ddf", [x, y], source=0)
    dxx, dxy = run_function(module, "ddf", [x, y])
    b = x * x * y
    np.testing.assert_allclose(dxx, 2 * y * np.cos(b) - (2 * x * y) ** 2 * np.sin(b))
    np.testing.assert_allclose(dxy, 2 * x * np.cos(b) - 2 * x * y * x * x * np.sin(b))


# -- MLP, LSTM, random graphs ---------------------------------------------------------------

MLP = """module "mlp"
stage raw

func @loss: (<4 x 5 x f64>, <5 x 6 x f64>, <1 x 6 x f64>, <6 x 3 x f64>, <1 x 3 x f64>, <4 x 3 x f64>) -> f64 {
'entry(%x: <4 x 5 x f64>, %w1: <5 x 6 x f64>, %b1: <1 x 6 x f64>, %w2: <6 x 3 x f64>, %b2: <1 x 3 x f64>, %t: <4 x 3 x f64>):
    %h0 = dot %x: <4 x 5 x f64>, %w1: <5 x 6 x f64>
    %h1 = add %h0: <4 x 6 x f64>, %b1: <1 x 6 x f64>
    %h = max %h1: <4 x 6 x f64>, 0: f64
    %o0 = dot %h: <4 x 6 x f64>, %w2: <6 x 3 x f64>
    %o = add %o0: <4 x 3 x f64>, %b2: <1 x 3 x f64>
    %m = reduce %o: <4 x 3 x f64> by max init -1000: f64 along 1
    %mp = padShape %m: <4 x f64> at 1
    %z = subtract %o: <4 x 3 x f64>, %mp: <4 x 1 x f64>
    %e = exp %z: <4 x 3 x f64>
    %se = reduce %e: <4 x 3 x f64> by add init 0: f64 along 1
    %lse = log %se: <4 x f64>
    %lp = padShape %lse: <4 x f64> at 1
    %logp = subtract %z: <4 x 3 x f64>, %lp: <4 x 1 x f64>
    %tl = multiply %t: <4 x 3 x f64>, %logp: <4 x 3 x f64>
    %s = reduce %tl: <4 x 3 x f64> by add init 0: f64 along 0, 1
    %l = divide %s: f64, -4: f64
    return %l: f64
}

[adjoint @loss wrt 1, 2, 3, 4 keeping 0]
func @loss_grad: (<4 x 5 x f64>, <5 x 6 x f64>, <1 x 6 x f64>, <6 x 3 x f64>, <1 x 3 x f64>, <4 x 3 x f64>) -> (<5 x 6 x f64>, <1 x 6 x f64>, <6 x 3 x f64>, <1 x 3 x f64>, f64)
"""


def mlp_args() -> list[np.ndarray]:
    x = RNG.normal(size=(4, 5))
    t = np.eye(3)[[0, 2, 1, 2]].astype(np.float64)
    return [
        x,
        RNG.normal(size=(5, 6)) * 0.5,
        RNG.normal(size=(1, 6)) * 0.1,
        RNG.normal(size=(6, 3)) * 0.5,
        RNG.normal(size=(1, 3)) * 0.1,
        t,
    ]


LSTM = """module "lstm"
stage raw

func @sigmoid: (<1 x 4 x f64>) -> <1 x 4 x f64> {
'entry(%x: <1 x 4 x f64>):
    %n = negate %x: <1 x 4 x f64>
    %e = exp %n: <1 x 4 x f64>
    %d = add %e: <1 x 4 x f64>, 1: f64
    %s = divide 1: f64, %d: <1 x 4 x f64>
    return %s: <1 x 4 x f64>
}

func @cell: (<1 x 3 x f64>, <1 x 4 x f64>, <1 x 4 x f64>, <3 x 16 x f64>, <4 x 16 x f64>, <1 x 16 x f64>) -> (<1 x 4 x f64>, <1 x 4 x f64>) {
'entry(%x: <1 x 3 x f64>, %h: <1 x 4 x f64>, %c: <1 x 4 x f64>, %wx: <3 x 16 x f64>, %wh: <4 x 16 x f64>, %b: <1 x 16 x f64>):
    %gx = dot %x: <1 x 3 x f64>, %wx: <3 x 16 x f64>
    %gh = dot %h: <1 x 4 x f64>, %wh: <4 x 16 x f64>
    %g0 = add %gx: <1 x 16 x f64>, %gh: <1 x 16 x f64>
    %g = add %g0: <1 x 16 x f64>, %b: <1 x 16 x f64>
    %gt = transpose %g: <1 x 16 x f64>
    %ig = slice %gt: <16 x 1 x f64> from 0 upto 3
    %fg = slice %gt: <16 x 1 x f64> from 4 upto 7
    %og = slice %gt: <16 x 1 x f64> from 8 upto 11
    %cg = slice %gt: <16 x 1 x f64> from 12 upto 15
    %i0 = transpose %ig: <4 x 1 x f64>
    %f0 = transpose %fg: <4 x 1 x f64>
    %o0 = transpose %og: <4 x 1 x f64>
    %c0 = transpose %cg: <4 x 1 x f64>
    %i = sigmoidcall
    %c1 = multiply %f: <1 x 4 x f64>, %c: <1 x 4 x f64>
    %cc = tanh %c0: <1 x 4 x f64>
    %c2 = multiply %i: <1 x 4 x f64>, %cc: <1 x 4 x f64>
    %cn = add %c1: <1 x 4 x f64>, %c2: <1 x 4 x f64>
    %tc = tanh %cn: <1 x 4 x f64>
    %hn = multiply %o: <1 x 4 x f64>, %tc: <1 x 4 x f64>
    %r = literal (%hn: <1 x 4 x f64>, %cn: <1 x 4 x f64>): (<1 x 4 x f64>, <1 x 4 x f64>)
    return %r: (<1 x 4 x f64>, <1 x 4 x f64>)
}

[adjoint @cell from 0 keeping 0, 1 seedable]
func @cell_grad: (<1 x 3 x f64>, <1 x 4 x f64>, <1 x 4 x f64>, <3 x 16 x f64>, <4 x 16 x f64>, <1 x 16 x f64>, <1 x 4 x f64>) -> (<1 x 3 x f64>, <1 x 4 x f64>, <1 x 4 x f64>, <3 x 16 x f64>, <4 x 16 x f64>, <1 x 16 x f64>, <1 x 4 x f64>, <1 x 4 x f64>)
"""

SIGMOID_INLINE = """%in = negate %i0: <1 x 4 x f64>
    %ie = exp %in: <1 x 4 x f64>
    %id = add %ie: <1 x 4 x f64>, 1: f64
    %i = divide 1: f64, %id: <1 x 4 x f64>
    %fn = negate %f0: <1 x 4 x f64>
    %fe = exp %fn: <1 x 4 x f64>
    %fd = add %fe: <1 x 4 x f64>, 1: f64
    %f = divide 1: f64, %fd: <1 x 4 x f64>
    %on = negate %o0: <1 x 4 x f64>
    %oe = exp %on: <1 x 4 x f64>
    %od = add %oe: <1 x 4 x f64>, 1: f64
    %o = divide 1: f64, %od: <1 x 4 x f64>"""

SIGMOID_CALLS = """%i = apply @sigmoid(%i0: <1 x 4 x f64>): (<1 x 4 x f64>) -> <1 x 4 x f64>
    %f = apply @sigmoid(%f0: <1 x 4 x f64>): (<1 x 4 x f64>) -> <1 x 4 x f64>
    %o = apply @sigmoid(%o0: <1 x 4 x f64>): (<1 x 4 x f64>) -> <1 x 4 x f64>"""

LSTM_INLINE = LSTM.replace("%i = sigmoidcall", SIGMOID_INLINE)
LSTM_CALLS = LSTM.replace("%i = sigmoidcall", SIGMOID_CALLS)


def lstm_args() -> list[np.ndarray]:
    shapes = [(1, 3), (1, 4), (1, 4), (3, 16), (4, 16), (1, 16)]
    return [RNG.normal(size=s) * 0.5 for s in shapes]


def test_mlp_gradients() -> None:
    check_gradients(MLP, "loss", "loss_grad", mlp_args(), wrt=[1, 2, 3, 4])


@pytest.mark.parametrize("text", [LSTM_INLINE, LSTM_CALLS], ids=["inline", "calls"])
def test_lstm_gradients(text: str) -> None:
    seed = RNG.normal(size=(1, 4))
    check_gradients(text, "cell", "cell_grad", lstm_args(), source=0, seed=seed)


def test_mlp_and_lstm_through_the_jit() -> None:
    from dlc.api import compile_graph_module

    for text, name, args in (
        (MLP, "loss_grad", mlp_args()),
        (LSTM_INLINE, "cell_grad", [*lstm_args(), RNG.normal(size=(1, 4))]),
    ):
        from dlc.parser import parse_module

        compiled = compile_graph_module(parse_module(text))
        got = compiled[name](*args)
        want = run_function(differentiate(text), name, args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def random_graph(rng: np.random.Generator, n_ops: int) -> str:
    """A random straight-line composite of smooth ops over <2 x 3 x f64> values."""
    values = ["x", "y"]
    lines = []
    for k in range(n_ops):
        kind = rng.integers(4)
        a, b = rng.choice(values), rng.choice(values)
        name = f"v{k}"
        if kind == 0:
            op = rng.choice(["add", "subtract", "multiply"])
            lines.append(f"%{name} = {op} %{a}: {M23}, %{b}: {M23}")
        elif kind == 1:
            op = rng.choice(["tanh", "sin", "cos", "atan", "negate"])
            lines.append(f"%{name} = {op} %{a}: {M23}")
        elif kind == 2:
            lines.append(f"%{name}.r = reduce %{a}: {M23} by add init 0: f64 along 1")
            lines.append(f"%{name}.p = padShape %{name}.r: <2 x f64> at 1")
            lines.append(f"%{name} = multiply %{name}.p: <2 x 1 x f64>, %{b}: {M23}")
        else:
            lines.append(f"%{name}.t = transpose %{a}: {M23}")
            lines.append(f"%{name}.d = dot %{b}: {M23}, %{name}.t: <3 x 2 x f64>")
            lines.append(f"%{name}.s = tanh %{name}.d: <2 x 2 x f64>")
            lines.append(f"%{name} = dot %{name}.s: <2 x 2 x f64>, %{a}: {M23}")
        values.append(name)
    return "\n".join(lines), values[-1]


@pytest.mark.parametrize("seed", range(6))
def test_random_composite_graphs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    body, result = random_graph(rng, 8)
    check([("x", M23), ("y", M23)], body, result, M23, low=-0.5, high=0.5)


def test_module_without_adjoints_is_unchanged() -> None:
    from dlc.parser import parse_module, print_module

    text = TUPLE_FN
    assert print_module(differentiate(text)) == print_module(parse_module(text))


def _flops_module():  # noqa: ANN202 -- the tools/flops.py module
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tools" / "flops.py"
    spec = importlib.util.spec_from_file_location("dlc_tools_flops", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("text", "primal", "adjoint"),
    [
        (MLP, "loss", "loss_grad"),
        (LSTM_INLINE, "cell", "cell_grad"),
        (LSTM_CALLS, "cell", "cell_grad"),
    ],
)
def test_gradient_is_clean_and_at_most_three_times_the_primal(
    text: str, primal: str, adjoint: str
) -> None:
    from xdsl.context import Context

    from dlc.pipeline import get_all_passes

    module = differentiate(text)
    for name in ("canonicalize", "cse", "dce"):
        get_all_passes()[name]()().apply(Context(), module)
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, FuncOp)}
    for block in funcs[adjoint].body.blocks:
        for op in block.ops:
            assert all(r.uses for r in op.results), f"unused value computed by {op.name}"
    flops = _flops_module().module_flops(module)
    ratio = flops[adjoint] / flops[primal]
    print(f"{adjoint}: {flops[adjoint]} FLOPs, {primal}: {flops[primal]} FLOPs, ratio {ratio:.2f}")
    assert ratio <= 3.0


def test_slice_adjoints_of_one_value_are_concatenated_not_added() -> None:
    """The four gate slices of the LSTM get one concatenation of their adjoints."""
    module = differentiate(LSTM_INLINE)
    grad = next(
        f for f in module.body.block.ops if isinstance(f, FuncOp) and f.sym_name.data == "cell_grad"
    )
    ops = [op for block in grad.body.blocks for op in block.ops]
    concats = [op for op in ops if op.name == "graph.concatenate"]
    assert len(concats) == 1 and len(concats[0].operands) == 4
    assert not any(op.name == "graph.add" and concats[0].results[0] in op.operands for op in ops)
