"""The NumPy reference interpreter (dlc.semantics.interpreter) against hand-computed results.

Modules are built programmatically with a tiny builder (`Mod` / `Fn` below) and verified
before they run, so every test program is valid graph IR.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from graph_builders import attr, graph_module, inferred_op
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from dlc.diagnostics import DiagnosticError
from dlc.dialects import graph_elementwise as ew
from dlc.dialects import graph_memory as mem
from dlc.dialects import graph_tensor as ts
from dlc.dialects.graph import (
    BranchEnumOp,
    BranchOp,
    ConditionalOp,
    EnumOp,
    FuncOp,
    GlobalRefOp,
    LiteralOp,
    ReturnOp,
    StructOp,
    Symbols,
    VarOp,
)
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_types import (
    ArrayType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
)
from dlc.semantics.interpreter import (
    Interpreter,
    TrapError,
    UndefinedBehaviorError,
    numpy_dtype,
    run_function,
)
from dlc.semantics.ops import digamma
from dlc.semantics.values import fold_tree

# ---------------------------------------------------------------------------
# A tiny IR builder
# ---------------------------------------------------------------------------


def T(*dims: int, dt: str = "f32") -> TensorType:
    return TensorType(dims, dt)


def S(dt: str) -> TensorType:
    return TensorType((), dt)


class Mod:
    """Collects declarations and functions; `build()` gives a verified module."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self.symbols = Symbols()

    def struct(self, name: str, fields: Sequence[tuple[str, Attribute]]) -> NominalType:
        self.ops.append(StructOp(name, fields))
        self.symbols.structs[name] = list(fields)
        return NominalType(name, "struct")

    def enum(self, name: str, cases: Sequence[tuple[str, Sequence[Attribute]]]) -> NominalType:
        self.ops.append(EnumOp(name, cases))
        self.symbols.enums[name] = [(c, tuple(ts_)) for c, ts_ in cases]
        return NominalType(name, "enum")

    def var(self, name: str, t: Attribute) -> None:
        self.ops.append(VarOp(name, t))
        self.symbols.vars[name] = t

    def fn(self, name: str, args: Sequence[Attribute], ret: Attribute) -> Fn:
        fn_type = FunctionType(list(args), ret)
        self.symbols.functions[name] = fn_type
        return Fn(self, name, fn_type)

    def build(self) -> ModuleOp:
        return graph_module(*self.ops)


class Fn:
    """Appends ops to the current block of one function."""

    def __init__(self, mod: Mod, name: str, fn_type: FunctionType):
        self.mod = mod
        self.region = Region()
        self.func = FuncOp(name, fn_type, self.region)
        mod.ops.append(self.func)
        self.cur = self.block("entry", fn_type.args)
        self.args = self.cur.args

    def block(self, name: str, arg_types: Sequence[Attribute] = ()) -> Block:
        block = Block(arg_types=list(arg_types))
        block._name = name
        self.region.add_block(block)
        return block

    def at(self, block: Block) -> Fn:
        self.cur = block
        return self

    def add(self, op: Operation) -> Any:
        self.cur.add_op(op)
        return op.results[0] if op.results else None

    def op(
        self, cls: Any, *operands: SSAValue, result: Attribute | None = None, **props: Any
    ) -> Any:
        properties = {k: attr(v) for k, v in props.items() if v is not None}
        if result is None:
            return self.add(inferred_op(cls, operands, properties, self.mod.symbols))
        return self.add(
            cls.create(operands=list(operands), result_types=[result], properties=properties)
        )

    def lit(self, tree: tuple[Any, ...], t: Attribute, *elements: SSAValue) -> SSAValue:
        return self.add(LiteralOp(LiteralAttr(tree), t, list(elements)))

    def const(self, value: int | float | bool, dt: str) -> SSAValue:
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"
        return self.lit((kind, value), S(dt))

    def ref(self, name: str) -> SSAValue:
        t = self.mod.symbols.functions.get(name)
        if t is None:
            t = PointerType(self.mod.symbols.vars[name])
        return self.add(GlobalRefOp(name, t))

    def apply(self, name: str, *args: SSAValue) -> Any:
        fn_type = self.mod.symbols.functions[name]
        props = {"callee": StringAttr(name), "callee_type": fn_type}
        return self.add(inferred_op(mem.ApplyOp, args, props, self.mod.symbols))

    def ret(self, value: SSAValue | None = None) -> None:
        self.add(ReturnOp(value))


def unary_fn(opcode_cls: Any, t: TensorType, **props: Any) -> ModuleOp:
    m = Mod()
    f = m.fn("f", [t], opcode_cls.infer([t], {k: attr(v) for k, v in props.items()})[0])
    f.ret(f.op(opcode_cls, f.args[0], **props))
    return m.build()


def binary_fn(cls: Any, lt: TensorType, rt_: TensorType) -> ModuleOp:
    m = Mod()
    f = m.fn("f", [lt, rt_], cls.infer([lt, rt_], {})[0])
    f.ret(f.op(cls, f.args[0], f.args[1]))
    return m.build()


def run1(module: ModuleOp, *args: Any) -> Any:
    return run_function(module, "f", list(args))


def same(got: Any, want: Any, dtype: Any = None) -> None:
    want = np.asarray(want, dtype=dtype if dtype is not None else got.dtype)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------
# dtypes and element-wise ops
# ---------------------------------------------------------------------------


def test_numpy_dtype() -> None:
    assert numpy_dtype("f32") == np.float32
    assert numpy_dtype("f16") == np.float16
    assert numpy_dtype("bool") == np.bool_
    assert numpy_dtype("i1") == np.int8
    assert numpy_dtype("i7") == np.int8
    assert numpy_dtype("i32") == np.int32
    assert numpy_dtype("i64") == np.int64


X = np.array([[-1.5, -0.25, 0.0], [0.3, 0.7, 2.5]], dtype=np.float32)
POS = np.array([[0.5, 1.0, 2.0], [3.5, 10.0, 0.1]], dtype=np.float32)

NUMPY_UNARY = {
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "exp": np.exp, "negate": np.negative,
    "square": np.square, "ceil": np.ceil, "floor": np.floor, "tan": np.tan, "cos": np.cos,
    "sin": np.sin, "atan": np.arctan, "rint": np.rint,
}  # fmt: skip


@pytest.mark.parametrize("opcode", sorted(NUMPY_UNARY))
def test_unary_matches_numpy_in_f32(opcode: str) -> None:
    got = run1(unary_fn(ew.UNARY_OPS[opcode], T(2, 3)), X)
    same(got, NUMPY_UNARY[opcode](X))


@pytest.mark.parametrize(
    "opcode, ref",
    [("log", np.log), ("sqrt", np.sqrt), ("rsqrt", lambda x: 1 / np.sqrt(x))],
)
def test_unary_positive_domain(opcode: str, ref: Any) -> None:
    got = run1(unary_fn(ew.UNARY_OPS[opcode], T(2, 3)), POS)
    np.testing.assert_allclose(got, ref(POS), rtol=1e-6)
    assert got.dtype == np.float32


def test_acos_asin_f64() -> None:
    x = np.array([-1.0, -0.5, 0.0, 0.9], dtype=np.float64)
    same(run1(unary_fn(ew.UNARY_OPS["acos"], T(4, dt="f64")), x), np.arccos(x))
    same(run1(unary_fn(ew.UNARY_OPS["asin"], T(4, dt="f64")), x), np.arcsin(x))


def test_special_functions() -> None:
    x = np.array([0.5, 1.0, 2.5, -0.5, 7.0], dtype=np.float64)
    mod = lambda op: unary_fn(ew.UNARY_OPS[op], T(5, dt="f64"))  # noqa: E731
    same(run1(mod("lgamma"), x), [math.lgamma(v) for v in x])
    same(run1(mod("erf"), x), [math.erf(v) for v in x])
    same(run1(mod("erfc"), x), [math.erfc(v) for v in x])
    psi = run1(mod("digamma"), x)
    euler = 0.5772156649015329
    want = [-euler - 2 * math.log(2), -euler, 1 / 1.5 + 1 / 0.5 - euler - 2 * math.log(2)]
    np.testing.assert_allclose(psi[:3], want, rtol=1e-13)
    # ψ(−0.5) = ψ(0.5) + 2 (recurrence, through the reflection branch); ψ(7) = H_6 − γ
    np.testing.assert_allclose(psi[3], 2 - euler - 2 * math.log(2), rtol=1e-13)
    np.testing.assert_allclose(psi[4], sum(1 / k for k in range(1, 7)) - euler, rtol=1e-13)
    assert math.isnan(digamma(0.0)) and math.isnan(digamma(-3.0))
    lg = run1(unary_fn(ew.UNARY_OPS["lgamma"], T(2)), np.array([0.0, -2.0], np.float32))
    assert lg.dtype == np.float32 and np.all(np.isinf(lg))


def test_round_half_away_from_zero_and_sign() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.0, np.nan], dtype=np.float32)
    got = run1(unary_fn(ew.UNARY_OPS["round"], T(8)), x)
    same(got, [1.0, 2.0, 3.0, -1.0, -3.0, 0.0, -0.0, np.nan])
    sign = run1(unary_fn(ew.UNARY_OPS["sign"], T(8)), x)
    same(sign, [1, 1, 1, -1, -1, 1, 0, np.nan])
    assert not np.signbit(sign[6])
    isign = run1(unary_fn(ew.UNARY_OPS["sign"], T(3, dt="i32")), np.array([-7, 0, 9], np.int32))
    same(isign, [-1, 0, 1])


def test_integer_negate_and_square_wrap() -> None:
    x = np.array([-128, 127, 16], dtype=np.int8)
    same(run1(unary_fn(ew.UNARY_OPS["negate"], T(3, dt="i8")), x), [-128, -127, -16])
    same(run1(unary_fn(ew.UNARY_OPS["square"], T(3, dt="i8")), x), [0, 1, 0])


def test_rank0_keeps_dtype() -> None:
    got = run1(unary_fn(ew.UNARY_OPS["exp"], S("f32")), 1.0)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float32
    assert got == np.exp(np.float32(1.0))


def test_binary_broadcasting() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    row = np.array([[10, 20, 30]], dtype=np.float32)
    col = np.array([[1], [2]], dtype=np.float32)
    same(run1(binary_fn(ew.AddOp, T(2, 3), T(1, 3)), a, row), a + row)
    same(run1(binary_fn(ew.MultiplyOp, T(2, 1), T(1, 3)), col, row), col * row)
    same(run1(binary_fn(ew.SubtractOp, S("f32"), T(2, 3)), 1.0, a), 1.0 - a)
    same(run1(binary_fn(ew.AddOp, T(0, 3), T(1, 3)), np.zeros((0, 3)), row), np.zeros((0, 3)))
    same(run1(binary_fn(ew.AddOp, T(1, 1), T(1, 1)), [[1.0]], [[2.0]]), [[3.0]])


INT_A = np.array([7, -7, 7, -7, 5, -2147483648, -2147483648, 3], dtype=np.int32)
INT_B = np.array([2, 2, -2, -2, 0, -1, -1, 0], dtype=np.int32)


@pytest.mark.parametrize(
    "opcode, want",
    [
        ("divide", [3, -3, -3, 3, 0, -2147483648, -2147483648, 0]),
        ("truncateDivide", [3, -3, -3, 3, 0, -2147483648, -2147483648, 0]),
        ("floorDivide", [3, -4, -4, 3, 0, -2147483648, -2147483648, 0]),
        ("modulo", [1, -1, 1, -1, 0, 0, 0, 0]),
        ("add", [9, -5, 5, -9, 5, 2147483647, 2147483647, 3]),
        ("min", [2, -7, -2, -7, 0, -2147483648, -2147483648, 0]),
    ],
)
def test_integer_binary_conventions(opcode: str, want: list[int]) -> None:
    got = run1(binary_fn(ew.BINARY_OPS[opcode], T(8, dt="i32"), T(8, dt="i32")), INT_A, INT_B)
    same(got, want)


def test_integer_power() -> None:
    a = np.array([2, 1, -1, -1, 5, 3, 0, 2], dtype=np.int32)
    b = np.array([10, -5, -3, -4, -1, 21, 0, 31], dtype=np.int32)
    got = run1(binary_fn(ew.PowerOp, T(8, dt="i32"), T(8, dt="i32")), a, b)
    wrapped = (3**21 + 2**31) % 2**32 - 2**31  # repeated multiplication wraps
    same(got, [1024, 1, -1, 1, 0, wrapped, 1, -2147483648])


def test_float_division_family() -> None:
    a = np.array([7.0, -7.0, 1.0, 1.0, -5.5], dtype=np.float64)
    b = np.array([2.0, 2.0, 0.0, 0.1, 2.0], dtype=np.float64)
    mk = lambda op: binary_fn(ew.BINARY_OPS[op], T(5, dt="f64"), T(5, dt="f64"))  # noqa: E731
    with np.errstate(all="ignore"):
        same(run1(mk("divide"), a, b), a / b)
        same(run1(mk("modulo"), a, b), np.fmod(a, b))
    same(run1(mk("truncateDivide"), a, b), [3.0, -3.0, np.inf, 10.0, -2.0])
    same(run1(mk("floorDivide"), a, b), [3.0, -4.0, np.inf, 10.0, -3.0])
    same(run1(mk("power"), a, b), np.power(a, b))


def test_min_max_propagate_nan() -> None:
    a = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    b = np.array([np.nan, 2.0, 1.0], dtype=np.float32)
    same(run1(binary_fn(ew.BINARY_OPS["min"], T(3), T(3)), a, b), [np.nan, np.nan, 1.0])
    same(run1(binary_fn(ew.BINARY_OPS["max"], T(3), T(3)), a, b), [np.nan, np.nan, 3.0])


def test_compares_and_booleans() -> None:
    a = np.array([1, 2, 3], dtype=np.int64)
    b = np.array([2, 2, 2], dtype=np.int64)
    for opcode, fn in [
        ("lessThan", np.less),
        ("greaterThanOrEqual", np.greater_equal),
        ("notEqual", np.not_equal),
    ]:
        same(
            run1(binary_fn(ew.COMPARE_OPS[opcode], T(3, dt="i64"), T(3, dt="i64")), a, b), fn(a, b)
        )
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    same(run1(binary_fn(ew.BINARY_OPS["and"], T(4, dt="bool"), T(4, dt="bool")), p, q), p & q)
    same(run1(binary_fn(ew.BINARY_OPS["or"], T(4, dt="bool"), S("bool")), p, False), p)
    same(run1(unary_fn(ew.NotOp, T(4, dt="bool")), p), ~p)


def test_select_broadcasts_and_cast() -> None:
    m = Mod()
    f = m.fn("f", [T(2, 3), S("f32"), T(1, 3, dt="bool")], T(2, 3))
    f.ret(f.add(ew.SelectOp(f.args[0], f.args[1], f.args[2])))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    mask = np.array([[True, False, True]])
    same(run_function(m.build(), "f", [a, -1.0, mask]), np.where(mask, a, np.float32(-1)))
    cast = run1(
        unary_fn(ew.DataTypeCastOp, T(2, dt="i8"), dtype="i64"), np.array([-3, 100], np.int8)
    )
    same(cast, np.array([-3, 100], np.int64))
    same(
        run1(unary_fn(ew.DataTypeCastOp, T(2), dtype="f64"), [0.1, 2.0]),
        np.float32([0.1, 2.0]).astype(np.float64),
    )


# ---------------------------------------------------------------------------
# Tensor ops
# ---------------------------------------------------------------------------


def test_dot_forms() -> None:
    rng = np.random.default_rng(1)
    a, b = (
        rng.standard_normal((2, 3)).astype(np.float32),
        rng.standard_normal((3, 4)).astype(np.float32),
    )
    got = run1(binary_fn(ts.DotOp, T(2, 3), T(3, 4)), a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-6)
    assert got.dtype == np.float32
    ba, bb = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 3, 1))
    np.testing.assert_allclose(
        run1(binary_fn(ts.DotOp, T(5, 2, 3, dt="f64"), T(5, 3, 1, dt="f64")), ba, bb), ba @ bb
    )
    v = run1(binary_fn(ts.DotOp, T(3, dt="i32"), T(3, dt="i32")), [1, 2, 3], [4, 5, 6])
    same(v, np.int32(32))
    same(
        run1(binary_fn(ts.DotOp, T(2, 0), T(0, 3)), np.zeros((2, 0)), np.zeros((0, 3))),
        np.zeros((2, 3)),
    )


def test_transpose_reverse_slice_shapes() -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    same(run1(unary_fn(ts.TransposeOp, T(2, 3, 4, dt="i32")), x), x.transpose(2, 1, 0))
    same(run1(unary_fn(ts.ReverseOp, T(2, 3, 4, dt="i32"), dims=[0, 2]), x), x[::-1, :, ::-1])
    same(run1(unary_fn(ts.SliceOp, T(2, 3, 4, dt="i32"), lower=1, upper=1), x), x[1:2])
    same(run1(unary_fn(ts.ShapeCastOp, T(2, 3, 4, dt="i32"), shape=[4, 6]), x), x.reshape(4, 6))
    same(run1(unary_fn(ts.ShapeCastOp, T(1, 1, dt="i32"), shape=[]), [[5]]), np.int32(5))
    same(run1(unary_fn(ts.PadShapeOp, T(2, 3, 4, dt="i32"), index=1), x), x[:, None])
    same(run1(unary_fn(ts.SqueezeShapeOp, T(2, 1, 4, dt="i32"), index=1), x[:, :1]), x[:, 0])
    same(run1(unary_fn(ts.RankOp, T(2, 3, 4, dt="i32")), x), np.int64(3))
    same(run1(unary_fn(ts.ShapeOp, T(2, 3, 4, dt="i32")), x), np.array([2, 3, 4], np.int64))
    same(run1(unary_fn(ts.UnitCountOp, T(2, 3, 4, dt="i32")), x), np.int64(24))
    same(run1(unary_fn(ts.ShapeOp, S("f32")), 1.0), np.zeros(0, np.int64))


def test_bit_cast_and_concatenate() -> None:
    x = np.array([1.0, -2.0], dtype=np.float32)
    got = run1(unary_fn(ts.BitCastOp, T(2), target=T(2, dt="i32")), x)
    same(got, x.view(np.int32))
    got = run1(unary_fn(ts.BitCastOp, T(2), target=S("i64")), x)
    same(got, x.view(np.int64).reshape(()))
    m = Mod()
    f = m.fn("f", [T(2, 1), T(2, 3)], T(2, 4))
    f.ret(f.op(ts.ConcatenateOp, f.args[0], f.args[1], axis=1))
    a, b = np.ones((2, 1), np.float32), np.zeros((2, 3), np.float32)
    same(run_function(m.build(), "f", [a, b]), np.concatenate([a, b], axis=1))


def reduce_fn(t: TensorType, comb: str, dims: list[int], init: float | int) -> ModuleOp:
    m = Mod()
    props = {"combinator": StringAttr(comb), "dims": attr(dims)}
    out = ts.ReduceOp.infer([t, S(t.dt)], props)[0]
    f = m.fn("f", [t], out)
    kind = "bool" if isinstance(init, bool) else "int" if isinstance(init, int) else "float"
    i = f.lit((kind, init), S(t.dt))
    f.ret(f.op(ts.ReduceOp, f.args[0], i, combinator=comb, dims=dims))
    return m.build()


def test_reduce_builtin_combinators() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    same(run1(reduce_fn(T(2, 3, 4), "add", [1], 0.5), x), x.sum(axis=1) + 0.5)
    same(run1(reduce_fn(T(2, 3, 4), "max", [0, 2], -1.0), x), x.max(axis=(0, 2)))
    same(run1(reduce_fn(T(2, 3, 4), "multiply", [0, 1, 2], 1.0), x), np.float32(0.0))
    ix = np.array([[1, 2], [3, 4]], dtype=np.int8)
    same(run1(reduce_fn(T(2, 2, dt="i8"), "add", [1], 0), ix), np.array([3, 7], np.int8))
    b = np.array([[True, False], [True, True]])
    same(run1(reduce_fn(T(2, 2, dt="bool"), "and", [1], True), b), [False, True])
    same(run1(reduce_fn(T(2, 2, dt="bool"), "or", [0], False), b), [True, True])


def test_reduce_zero_size_gives_init_and_nan_propagates() -> None:
    same(run1(reduce_fn(T(3, 0), "min", [1], 7.0), np.zeros((3, 0))), [7.0, 7.0, 7.0])
    x = np.array([[1.0, np.nan], [2.0, 3.0]], dtype=np.float32)
    same(run1(reduce_fn(T(2, 2), "max", [1], 0.0), x), [np.nan, 3.0])


def test_reduce_left_fold_for_other_combinators() -> None:
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float64)
    same(run1(reduce_fn(T(2, 3, dt="f64"), "subtract", [1], 100.0), x), [94.0, 85.0])
    # fold over both dims in C order: ((((64/1)/2)/3)/4)...
    same(run1(reduce_fn(T(2, 3, dt="f64"), "divide", [0, 1], 720.0), x), np.float64(1.0))
    ix = np.array([[2, 3], [2, 2]], dtype=np.int32)
    same(run1(reduce_fn(T(2, 2, dt="i32"), "power", [1], 2), ix), [64, 16])


def combinator_module(kind: str) -> ModuleOp:
    """@f reduces (or scans) with the function @comb(a, b) = 2a + b."""
    m = Mod()
    c = m.fn("comb", [S("i32"), S("i32")], S("i32"))
    two = c.const(2, "i32")
    c.ret(c.op(ew.AddOp, c.op(ew.MultiplyOp, c.args[0], two), c.args[1]))
    t = T(2, 3, dt="i32")
    f = m.fn("f", [t], T(2, dt="i32") if kind == "reduce" else t)
    fn = f.ref("comb")
    if kind == "reduce":
        init = f.const(1, "i32")
        f.ret(f.op(ts.ReduceOp, f.args[0], init, fn, combinator=None, dims=[1]))
    else:
        f.ret(f.op(ts.ScanOp, f.args[0], fn, dims=[1]))
    return m.build()


def test_function_combinators() -> None:
    x = np.array([[1, 2, 3], [0, 0, 1]], dtype=np.int32)
    # ((1·2 + 1)·2 + 2)·2 + 3 = 19; ((2+0)·2+0)·2+1 = 9
    same(run1(combinator_module("reduce"), x), [19, 9])
    same(run1(combinator_module("scan"), x), [[1, 4, 11], [0, 0, 1]])


def test_scan_builtin() -> None:
    m = Mod()
    f = m.fn("f", [T(2, 3, dt="i8")], T(2, 3, dt="i8"))
    f.ret(f.op(ts.ScanOp, f.args[0], combinator="add", dims=[1, 0]))
    x = np.array([[1, 2, 3], [100, 100, 100]], dtype=np.int8)
    want = np.cumsum(np.cumsum(x.astype(np.int64), axis=1), axis=0).astype(np.int8)
    same(run_function(m.build(), "f", [x]), want)
    m = Mod()
    f = m.fn("f", [T(4)], T(4))
    f.ret(f.op(ts.ScanOp, f.args[0], combinator="subtract", dims=[0]))
    same(run_function(m.build(), "f", [[10.0, 1.0, 2.0, 3.0]]), [10.0, 9.0, 7.0, 4.0])


def window_fn(
    t: TensorType, comb: str, init: float, window: list[int], strides: list[int], padding: str
) -> ModuleOp:
    m = Mod()
    props = {
        "combinator": StringAttr(comb),
        "window": attr(window),
        "strides": attr(strides),
        "padding": StringAttr(padding),
    }
    out = ts.ReduceWindowOp.infer([t, S(t.dt)], props)[0]
    f = m.fn("f", [t], out)
    i = f.const(init, t.dt)
    f.ret(
        f.op(
            ts.ReduceWindowOp,
            f.args[0],
            i,
            combinator=comb,
            window=window,
            strides=strides,
            padding=padding,
        )
    )
    return m.build()


def test_reduce_window_max_pool() -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    got = run1(window_fn(T(4, 4), "max", -np.inf, [2, 2], [2, 2], "none"), x)
    same(got, [[5, 7], [13, 15]])
    got = run1(window_fn(T(5), "add", 0.0, [3], [1], "none"), np.arange(5, dtype=np.float32))
    same(got, [3, 6, 9])


def test_reduce_window_padding_half_and_full() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype=np.float32)
    # half: out = (5-1)/2+1 = 3, total pad = 2*2+3-5 = 2 -> (1, 1): windows [p,1,2] [2,3,4] [4,5,p]
    got = run1(window_fn(T(5), "add", 10.0, [3], [2], "half"), x)
    same(got, [10 + 10 + 1 + 2, 10 + 2 + 3 + 4, 10 + 4 + 5 + 10])
    # full: out = (5+3-2)/1+1 = 7, total = 6+3-5 = 4 -> (2, 2)
    got = run1(window_fn(T(5), "max", 0.0, [3], [1], "full"), -x)
    same(got, [0, 0, 0, 0, 0, 0, 0])
    got = run1(window_fn(T(5), "add", 0.0, [3], [1], "full"), x)
    same(got, [1, 3, 6, 9, 12, 9, 5])
    # an odd total puts the extra padding on the high side: n=4, w=2, s=1 half -> out 4, total 1
    got = run1(window_fn(T(4), "add", 0.0, [2], [1], "half"), x[:4])
    same(got, [3, 5, 7, 4])
    same(
        run1(window_fn(T(2, 1), "add", 0.0, [3, 1], [1, 1], "none"), np.zeros((2, 1))),
        np.zeros((0, 1)),
    )


def naive_convolve(
    x: np.ndarray,
    k: np.ndarray,
    strides: list[int],
    pads: list[tuple[int, int]],
    ld: list[int],
    rd: list[int],
    groups: int,
) -> np.ndarray:
    """Convolution straight from the definition (loops over every index)."""
    n_sp = x.ndim - 2
    base = [(x.shape[2 + i] - 1) * ld[i] + 1 + pads[i][0] + pads[i][1] for i in range(n_sp)]
    win = [(k.shape[2 + i] - 1) * rd[i] + 1 for i in range(n_sp)]
    outs = [0 if win[i] > base[i] else (base[i] - win[i]) // strides[i] + 1 for i in range(n_sp)]
    og, cg = k.shape[0] // groups, k.shape[1]
    out = np.zeros((x.shape[0], og * groups, *outs), dtype=np.float64)

    def read(n: int, c: int, pos: tuple[int, ...]) -> float:
        idx = []
        for i, p in enumerate(pos):
            q = p - pads[i][0]
            if q < 0 or q % ld[i] or q // ld[i] >= x.shape[2 + i]:
                return 0.0
            idx.append(q // ld[i])
        return float(x[(n, c, *idx)])

    for n, o in itertools.product(range(x.shape[0]), range(og * groups)):
        g = o // og
        for y in itertools.product(*(range(v) for v in outs)):
            acc = 0.0
            for c in range(cg):
                for kk in itertools.product(*(range(v) for v in k.shape[2:])):
                    pos = tuple(y[i] * strides[i] + kk[i] * rd[i] for i in range(n_sp))
                    acc += read(n, g * cg + c, pos) * float(k[(o, c, *kk)])
            out[(n, o, *y)] = acc
    return out


@pytest.mark.parametrize(
    "xshape, kshape, strides, pads, ld, rd, groups",
    [
        ((1, 2, 5), (3, 2, 2), [1], [(0, 0)], [1], [1], 1),
        ((2, 4, 7), (4, 2, 3), [2], [(1, 2)], [2], [2], 2),
        ((1, 3, 5, 6), (2, 3, 3, 2), [2, 1], [(1, 1), (0, 2)], [1, 2], [2, 1], 1),
        ((1, 4, 4, 4), (5, 2, 2, 2), [1, 3], [(0, 0), (1, 0)], [1, 1], [1, 1], 2),
        ((1, 1, 2), (1, 1, 5), [1], [(0, 0)], [1], [1], 1),
    ],
)
def test_convolve_matches_definition(
    xshape: tuple[int, ...],
    kshape: tuple[int, ...],
    strides: list[int],
    pads: list[tuple[int, int]],
    ld: list[int],
    rd: list[int],
    groups: int,
) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xshape)
    k = rng.standard_normal(kshape)
    props = {
        "strides": strides,
        "padding": [p for pair in pads for p in pair],
        "left_dilation": ld,
        "right_dilation": rd,
        "groups": groups,
    }
    xt, kt = T(*xshape, dt="f64"), T(*kshape, dt="f64")
    m = Mod()
    out = ts.ConvolveOp.infer([xt, kt], {k_: attr(v) for k_, v in props.items()})[0]
    f = m.fn("f", [xt, kt], out)
    f.ret(f.op(ts.ConvolveOp, f.args[0], f.args[1], **props))
    got = run_function(m.build(), "f", [x, k])
    want = naive_convolve(x, k, strides, pads, ld, rd, groups)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_convolve_f32_stays_f32() -> None:
    m = Mod()
    f = m.fn("f", [T(1, 1, 3, 3), T(1, 1, 2, 2)], T(1, 1, 2, 2))
    f.ret(f.op(ts.ConvolveOp, f.args[0], f.args[1]))
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    got = run_function(m.build(), "f", [x, np.ones((1, 1, 2, 2), np.float32)])
    same(got, [[[[8, 12], [20, 24]]]])


# ---------------------------------------------------------------------------
# Literals and aggregates
# ---------------------------------------------------------------------------


def test_literals() -> None:
    m = Mod()
    point = m.struct("P", [("x", S("f32")), ("n", T(2, dt="i32"))])
    opt = m.enum("O", [("none", []), ("some", [S("i64"), S("bool")])])
    tup = TupleType(
        [
            S("f32"),
            T(2, 2, dt="i32"),
            ArrayType(2, S("bool")),
            point,
            opt,
            T(3, dt="f64"),
            T(2),
            S("i8"),
        ]
    )
    f = m.fn("f", [S("f32")], tup)
    nested = (
        "tensor",
        (("tensor", (("int", 1), ("int", 2))), ("tensor", (("int", 3), ("int", -4)))),
    )
    parts = [
        f.lit(("float", 1.5), S("f32")),
        f.lit(nested, T(2, 2, dt="i32")),
        f.lit(("array", (("bool", True), ("bool", False))), ArrayType(2, S("bool"))),
        f.lit(("struct", (("x", ("operand", 0)), ("n", ("int", 7)))), point, f.args[0]),
        f.lit(("enum", "some", (("int", 9), ("bool", True))), opt),
        f.lit(("float", 0.25), T(3, dt="f64")),
        f.lit(("tensor", (("operand", 0), ("float", 2.0))), T(2), f.args[0]),
        f.lit(("int", 200), S("i8")),
    ]
    f.ret(f.lit(("tuple", tuple(("operand", i) for i in range(len(parts)))), tup, *parts))
    got = run_function(m.build(), "f", [3.0])
    assert isinstance(got, tuple) and len(got) == 8
    same(got[0], np.float32(1.5))
    same(got[1], np.array([[1, 2], [3, -4]], np.int32))
    assert got[2][0] == True and got[2][1] == False  # noqa: E712
    same(got[3][0], np.float32(3.0))
    same(got[3][1], np.array([7, 7], np.int32))
    assert got[4][0] == "some" and got[4][1][0] == 9 and got[4][1][0].dtype == np.int64
    same(got[5], np.full(3, 0.25))
    same(got[6], np.array([3.0, 2.0], np.float32))
    same(got[7], np.int8(-56))


def test_zero_and_undefined_literals() -> None:
    m = Mod()
    opt = m.enum("O", [("some", [S("f32")]), ("none", [])])
    tup = TupleType([T(2, 3), S("i32"), opt, TupleType([]), PointerType(S("f32"))])
    f = m.fn("f", [], tup)
    z = f.lit(("zero",), T(2, 3))
    u = f.lit(("undefined",), TupleType([S("i32"), opt, TupleType([]), PointerType(S("f32"))]))
    parts = [z] + [f.op(mem.ExtractOp, u, keys=[i]) for i in range(4)]
    f.ret(f.lit(("tuple", tuple(("operand", i) for i in range(5))), tup, *parts))
    got = run_function(m.build(), "f", [])
    same(got[0], np.zeros((2, 3), np.float32))
    same(got[1], np.int32(0))
    assert got[2] == ("none", ()) and got[3] == () and got[4] is None


def test_extract_insert() -> None:
    m = Mod()
    point = m.struct("P", [("x", S("f32")), ("v", T(3, dt="i32"))])
    agg = TupleType([ArrayType(2, point), T(2, 2)])
    f = m.fn("f", [agg, S("i64"), S("i32")], TupleType([S("i32"), agg, T(2)]))
    a = f.args[0]
    e1 = f.op(mem.ExtractOp, a, f.args[1], keys=[0, None, "v", 2])
    ins = f.op(mem.InsertOp, f.args[2], a, keys=[0, 0, "v", 1])
    row = f.op(mem.ExtractOp, a, keys=[1, 1])
    f.ret(
        f.lit(
            ("tuple", (("operand", 0), ("operand", 1), ("operand", 2))),
            TupleType([S("i32"), agg, T(2)]),
            e1,
            ins,
            row,
        )
    )
    p0 = (1.0, [1, 2, 3])
    p1 = (2.0, [4, 5, 6])
    mat = [[1.0, 2.0], [3.0, 4.0]]
    got = run_function(m.build(), "f", [((p0, p1), mat), 1, 42])
    same(got[0], np.int32(6))
    same(got[1][0][0][1], np.array([1, 42, 3], np.int32))
    same(got[1][0][1][1], np.array([4, 5, 6], np.int32))
    same(got[2], np.array([3.0, 4.0], np.float32))


# ---------------------------------------------------------------------------
# Control flow and calls
# ---------------------------------------------------------------------------


def gcd_module() -> ModuleOp:
    m = Mod()
    f = m.fn("gcd", [S("i64"), S("i64")], S("i64"))
    done, rec = f.block("done"), f.block("rec")
    zero = f.const(0, "i64")
    is_zero = f.op(ew.COMPARE_OPS["equal"], f.args[1], zero)
    f.add(ConditionalOp(is_zero, done, [], rec, []))
    f.at(done).ret(f.args[0])
    f.at(rec)
    r = f.op(ew.BINARY_OPS["modulo"], f.args[0], f.args[1])
    f.ret(f.apply("gcd", f.args[1], r))
    return m.build()


def test_recursion_gcd() -> None:
    mod = gcd_module()
    same(run_function(mod, "gcd", [1071, 462]), np.int64(21))
    same(run_function(mod, "gcd", [17, 5]), np.int64(1))


def even_odd_module() -> ModuleOp:
    m = Mod()
    for name, other, base in (("even", "odd", True), ("odd", "even", False)):
        f = m.fn(name, [S("i64")], S("bool"))
        done, rec = f.block("done"), f.block("rec")
        is_zero = f.op(ew.COMPARE_OPS["equal"], f.args[0], f.const(0, "i64"))
        f.add(ConditionalOp(is_zero, done, [], rec, []))
        f.at(done).ret(f.const(base, "bool"))
        f.at(rec)
        m.symbols.functions.setdefault(other, FunctionType([S("i64")], S("bool")))
        f.ret(f.apply(other, f.op(ew.SubtractOp, f.args[0], f.const(1, "i64"))))
    return m.build()


def test_mutual_recursion_deeper_than_python_stack() -> None:
    mod = even_odd_module()
    assert bool(run_function(mod, "even", [10])) is True
    assert bool(run_function(mod, "odd", [7])) is True
    # 3001 nested DLVM calls: far beyond the Python recursion limit
    assert bool(run_function(mod, "even", [3001])) is False


def test_loop_with_branch_and_conditional() -> None:
    """sum of i for i in [0, n) with a header block carrying (i, acc)."""
    m = Mod()
    f = m.fn("sum", [S("i32")], S("i32"))
    header, body, exit_ = f.block("header", [S("i32"), S("i32")]), f.block("body"), f.block("exit")
    f.add(BranchOp(header, [f.const(0, "i32"), f.const(0, "i32")]))
    i, acc = header.args
    f.at(header)
    f.add(ConditionalOp(f.op(ew.COMPARE_OPS["lessThan"], i, f.args[0]), body, [], exit_, []))
    f.at(body)
    f.add(BranchOp(header, [f.op(ew.AddOp, i, f.const(1, "i32")), f.op(ew.AddOp, acc, i)]))
    f.at(exit_).ret(acc)
    mod = m.build()
    same(run_function(mod, "sum", [100]), np.int32(4950))
    same(run_function(mod, "sum", [0]), np.int32(0))


def test_branch_enum_binds_case_values() -> None:
    m = Mod()
    shape = m.enum("Shape", [("circle", [S("f64")]), ("rect", [S("f64"), S("f64")]), ("empty", [])])
    f = m.fn("area", [shape], S("f64"))
    circle, rect, empty = (
        f.block("circle", [S("f64")]),
        f.block("rect", [S("f64"), S("f64")]),
        f.block("empty"),
    )
    f.add(BranchEnumOp(f.args[0], [("circle", circle), ("rect", rect), ("empty", empty)]))
    f.at(circle)
    r = circle.args[0]
    f.ret(f.op(ew.MultiplyOp, f.op(ew.MultiplyOp, r, r), f.const(3.0, "f64")))
    f.at(rect).ret(f.op(ew.MultiplyOp, rect.args[0], rect.args[1]))
    f.at(empty).ret(f.const(0.0, "f64"))
    mod = m.build()
    same(run_function(mod, "area", [("circle", (2.0,))]), np.float64(12.0))
    same(
        run_function(mod, "area", [("rect", (np.float64(2.0), np.float64(5.0)))]), np.float64(10.0)
    )
    same(run_function(mod, "area", [("empty", ())]), np.float64(0.0))


def test_indirect_apply_through_function_value() -> None:
    m = Mod()
    sq = m.fn("sq", [S("f32")], S("f32"))
    sq.ret(sq.op(ew.MultiplyOp, sq.args[0], sq.args[0]))
    fn_t = FunctionType([S("f32")], S("f32"))
    tw = m.fn("twice", [fn_t, S("f32")], S("f32"))
    once = tw.add(
        mem.ApplyIndirectOp.create(operands=[tw.args[0], tw.args[1]], result_types=[S("f32")])
    )
    tw.ret(tw.add(mem.ApplyIndirectOp.create(operands=[tw.args[0], once], result_types=[S("f32")])))
    f = m.fn("f", [S("f32")], S("f32"))
    f.ret(f.apply("twice", f.ref("sq"), f.args[0]))
    same(run_function(m.build(), "f", [3.0]), np.float32(81.0))


def test_var_state_across_calls_and_void_return() -> None:
    m = Mod()
    m.var("count", S("i64"))
    bump = m.fn("bump", [S("i64")], TupleType([]))
    g = bump.ref("count")
    bump.add(
        mem.StoreOp.create(operands=[bump.op(ew.AddOp, bump.op(mem.LoadOp, g), bump.args[0]), g])
    )
    bump.ret()
    read = m.fn("read", [], S("i64"))
    read.ret(read.op(mem.LoadOp, read.ref("count")))
    mod = m.build()
    interp = Interpreter(mod)
    assert interp.call("bump", [5]) == ()
    interp.call("bump", [3])
    same(interp.call("read", []), np.int64(8))
    same(Interpreter(mod).call("read", []), np.int64(0))


# ---------------------------------------------------------------------------
# Memory, stacks, random, trap
# ---------------------------------------------------------------------------


def test_pointers_element_pointer_and_copy() -> None:
    m = Mod()
    point = m.struct("P", [("x", S("f32")), ("v", T(3, dt="i32"))])
    f = m.fn("f", [S("i32")], TupleType([point, point, T(2)]))
    buf = f.op(mem.AllocateStackOp, elem_type=point, count=2)
    field_v = f.op(mem.ElementPointerOp, buf, keys=["v", 1])
    f.add(mem.StoreOp.create(operands=[f.args[0], field_v]))
    fx = f.op(mem.ElementPointerOp, buf, keys=["x"])
    f.add(mem.StoreOp.create(operands=[f.const(2.5, "f32"), fx]))
    heap = f.op(mem.AllocateHeapOp, f.const(2, "i64"), elem_type=point)
    f.add(mem.CopyOp.create(operands=[buf, heap, f.const(1, "i64")]))
    first = f.op(mem.LoadOp, heap)
    second = f.op(mem.LoadOp, f.op(mem.ElementPointerOp, buf, keys=["x"]))
    arr = f.op(mem.AllocateHeapOp, f.const(1, "i64"), elem_type=T(2))
    f.add(mem.StoreOp.create(operands=[f.lit(("float", 1.0), T(2)), arr]))
    elem1 = f.op(mem.ElementPointerOp, arr, keys=[1])
    f.add(mem.StoreOp.create(operands=[second, elem1]))
    tensor = f.op(mem.LoadOp, arr)
    f.add(mem.DeallocateOp.create(operands=[heap]))
    untouched = f.lit(("undefined",), point)
    f.ret(
        f.lit(
            ("tuple", (("operand", 0), ("operand", 1), ("operand", 2))),
            TupleType([point, point, T(2)]),
            first,
            untouched,
            tensor,
        )
    )
    x, zero, t = run_function(m.build(), "f", [9])
    same(x[0], np.float32(2.5))
    same(x[1], np.array([0, 9, 0], np.int32))
    same(zero[1], np.zeros(3, np.int32))
    same(t, np.array([1.0, 2.5], np.float32))


def test_use_after_free_and_box_refcount() -> None:
    m = Mod()
    f = m.fn("f", [], S("f32"))
    heap = f.op(mem.AllocateHeapOp, f.const(1, "i64"), elem_type=S("f32"))
    f.add(mem.DeallocateOp.create(operands=[heap]))
    f.ret(f.op(mem.LoadOp, heap))
    with pytest.raises(UndefinedBehaviorError, match="freed"):
        run_function(m.build(), "f", [])

    m = Mod()
    f = m.fn("f", [S("f32")], S("f32"))
    box = f.op(mem.AllocateBoxOp, elem_type=S("f32"))
    f.add(mem.RetainOp.create(operands=[box]))
    p = f.op(mem.ProjectBoxOp, box)
    f.add(mem.StoreOp.create(operands=[f.args[0], p]))
    f.add(mem.ReleaseOp.create(operands=[box]))
    value = f.op(mem.LoadOp, p)
    f.add(mem.ReleaseOp.create(operands=[box]))
    f.ret(value)
    same(run_function(m.build(), "f", [4.0]), np.float32(4.0))


def test_stack_push_pop() -> None:
    m = Mod()
    f = m.fn("f", [S("i32"), S("i32")], S("i32"))
    s = f.op(mem.CreateStackOp)
    f.add(mem.PushOp.create(operands=[f.args[0], s]))
    f.add(mem.PushOp.create(operands=[f.args[1], s]))
    top = f.op(mem.PopOp, s, elem_type=S("i32"))
    below = f.op(mem.PopOp, s, elem_type=S("i32"))
    f.add(mem.DestroyStackOp.create(operands=[s]))
    f.ret(f.op(ew.SubtractOp, top, below))
    same(run_function(m.build(), "f", [1, 10]), np.int32(9))
    assert StackType() == f.op(mem.CreateStackOp).type


def test_random_is_seeded_and_in_range() -> None:
    for dt, lo, hi in (("f32", -1.0, 1.0), ("i32", 3, 7), ("f64", 5.0, 5.0)):
        m = Mod()
        f = m.fn("f", [], T(1000, dt=dt))
        f.ret(f.op(mem.RandomOp, f.const(lo, dt), f.const(hi, dt), shape=[1000]))
        mod = m.build()
        a, b = run_function(mod, "f", [], seed=3), run_function(mod, "f", [], seed=3)
        same(a, b)
        assert a.dtype == numpy_dtype(dt)
        if lo < hi:
            assert a.min() >= lo and a.max() < hi and len(np.unique(a)) > 3
            assert not np.array_equal(a, run_function(mod, "f", [], seed=4))
        else:
            same(a, np.full(1000, lo))


def test_trap() -> None:
    m = Mod()
    f = m.fn("f", [], TupleType([]))
    f.add(mem.TrapOp.create())
    f.ret()
    with pytest.raises(TrapError):
        run_function(m.build(), "f", [])
    assert issubclass(TrapError, RuntimeError)


def test_argument_shape_checked() -> None:
    with pytest.raises(ValueError, match="expected"):
        run1(unary_fn(ew.UNARY_OPS["exp"], T(2, 3)), np.zeros((3, 2)))


# ---------------------------------------------------------------------------
# Programs written in DLVM text
# ---------------------------------------------------------------------------


def parse(text: str) -> ModuleOp:
    from dlc.parser import parse_module

    return parse_module('module "t"\nstage raw\n\n' + text)


def test_text_mlp_layer_and_struct_params() -> None:
    mod = parse(
        """struct $Params {
    #w: <3 x 2 x f32>
    #b: <1 x 2 x f32>
}

var @params: $Params

func @init: ($Params) -> () {
'entry(%p: $Params):
    store %p: $Params to @params: *$Params
    return
}

func @inference: (<4 x 3 x f32>) -> <4 x 2 x f32> {
'entry(%x: <4 x 3 x f32>):
    %p = load @params: *$Params
    %w = extract #w from %p: $Params
    %b = extract #b from %p: $Params
    %0.3 = dot %x: <4 x 3 x f32>, %w: <3 x 2 x f32>
    %0.4 = add %0.3: <4 x 2 x f32>, %b: <1 x 2 x f32>
    %0.5 = literal 0: f32
    %0.6 = max %0.4: <4 x 2 x f32>, %0.5: f32
    return %0.6: <4 x 2 x f32>
}
"""
    )
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((1, 2)).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    interp = Interpreter(mod)
    interp.call("init", [(w, b)])
    got = interp.call("inference", [x])
    np.testing.assert_allclose(got, np.maximum(x @ w + b, 0), rtol=1e-6)
    assert got.dtype == np.float32


def test_text_factorial_recursion_and_function_combinator() -> None:
    mod = parse(
        """func @fact: (i64) -> i64 {
'entry(%n: i64):
    %c = lessThanOrEqual %n: i64, 1: i64
    conditional %c: bool then 'base() else 'rec()
'base():
    return 1: i64
'rec():
    %m = subtract %n: i64, 1: i64
    %r = apply @fact(%m: i64): (i64) -> i64
    %p = multiply %n: i64, %r: i64
    return %p: i64
}

func @hypot: (f64, f64) -> f64 {
'entry(%a: f64, %b: f64):
    %a2 = multiply %a: f64, %a: f64
    %b2 = multiply %b: f64, %b: f64
    %s = add %a2: f64, %b2: f64
    %r = sqrt %s: f64
    return %r: f64
}

func @norms: (<2 x 3 x f64>) -> <2 x f64> {
'entry(%x: <2 x 3 x f64>):
    %r = reduce %x: <2 x 3 x f64> by @hypot: (f64, f64) -> f64 init 0: f64 along 1
    return %r: <2 x f64>
}
"""
    )
    same(run_function(mod, "fact", [20]), np.int64(math.factorial(20)))
    same(run_function(mod, "fact", [21]), np.int64(math.factorial(21) % 2**64 - 2**64))
    x = np.array([[3.0, 4.0, 12.0], [1.0, 1.0, 1.0]])
    np.testing.assert_allclose(run_function(mod, "norms", [x]), [13.0, math.sqrt(3)], rtol=1e-15)


def test_text_enum_option_and_pooling() -> None:
    mod = parse(
        """enum $Opt {
    ?none()
    ?some(<2 x 2 x f32>)
}

func @pool: (<1 x 1 x 4 x 4 x f32>) -> $Opt {
'entry(%x: <1 x 1 x 4 x 4 x f32>):
    %p = reduceWindow %x: <1 x 1 x 4 x 4 x f32> by max init -inf: f32 dims 1, 1, 2, 2 strides 1, 1, 2, 2 padding none
    %q = shapeCast %p: <1 x 1 x 2 x 2 x f32> to 2 x 2
    %e = literal ?some(%q: <2 x 2 x f32>): $Opt
    return %e: $Opt
}

func @get: ($Opt) -> <2 x 2 x f32> {
'entry(%o: $Opt):
    branchEnum %o: $Opt case ?none 'none case ?some 'some
'none():
    %z = literal zero: <2 x 2 x f32>
    return %z: <2 x 2 x f32>
'some(%v: <2 x 2 x f32>):
    return %v: <2 x 2 x f32>
}
"""
    )
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    opt = run_function(mod, "pool", [x])
    assert opt[0] == "some"
    same(opt[1][0], [[5, 7], [13, 15]])
    same(run_function(mod, "get", [opt]), [[5, 7], [13, 15]])
    same(run_function(mod, "get", [("none", ())]), np.zeros((2, 2), np.float32))


def test_f16_stays_f16_and_int_literal_wraps_to_width() -> None:
    m = Mod()
    f = m.fn("f", [T(3, dt="f16")], T(3, dt="f16"))
    f.ret(f.op(ew.UNARY_OPS["exp"], f.op(ew.AddOp, f.args[0], f.const(1, "f16"))))
    x = np.array([0.0, 0.5, -1.0], dtype=np.float16)
    same(run_function(m.build(), "f", [x]), np.exp(x + np.float16(1)))


def test_apply_through_pointer_to_function_and_extern_error() -> None:
    m = Mod()
    fn_t = FunctionType([S("f32")], S("f32"))
    m.var("fp", fn_t)
    neg = m.fn("neg", [S("f32")], S("f32"))
    neg.ret(neg.op(ew.UNARY_OPS["negate"], neg.args[0]))
    m.ops.append(FuncOp("ext", fn_t, decl=StringAttr("extern")))
    m.symbols.functions["ext"] = fn_t
    f = m.fn("f", [S("f32")], S("f32"))
    ptr = f.ref("fp")
    f.add(mem.StoreOp.create(operands=[f.ref("neg"), ptr]))
    f.ret(f.add(mem.ApplyIndirectOp.create(operands=[ptr, f.args[0]], result_types=[S("f32")])))
    g = m.fn("g", [S("f32")], S("f32"))
    g.ret(g.apply("ext", g.args[0]))
    mod = m.build()
    same(run_function(mod, "f", [2.0]), np.float32(-2.0))
    with pytest.raises(DiagnosticError, match="cannot call extern function @ext"):
        run_function(mod, "g", [2.0])


def test_fold_tree_is_iterative() -> None:
    depth = 100_000
    total = fold_tree(depth, lambda n: [n - 1] if n else [], lambda n, kids: 1 + sum(kids))
    assert total == depth + 1


def test_stack_allocation_dies_with_its_call() -> None:
    m = Mod()
    mk = m.fn("mk", [], PointerType(S("i32")))
    mk.ret(mk.op(mem.AllocateStackOp, elem_type=S("i32"), count=1))
    f = m.fn("f", [], S("i32"))
    f.ret(f.op(mem.LoadOp, f.apply("mk")))
    with pytest.raises(UndefinedBehaviorError, match="freed"):
        run_function(m.build(), "f", [])


def test_every_instruction_op_has_a_handler() -> None:
    from dlc.dialects.graph import all_graph_ops
    from dlc.semantics.handlers import HANDLERS

    structural = {"StructOp", "EnumOp", "TypeAliasOp", "VarOp", "FuncOp"}
    run_loop = {
        "BranchOp",
        "ConditionalOp",
        "BranchEnumOp",
        "ReturnOp",
        "ApplyOp",
        "ApplyIndirectOp",
    }
    missing = [c.__name__ for c in all_graph_ops() if c not in HANDLERS]
    assert set(missing) == structural | run_loop
