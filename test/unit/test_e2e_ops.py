"""End to end: compile graph functions to native code, compare with the reference
interpreter on random data, for every op family the code generator supports.

Each test builds one module with several functions and compiles it once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from dlc.diagnostics import DiagnosticError
from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph_types import TensorType, TupleType

try:
    from graph_builders import graph_module as make_module
    from test_lowering import FunctionBuilder
except ImportError:  # imported as a package module
    from .graph_builders import graph_module as make_module  # type: ignore[no-redef]
    from .test_lowering import FunctionBuilder  # type: ignore[no-redef]

T = TensorType
FLOATS = ("f32", "f64")
INTS = ("i8", "i16", "i32", "i64")
NP = {
    "f32": np.float32,
    "f64": np.float64,
    "bool": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
}


def compile_module(module: ModuleOp) -> Any:
    from dlc.api import compile_graph_module

    return compile_graph_module(module)


def reference(module: ModuleOp, name: str, args: Sequence[np.ndarray]) -> Any:
    from dlc.semantics.interpreter import run_function

    return run_function(module, name, list(args))


def random_array(rng: np.random.Generator, t: TensorType, domain: str = "any") -> np.ndarray:
    shape, dt = t.dims, t.dt
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in INTS:
        return rng.integers(-9, 10, size=shape).astype(NP[dt])
    if domain == "unit":
        data = rng.uniform(-0.99, 0.99, size=shape)
    elif domain == "positive":
        data = rng.uniform(0.1, 5.0, size=shape)
    else:
        data = rng.standard_normal(shape) * 2.0
    return np.asarray(data, dtype=NP[dt])


def leaves(value: Any) -> list[np.ndarray]:
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple | list):
            stack.extend(reversed(v))
        elif v is not None:  # None: a void result
            out.append(np.asarray(v))
    return out


def assert_same(got: Any, want: Any, what: str) -> None:
    got_leaves, want_leaves = leaves(got), leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{what}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        if g.dtype.kind == "f":
            rtol = 2e-5 if g.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


Case = tuple[Any, Callable[[np.random.Generator], list[np.ndarray]]]


def run_cases(cases: list[Case], trials: int = 2) -> None:
    """Compile all cases' functions in one module; compare each with the reference."""
    module = make_module(*(func for func, _ in cases))
    compiled = compile_module(module)
    rng = np.random.default_rng(1234)
    for func, make_args in cases:
        name = func.sym_name.data
        for _ in range(trials):
            args = make_args(rng)
            want = reference(module, name, args)
            got = compiled[name](*args)
            assert_same(got, want, name)


def random_args(
    *types: TensorType, domain: str = "any"
) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [random_array(rng, t, domain) for t in types]


def unary_case(name: str, opcode: str, t: TensorType, domain: str = "any") -> Case:
    fb = FunctionBuilder(name, [t])
    return fb.ret(fb.op(ge.UNARY_OPS[opcode], fb.args[0])), random_args(t, domain=domain)


def binary_case(
    name: str, cls: type, lhs: TensorType, rhs: TensorType, domain: str = "any"
) -> Case:
    fb = FunctionBuilder(name, [lhs, rhs])
    return fb.ret(fb.op(cls, *fb.args)), random_args(lhs, rhs, domain=domain)


UNIT_DOMAIN = {
    "acos": "unit",
    "asin": "unit",
    "log": "positive",
    "sqrt": "positive",
    "rsqrt": "positive",
}
FLOAT_UNARY = list(ge.UNARY_OPS)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_unary_ops(dtype: str) -> None:
    t = T((3, 4), dtype)
    cases = [unary_case(f"u_{op}", op, t, UNIT_DOMAIN.get(op, "any")) for op in FLOAT_UNARY]
    run_cases(cases)


def test_float_unary_special_values() -> None:
    fb_values = np.array(
        [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.5, -1.0, -2.0, 3.0, 12.5, 1e-3, -3.7, 100.0]
        + [np.inf, -np.inf, np.nan],
        np.float64,
    )
    t = T((fb_values.size,), "f64")
    cases = [
        (unary_case(f"s_{op}", op, t)[0], lambda rng: [fb_values.copy()])
        for op in (
            "sign",
            "round",
            "rint",
            "floor",
            "ceil",
            "negate",
            "square",
            "exp",
            "tanh",
            "lgamma",
            "digamma",
        )
    ]
    run_cases(cases, trials=1)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_unary_ops(dtype: str) -> None:
    t = T((2, 5), dtype)
    run_cases([unary_case(f"u_{op}", op, t) for op in ("negate", "sign", "square")])


NUMERIC_BINARY = (
    "add subtract multiply divide min max truncateDivide floorDivide modulo power".split()
)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_binary_ops(dtype: str) -> None:
    t = T((4, 3), dtype)
    cases = [
        binary_case(f"b_{op}", ge.BINARY_OPS[op], t, t) for op in NUMERIC_BINARY if op != "power"
    ]
    cases.append(binary_case("b_power", ge.PowerOp, t, t, domain="positive"))
    run_cases(cases)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_binary_ops_including_division_by_zero(dtype: str) -> None:
    t = T((6, 7), dtype)  # values in [-9, 9]: many zero divisors and negative operands
    run_cases([binary_case(f"b_{op}", ge.BINARY_OPS[op], t, t) for op in NUMERIC_BINARY], trials=3)


def test_integer_division_edge_values() -> None:
    info = np.iinfo(np.int32)
    lhs = np.array([info.min, info.min, info.max, 7, -7, 7, -7, 0, 5], np.int32)
    rhs = np.array([-1, 1, -1, 2, 2, -2, -2, 0, 0], np.int32)
    t = T((lhs.size,), "i32")
    cases = [
        (binary_case(f"e_{op}", ge.BINARY_OPS[op], t, t)[0], lambda rng: [lhs.copy(), rhs.copy()])
        for op in ("divide", "truncateDivide", "floorDivide", "modulo")
    ]
    run_cases(cases, trials=1)


def test_integer_power_with_negative_exponents() -> None:
    base = np.array([1, -1, -1, 2, 0, 3, -2, 5], np.int64)
    exponent = np.array([-3, -3, -4, -1, -2, 4, 5, 30], np.int64)
    t = T((base.size,), "i64")
    func, _ = binary_case("p", ge.PowerOp, t, t)
    run_cases([(func, lambda rng: [base.copy(), exponent.copy()])], trials=1)


def test_boolean_ops_and_compares() -> None:
    b, f, i = T((3, 4), "bool"), T((3, 4), "f32"), T((3, 4), "i16")
    cases = [binary_case(f"b_{op}", ge.BINARY_OPS[op], b, b) for op in ("and", "or")]
    cases.append(unary_not := _not_case(b))
    for op, cls in ge.COMPARE_OPS.items():
        cases.append(binary_case(f"cf_{op}", cls, f, f))
        cases.append(binary_case(f"ci_{op}", cls, i, i))
    assert unary_not
    run_cases(cases)


def _not_case(t: TensorType) -> Case:
    fb = FunctionBuilder("not_", [t])
    return fb.ret(fb.op(ge.NotOp, fb.args[0])), random_args(t)


def test_float_compares_with_nan() -> None:
    lhs = np.array([np.nan, 1.0, np.nan, 2.0], np.float32)
    rhs = np.array([np.nan, np.nan, 1.0, 2.0], np.float32)
    t = T((4,), "f32")
    cases = [
        (binary_case(f"n_{op}", cls, t, t)[0], lambda rng: [lhs.copy(), rhs.copy()])
        for op, cls in ge.COMPARE_OPS.items()
    ]
    cases += [
        (binary_case(f"n_{op}", ge.BINARY_OPS[op], t, t)[0], lambda rng: [lhs.copy(), rhs.copy()])
        for op in ("min", "max")
    ]
    run_cases(cases, trials=1)


BROADCASTS = [
    ((2, 3), (1, 3)),
    ((2, 1), (1, 3)),
    ((), (2, 3)),
    ((2, 3, 4), ()),
    ((), ()),
    ((1,), (5,)),
    ((0, 3), (1, 3)),
    ((4, 0), (4, 1)),
]


@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_broadcasting_binary_ops(dtype: str) -> None:
    cases = []
    for n, (ls, rs) in enumerate(BROADCASTS):
        cases.append(binary_case(f"add{n}", ge.AddOp, T(ls, dtype), T(rs, dtype)))
        cases.append(binary_case(f"lt{n}", ge.COMPARE_OPS["lessThan"], T(ls, dtype), T(rs, dtype)))
    run_cases(cases)


def test_select_broadcasts_all_three_operands() -> None:
    cases = []
    shapes = [((2, 3), (2, 3), (2, 3)), ((2, 1), (), (1, 3)), ((), (), ()), ((1, 3), (2, 3), ())]
    for n, (a, b, m) in enumerate(shapes):
        types = [T(a, "f64"), T(b, "f64"), T(m, "bool")]
        fb = FunctionBuilder(f"sel{n}", types)
        cases.append((fb.ret(fb.op(ge.SelectOp, *fb.args)), random_args(*types)))
    run_cases(cases)


def test_data_type_casts() -> None:
    cases = []
    for n, (src, dst) in enumerate(
        [("f32", "f64"), ("i8", "i32"), ("i16", "i64"), ("i32", "i32"), ("bool", "bool")]
    ):
        fb = FunctionBuilder(f"cast{n}", [T((3, 2), src)])
        cases.append(
            (fb.ret(fb.op(ge.DataTypeCastOp, fb.args[0], dtype=dst)), random_args(T((3, 2), src)))
        )
    run_cases(cases)


def test_inline_scalar_literals() -> None:
    fb = FunctionBuilder("scale", [T((2, 3), "f32")])
    y = fb.op(ge.MultiplyOp, fb.args[0], fb.const(2.5, "f32"))
    y = fb.op(ge.AddOp, fb.const(1.0, "f32"), y)
    fi = FunctionBuilder("mod", [T((5,), "i32")])
    z = fi.op(ge.BINARY_OPS["modulo"], fi.args[0], fi.const(-3, "i32"))
    fc = FunctionBuilder("cmp", [T((4,), "f64")])
    c = fc.op(ge.COMPARE_OPS["greaterThan"], fc.args[0], fc.const(0.0, "f64"))
    run_cases(
        [
            (fb.ret(y), random_args(T((2, 3), "f32"))),
            (fi.ret(z), random_args(T((5,), "i32"))),
            (fc.ret(c), random_args(T((4,), "f64"))),
        ]
    )


DOTS = [
    ((2, 3), (3, 4)),
    ((2, 2, 3), (2, 3, 5)),
    ((5,), (5,)),
    ((3, 0), (0, 2)),
    ((1, 1), (1, 1)),
    ((0,), (0,)),
]


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "bool"])
def test_dot(dtype: str) -> None:
    cases = []
    for n, (ls, rs) in enumerate(DOTS):
        cases.append(binary_case(f"dot{n}", gt.DotOp, T(ls, dtype), T(rs, dtype)))
    run_cases(cases)


def test_transpose_reverse_slice_pad_squeeze() -> None:
    t = T((2, 3, 4), "f32")
    cases = []

    def unary(name: str, cls: type, src: TensorType = t, **props: Any) -> None:
        fb = FunctionBuilder(name, [src])
        cases.append((fb.ret(fb.op(cls, fb.args[0], **props)), random_args(src)))

    unary("transpose", gt.TransposeOp)
    unary("transpose0", gt.TransposeOp, T((), "i8"))
    unary("reverse0", gt.ReverseOp, dims=[0])
    unary("reverse12", gt.ReverseOp, dims=[2, 1])
    unary("slice", gt.SliceOp, lower=0, upper=1)
    unary("slice_mid", gt.SliceOp, T((5, 2), "i64"), lower=1, upper=3)
    unary("pad0", gt.PadShapeOp, index=0)
    unary("pad3", gt.PadShapeOp, index=3)
    unary("pad_scalar", gt.PadShapeOp, T((), "f64"), index=0)
    unary("squeeze", gt.SqueezeShapeOp, T((2, 1, 3), "bool"), index=1)
    unary("squeeze_all", gt.SqueezeShapeOp, T((1,), "f32"), index=0)
    run_cases(cases)


def test_shape_cast() -> None:
    casts = [
        ((2, 3, 4), (4, 6)),
        ((6,), (1, 6)),
        ((1, 1), ()),
        ((), (1, 1, 1)),
        ((2, 3), (3, 2)),
        ((0, 3), (3, 0)),
        ((4, 1, 3), (2, 6)),
    ]
    cases = []
    for n, (src, dst) in enumerate(casts):
        fb = FunctionBuilder(f"cast{n}", [T(src, "i32")])
        cases.append(
            (fb.ret(fb.op(gt.ShapeCastOp, fb.args[0], shape=list(dst))), random_args(T(src, "i32")))
        )
    run_cases(cases)


REDUCES = [
    ("add", "f32"),
    ("multiply", "f64"),
    ("min", "f32"),
    ("max", "i32"),
    ("add", "i8"),
    ("and", "bool"),
    ("or", "bool"),
    ("subtract", "f64"),
]


@pytest.mark.parametrize(("combinator", "dtype"), REDUCES)
def test_reduce(combinator: str, dtype: str) -> None:
    t = T((3, 4, 2), dtype)
    init = {
        "add": 0,
        "multiply": 1,
        "min": 1e30,
        "max": -100,
        "and": True,
        "or": False,
        "subtract": 0.5,
    }[combinator]
    init = float(init) if dtype in FLOATS else init
    cases = []
    for n, dims in enumerate([[0], [1], [2], [0, 2], [2, 0, 1]]):
        fb = FunctionBuilder(f"red{n}", [t])
        r = fb.op(gt.ReduceOp, fb.args[0], fb.const(init, dtype), combinator=combinator, dims=dims)
        cases.append((fb.ret(r), random_args(t)))
    fb = FunctionBuilder("red_init_arg", [t, T((), dtype)])
    r = fb.op(gt.ReduceOp, fb.args[0], fb.args[1], combinator=combinator, dims=[1])
    cases.append((fb.ret(r), random_args(t, T((), dtype))))
    empty = T((0, 3), dtype)
    fb = FunctionBuilder("red_empty", [empty])
    r = fb.op(gt.ReduceOp, fb.args[0], fb.const(init, dtype), combinator=combinator, dims=[0])
    cases.append((fb.ret(r), random_args(empty)))
    run_cases(cases)


def test_concatenate() -> None:
    specs = [
        ([(2, 3), (4, 3)], 0, "f32"),
        ([(2, 1), (2, 3), (2, 2)], 1, "i64"),
        ([(2, 0), (2, 3)], 1, "f64"),
        ([(3,)], 0, "bool"),
        ([(1, 2), (0, 2), (1, 2)], 0, "i8"),
    ]
    cases = []
    for n, (shapes, axis, dtype) in enumerate(specs):
        types = [T(s, dtype) for s in shapes]
        fb = FunctionBuilder(f"cat{n}", types)
        cases.append((fb.ret(fb.op(gt.ConcatenateOp, *fb.args, axis=axis)), random_args(*types)))
    run_cases(cases)


def test_tuples_literals_and_extract() -> None:
    v, s = T((3,), "f32"), T((), "f32")
    fb = FunctionBuilder("tuples", [v, s])
    x, y = fb.args
    pair = fb.lit(("tuple", (("operand", 0), ("operand", 1))), TupleType([v, s]), x, y)
    first = fb.op(gm.ExtractOp, pair, keys=[0])
    second = fb.op(gm.ExtractOp, pair, keys=[1])
    total = fb.op(ge.AddOp, first, second)
    dense = fb.lit(("tensor", (("float", 1.5), ("float", -2.0), ("operand", 0))), v, second)
    splat = fb.lit(("float", 0.25), T((2, 3), "f32"))
    zero = fb.lit(("zero",), T((2,), "i32"))
    elem = fb.op(gm.ExtractOp, fb.op(ge.MultiplyOp, total, dense), keys=[2])
    result_type = TupleType([v, TupleType([T((2, 3), "f32"), T((2,), "i32")]), s, v])
    inner = fb.lit(("tuple", (("operand", 0), ("operand", 1))), result_type.types[1], splat, zero)
    result = fb.lit(
        ("tuple", (("operand", 0), ("operand", 1), ("operand", 2), ("operand", 3))),
        result_type,
        total,
        inner,
        elem,
        x,
    )
    fm = FunctionBuilder("matrix_literal", [T((2,), "i16")])
    rows = fm.lit(
        ("tensor", (("operand", 0), ("tensor", (("int", 7), ("int", -8))))),
        T((2, 2), "i16"),
        fm.args[0],
    )
    fv = FunctionBuilder("void", [v])
    run_cases(
        [
            (fb.ret(result), random_args(v, s)),
            (fm.ret(rows), random_args(T((2,), "i16"))),
            (fv.ret(None), random_args(v)),
        ]
    )


def test_unsupported_op_raises_a_diagnostic() -> None:
    fb = FunctionBuilder("f", [T((4,), "i7")])
    module = make_module(fb.ret(fb.args[0]))
    with pytest.raises(
        DiagnosticError, match="not supported by the code generator yet: i7 data type"
    ):
        compile_module(module)
