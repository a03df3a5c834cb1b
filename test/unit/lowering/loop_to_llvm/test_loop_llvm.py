"""Loop-level IR built by hand -> lower-loop-to-llvm -> JIT -> run on NumPy arrays."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    FloatAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.diagnostics import DiagnosticError
from dlc.dialects import loop
from dlc.dialects.abi import function_symbol
from dlc.lowering.loop_to_llvm.lower_loop_to_llvm import LowerLoopToLLVMPass
from dlc.runtime.context import CallContext
from dlc.runtime.jit import JITModule, assembly, llvm_ir

NP = {f16: np.float16, f32: np.float32, f64: np.float64, i8: np.int8, i16: np.int16}
NP.update({i32: np.int32, i64: np.int64})


def c64(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, i64))).result


def for_range(b: Builder, n: int, inits: Sequence[SSAValue] = ()) -> tuple[loop.ForOp, Builder]:
    """`loop.for %i = 0 to n step 1`, returning the op and a builder for its body."""
    op = b.insert(loop.ForOp(c64(b, 0), c64(b, n), c64(b, 1), list(inits)))
    return op, Builder(InsertPoint.at_end(op.body.block))


def lower_and_jit(funcs: Sequence[loop.FuncOp], opt_level: int = 2) -> tuple[ModuleOp, JITModule]:
    module = ModuleOp(list(funcs))
    module.verify()
    LowerLoopToLLVMPass().apply(Context(), module)
    module.verify()
    return module, JITModule(module, opt_level)


def call(jit: JITModule, name: str, *arrays: np.ndarray) -> None:
    """Call `name(ctx, arrays...)` with a fresh call context (dlc.dialects.abi)."""
    ctx = CallContext(0)
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (1 + len(arrays))))
    proto(jit.address(function_symbol(name)))(ctx.address, *[a.ctypes.data for a in arrays])
    assert ctx.status.value == 0


Body = Callable[[Builder, list[SSAValue]], SSAValue]


def elementwise(
    name: str, in_types: Sequence[Attribute], out_type: Attribute, n: int, body: Body
) -> loop.FuncOp:
    """out[i] = body(in0[i], in1[i], ...) for i < n."""
    mtypes = [MemRefType(t, [n]) for t in (*in_types, out_type)]
    func = loop.FuncOp(name, mtypes)
    b = Builder(InsertPoint.at_end(func.body.block))
    for_op, bb = for_range(b, n)
    loads = [bb.insert(loop.LoadOp(arg, [for_op.iv])).res for arg in func.args[:-1]]
    bb.insert(loop.StoreOp(body(bb, loads), func.args[-1], [for_op.iv]))
    bb.insert(loop.YieldOp())
    b.insert(loop.ReturnOp())
    return func


def run_elementwise(
    in_types: Sequence[Attribute], out_type: Attribute, inputs: Sequence[np.ndarray], body: Body
) -> np.ndarray:
    n = len(inputs[0])
    _, jit = lower_and_jit([elementwise("f", in_types, out_type, n, body)])
    out = np.zeros(n, NP[out_type])
    call(jit, "f", *inputs, out)
    return out


def op1(kind: type[Operation]) -> Body:
    return lambda b, xs: b.insert(kind(xs[0])).results[0]


def op2(kind: type[Operation]) -> Body:
    return lambda b, xs: b.insert(kind(xs[0], xs[1])).results[0]


def test_add_2d_loop_nest():
    m = MemRefType(f32, [5, 7])
    func = loop.FuncOp("add", [m, m, m])
    x, y, out = func.args
    b = Builder(InsertPoint.at_end(func.body.block))
    outer, bo = for_range(b, 5)
    inner, bi = for_range(bo, 7)
    bo.insert(loop.YieldOp())
    idx = [outer.iv, inner.iv]
    s = bi.insert(arith.AddfOp(bi.insert(loop.LoadOp(x, idx)), bi.insert(loop.LoadOp(y, idx))))
    bi.insert(loop.StoreOp(s, out, idx))
    bi.insert(loop.YieldOp())
    b.insert(loop.ReturnOp())
    _, jit = lower_and_jit([func])
    a = np.random.rand(5, 7).astype(np.float32)
    c = np.random.rand(5, 7).astype(np.float32)
    o = np.zeros_like(a)
    call(jit, "add", a, c, o)
    np.testing.assert_array_equal(o, a + c)


def test_reduction_with_iter_args():
    func = loop.FuncOp("total", [MemRefType(f64, [1000]), MemRefType(f64, [])])
    x, out = func.args
    b = Builder(InsertPoint.at_end(func.body.block))
    zero = b.insert(arith.ConstantOp(FloatAttr(0.0, f64))).result
    for_op, bb = for_range(b, 1000, [zero])
    v = bb.insert(loop.LoadOp(x, [for_op.iv]))
    bb.insert(loop.YieldOp(bb.insert(arith.AddfOp(for_op.iter_args[0], v))))
    b.insert(loop.StoreOp(for_op.res[0], out, []))
    b.insert(loop.ReturnOp())
    _, jit = lower_and_jit([func], opt_level=0)
    a = np.random.rand(1000)
    o = np.zeros((), np.float64)
    call(jit, "total", a, o)
    assert o == pytest.approx(a.sum(), rel=1e-12)


def test_if_alloc_copy_call():
    """g: tmp = copy(x); out = sum(tmp) > 0 ? 1.0 : -1.0, computed through a call to h."""
    v, s = MemRefType(f32, [8]), MemRefType(f32, [])
    h = loop.FuncOp("h", [v, s])
    hb = Builder(InsertPoint.at_end(h.body.block))
    zero = hb.insert(arith.ConstantOp(FloatAttr(0.0, f32))).result
    for_op, bb = for_range(hb, 8, [zero])
    x = bb.insert(loop.LoadOp(h.args[0], [for_op.iv]))
    bb.insert(loop.YieldOp(bb.insert(arith.AddfOp(for_op.iter_args[0], x))))
    positive = hb.insert(arith.CmpfOp(for_op.res[0], zero, "ogt"))
    if_op = hb.insert(loop.IfOp(positive, [f32]))
    tb = Builder(InsertPoint.at_end(if_op.then_region.block))
    tb.insert(loop.YieldOp(tb.insert(arith.ConstantOp(FloatAttr(1.0, f32)))))
    eb = Builder(InsertPoint.at_end(if_op.else_region.block))
    eb.insert(loop.YieldOp(eb.insert(arith.ConstantOp(FloatAttr(-1.0, f32)))))
    hb.insert(loop.StoreOp(if_op.res[0], h.args[1], []))
    hb.insert(loop.ReturnOp())

    g = loop.FuncOp("g", [v, s])
    gb = Builder(InsertPoint.at_end(g.body.block))
    tmp = gb.insert(loop.AllocOp(v))
    gb.insert(loop.CopyOp(g.args[0], tmp))
    gb.insert(loop.CallOp("h", [tmp.res, g.args[1]]))
    gb.insert(loop.DeallocOp(tmp))
    gb.insert(loop.ReturnOp())
    _, jit = lower_and_jit([h, g])
    out = np.zeros((), np.float32)
    for data, expected in ((np.arange(8.0), 1.0), (-np.arange(8.0), -1.0)):
        call(jit, "g", data.astype(np.float32), out)
        assert out == expected


def test_if_without_else_stores_conditionally():
    v = MemRefType(i32, [6])
    func = loop.FuncOp("clip", [v, v])
    b = Builder(InsertPoint.at_end(func.body.block))
    for_op, bb = for_range(b, 6)
    x = bb.insert(loop.LoadOp(func.args[0], [for_op.iv])).res
    bb.insert(loop.StoreOp(x, func.args[1], [for_op.iv]))
    zero = bb.insert(arith.ConstantOp(IntegerAttr(0, i32)))
    negative = bb.insert(arith.CmpiOp(x, zero, "slt"))
    if_op = bb.insert(loop.IfOp(negative, []))
    tb = Builder(InsertPoint.at_end(if_op.then_region.block))
    tb.insert(loop.StoreOp(zero, func.args[1], [for_op.iv]))
    tb.insert(loop.YieldOp())
    bb.insert(loop.YieldOp())
    b.insert(loop.ReturnOp())
    _, jit = lower_and_jit([func])
    a = np.array([-3, 2, -1, 0, 5, -7], np.int32)
    out = np.zeros(6, np.int32)
    call(jit, "clip", a, out)
    np.testing.assert_array_equal(out, np.maximum(a, 0))


INT_EDGE = {
    np.int8: [0, 1, -1, 7, -7, 127, -128, 3, -3],
    np.int32: [0, 1, -1, 7, -7, 2**31 - 1, -(2**31), 3, -3],
}


def _int_pairs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    values = INT_EDGE[dtype]
    a = np.array([x for x in values for _ in values], dtype)
    b = np.array([y for _ in values for y in values], dtype)
    return a, b


def _trunc_div(a: int, b: int, bits: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return (q + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)  # wraps INT_MIN / -1


def _expected(kind: str, a: np.ndarray, b: np.ndarray, bits: int) -> list[int]:
    out = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        q = _trunc_div(x, y, bits)
        if kind == "rem":
            out.append(0 if y == 0 else x - _trunc_div(x, y, 64) * y)
        elif kind == "floordiv":
            out.append(0 if y == 0 else ((x // y + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)))
        elif kind == "ceildiv":
            out.append(
                0 if y == 0 else ((-(-x // y) + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1))
            )
        else:
            out.append(q)
    return out


@pytest.mark.parametrize("dtype,t", [(np.int8, i8), (np.int32, i32)])
@pytest.mark.parametrize(
    "kind,op",
    [
        ("div", arith.DivSIOp),
        ("rem", arith.RemSIOp),
        ("floordiv", arith.FloorDivSIOp),
        ("ceildiv", arith.CeilDivSIOp),
    ],
)
def test_signed_division_by_zero_is_zero_and_int_min_wraps(dtype, t, kind, op):
    a, b = _int_pairs(dtype)
    out = run_elementwise([t, t], t, [a, b], op2(op))
    assert out.tolist() == _expected(kind, a, b, t.width.data)


def test_unsigned_division_by_zero_is_zero():
    a = np.array([7, 200, 255, 0, 9], np.uint8).view(np.int8)
    b = np.array([0, 7, 16, 3, 0], np.uint8).view(np.int8)
    q = run_elementwise([i8, i8], i8, [a, b], op2(arith.DivUIOp)).view(np.uint8)
    r = run_elementwise([i8, i8], i8, [a, b], op2(arith.RemUIOp)).view(np.uint8)
    assert q.tolist() == [0, 28, 15, 0, 0]
    assert r.tolist() == [0, 4, 15, 0, 0]


FLOAT_UNARY = [
    (math.ExpOp, np.exp),
    (math.LogOp, np.log),
    (math.Log2Op, np.log2),
    (math.Log10Op, np.log10),
    (math.Log1pOp, np.log1p),
    (math.ExpM1Op, np.expm1),
    (math.Exp2Op, np.exp2),
    (math.SqrtOp, np.sqrt),
    (math.RsqrtOp, lambda x: 1 / np.sqrt(x)),
    (math.TanhOp, np.tanh),
    (math.SinOp, np.sin),
    (math.CosOp, np.cos),
    (math.TanOp, np.tan),
    (math.SinhOp, np.sinh),
    (math.CoshOp, np.cosh),
    (math.AsinOp, np.arcsin),
    (math.AcosOp, np.arccos),
    (math.AtanOp, np.arctan),
    (math.AsinhOp, np.arcsinh),
    (math.AtanhOp, np.arctanh),
    (math.CbrtOp, np.cbrt),
    (math.AbsFOp, np.abs),
    (math.FloorOp, np.floor),
    (math.CeilOp, np.ceil),
    (math.TruncOp, np.trunc),
    (math.RoundOp, lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)),
    (math.RoundEvenOp, np.rint),
    (arith.NegfOp, np.negative),
]


@pytest.mark.parametrize("t", [f32, f64])
@pytest.mark.parametrize("kind,ref", FLOAT_UNARY, ids=[k.name for k, _ in FLOAT_UNARY])
def test_float_unary(t, kind, ref):
    x = np.array([0.1, 0.5, 0.7, -0.3, -0.5, 1.5, 2.5, -2.5, 0.0, 0.25], NP[t])
    if kind in (math.LogOp, math.Log2Op, math.Log10Op, math.SqrtOp, math.RsqrtOp):
        x = np.abs(x) + NP[t](0.5)
    with np.errstate(all="ignore"):
        expected = ref(x)
    out = run_elementwise([t], t, [x], op1(kind))
    rtol = 2e-6 if t == f32 else 1e-14
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol, equal_nan=True)


def test_erf_and_erfc():
    import math as pymath

    x = np.array([-2.0, -0.5, 0.0, 0.3, 1.0, 4.0])
    np.testing.assert_allclose(
        run_elementwise([f64], f64, [x], op1(math.ErfOp)), [pymath.erf(v) for v in x], rtol=1e-15
    )
    np.testing.assert_allclose(
        run_elementwise([f64], f64, [x], op1(loop.ErfcOp)), [pymath.erfc(v) for v in x], rtol=1e-15
    )


FLOAT_BINARY = [
    (arith.AddfOp, np.add),
    (arith.SubfOp, np.subtract),
    (arith.MulfOp, np.multiply),
    (arith.DivfOp, np.divide),
    (loop.RemFOp, np.fmod),
    (arith.MaximumfOp, np.maximum),
    (arith.MinimumfOp, np.minimum),
    (arith.MaxnumfOp, np.fmax),
    (arith.MinnumfOp, np.fmin),
    (math.PowFOp, np.power),
    (math.CopySignOp, np.copysign),
    (math.Atan2Op, np.arctan2),
]


@pytest.mark.parametrize("t", [f16, f32, f64])
@pytest.mark.parametrize("kind,ref", FLOAT_BINARY, ids=[k.name for k, _ in FLOAT_BINARY])
def test_float_binary(t, kind, ref):
    a = np.array([1.5, -2.0, 0.5, np.nan, 3.0, -0.0, 7.0], NP[t])
    b = np.array([0.5, 3.0, np.nan, 1.0, -2.0, 1.0, -0.0], NP[t])
    if kind is math.PowFOp:
        a = np.abs(a)
    with np.errstate(all="ignore"):
        expected = ref(a, b)
    out = run_elementwise([t, t], t, [a, b], op2(kind))
    rtol = {f16: 1e-3, f32: 1e-6, f64: 1e-15}[t]
    np.testing.assert_allclose(out, expected, rtol=rtol, equal_nan=True)


@pytest.mark.parametrize("t", [f16, f32])
def test_f16_libm_and_intrinsics(t):
    x = np.array([0.1, 0.5, -1.0, 2.0], NP[t])
    out = run_elementwise([t], t, [x], op1(math.TanhOp))
    np.testing.assert_allclose(out, np.tanh(x), rtol=1e-3)
    out = run_elementwise([t], t, [x], op1(math.ExpOp))
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-3)


INT_BINARY = [
    (arith.AddiOp, lambda a, b: a + b),
    (arith.SubiOp, lambda a, b: a - b),
    (arith.MuliOp, lambda a, b: a * b),
    (arith.AndIOp, np.bitwise_and),
    (arith.OrIOp, np.bitwise_or),
    (arith.XOrIOp, np.bitwise_xor),
    (arith.MaxSIOp, np.maximum),
    (arith.MinSIOp, np.minimum),
]


@pytest.mark.parametrize("kind,ref", INT_BINARY, ids=[k.name for k, _ in INT_BINARY])
def test_int_binary_wraps(kind, ref):
    a, b = _int_pairs(np.int32)
    with np.errstate(all="ignore"):
        expected = ref(a, b)
    np.testing.assert_array_equal(run_elementwise([i32, i32], i32, [a, b], op2(kind)), expected)


def test_shifts_beyond_width():
    a = np.array([1, -8, 5, -1, 3], np.int32)
    b = np.array([3, 1, 40, 31, 32], np.int32)
    shl = run_elementwise([i32, i32], i32, [a, b], op2(arith.ShLIOp))
    shr = run_elementwise([i32, i32], i32, [a, b], op2(arith.ShRSIOp))
    assert shl.tolist() == [8, -16, 0, -(2**31), 0]
    assert shr.tolist() == [0, -4, 0, -1, 0]


def test_ipowi_follows_convention():
    a = np.array([2, 3, -2, 1, -1, -1, 5, 2, 0, 7], np.int32)
    b = np.array([10, 0, 3, -5, -3, -4, -1, 31, 0, 13], np.int32)
    out = run_elementwise([i32, i32], i32, [a, b], op2(math.IPowIOp))
    expected = [1024, 1, -8, 1, -1, 1, 0, -(2**31), 1, (7**13 + 2**31) % 2**32 - 2**31]
    assert out.tolist() == expected


def test_compare_select_and_bool_bytes():
    a = np.array([1.0, np.nan, -2.0, 3.0], np.float32)
    b = np.array([2.0, 1.0, -2.0, 0.0], np.float32)

    def body(bb: Builder, xs: list[SSAValue]) -> SSAValue:
        less = bb.insert(arith.CmpfOp(xs[0], xs[1], "olt"))
        return bb.insert(arith.ExtUIOp(less, i8)).result

    assert run_elementwise([f32, f32], i8, [a, b], body).tolist() == [1, 0, 0, 0]

    def pick(bb: Builder, xs: list[SSAValue]) -> SSAValue:
        ge = bb.insert(arith.CmpfOp(xs[0], xs[1], "uge"))
        return bb.insert(arith.SelectOp(ge, xs[0], xs[1])).result

    out = run_elementwise([f32, f32], f32, [a, b], pick)
    np.testing.assert_array_equal(out, [2.0, np.nan, -2.0, 3.0])


def _cast(kind: type[Operation], t: Attribute) -> Body:
    return lambda b, xs: b.insert(kind(xs[0], t)).results[0]


def test_casts():
    x = np.array([1.7, -1.7, 1e10, -1e10, np.nan, 0.0], np.float32)
    out = run_elementwise([f32], i32, [x], _cast(arith.FPToSIOp, i32))
    assert out.tolist() == [1, -1, 2**31 - 1, -(2**31), 0, 0]  # saturating, NaN -> 0
    ints = np.array([-1, 5, -(2**63), 2**63 - 1], np.int64)
    out = run_elementwise([i64], f64, [ints], _cast(arith.UIToFPOp, f64))
    np.testing.assert_array_equal(out, ints.view(np.uint64).astype(np.float64))
    out = run_elementwise([i64], f64, [ints], _cast(arith.SIToFPOp, f64))
    np.testing.assert_array_equal(out, ints.astype(np.float64))
    small = np.array([-1, 127, -128], np.int8)
    ext = run_elementwise([i8], i32, [small], _cast(arith.ExtUIOp, i32))
    assert ext.tolist() == [255, 127, 128]
    ext = run_elementwise([i8], i32, [small], _cast(arith.ExtSIOp, i32))
    assert ext.tolist() == [-1, 127, -128]
    wide = np.array([300, -1, 128], np.int32)
    assert run_elementwise([i32], i8, [wide], _cast(arith.TruncIOp, i8)).tolist() == [44, -1, -128]
    halfs = np.array([1.5, 65504.0, 1e-3], np.float32)
    out = run_elementwise([f32], f16, [halfs], _cast(arith.TruncFOp, f16))
    np.testing.assert_array_equal(out, halfs.astype(np.float16))
    out = run_elementwise([f16], f64, [out], _cast(arith.ExtFOp, f64))
    np.testing.assert_array_equal(out, halfs.astype(np.float16).astype(np.float64))


def test_constants():
    def body(bb: Builder, xs: list[SSAValue]) -> SSAValue:
        c = bb.insert(arith.ConstantOp(FloatAttr(float("inf"), f32)))
        return bb.insert(arith.MinimumfOp(xs[0], c)).result

    x = np.array([1.0, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(run_elementwise([f32], f32, [x], body), x)

    def flag(bb: Builder, xs: list[SSAValue]) -> SSAValue:
        t = bb.insert(arith.ConstantOp(IntegerAttr(1, i1)))
        return bb.insert(arith.SelectOp(t, xs[0], xs[0])).result

    assert run_elementwise([i16], i16, [np.array([3, -4], np.int16)], flag).tolist() == [3, -4]


def test_unsupported_op_is_located_error():
    bad = elementwise(
        "g", [i32], i64, 4, lambda b, xs: b.insert(arith.IndexCastOp(xs[0], i64)).result
    )
    with pytest.raises(
        DiagnosticError, match="not supported by the code generator yet: arith.index_cast"
    ):
        LowerLoopToLLVMPass().apply(Context(), ModuleOp([bad]))


def test_unsupported_element_type_is_reported():
    func = elementwise("f", [IntegerType(7)], IntegerType(7), 4, lambda b, xs: xs[0])
    with pytest.raises(DiagnosticError, match="not supported by the code generator yet: i7"):
        LowerLoopToLLVMPass().apply(Context(), ModuleOp([func]))


def test_optimized_ir_is_vectorized():
    body = op2(arith.AddfOp)
    module = ModuleOp([elementwise("vadd", [f32, f32], f32, 1024, body)])
    LowerLoopToLLVMPass().apply(Context(), module)
    text = llvm_ir(module, 2)
    assert "<8 x float>" in text or "<16 x float>" in text
    assert "noalias" in text
    assert "<8 x float>" not in llvm_ir(module, 0) and "<16 x float>" not in llvm_ir(module, 0)
    assert "vaddps" in assembly(module, 3)


def test_remaining_integer_ops():
    a = np.array([-1, 5, 12, -128, 0], np.int8)
    b = np.array([3, 5, 2, 1, 7], np.int8)
    u = a.view(np.uint8)
    as_u8 = lambda kind: run_elementwise([i8, i8], i8, [a, b], op2(kind)).view(np.uint8)  # noqa: E731
    assert as_u8(arith.MaxUIOp).tolist() == np.maximum(u, b.view(np.uint8)).tolist()
    assert as_u8(arith.MinUIOp).tolist() == np.minimum(u, b.view(np.uint8)).tolist()
    assert as_u8(arith.ShRUIOp).tolist() == (u >> b.view(np.uint8)).tolist()
    assert run_elementwise([i8], i8, [a], op1(math.AbsIOp)).tolist() == [1, 5, 12, -128, 0]
    x = np.array([1, 0, -1, 96], np.int32)
    assert run_elementwise([i32], i32, [x], op1(math.CountLeadingZerosOp)).tolist() == [
        31,
        32,
        0,
        25,
    ]
    assert run_elementwise([i32], i32, [x], op1(math.CountTrailingZerosOp)).tolist() == [
        0,
        32,
        0,
        5,
    ]
    assert run_elementwise([i32], i32, [x], op1(math.CtPopOp)).tolist() == [1, 0, 32, 2]


@pytest.mark.parametrize(
    "pred", ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
)
def test_integer_compare_predicates(pred):
    a, b = _int_pairs(np.int8)
    ua, ub = a.view(np.uint8), b.view(np.uint8)
    ref = {
        "eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b, "sge": a >= b,
        "ult": ua < ub, "ule": ua <= ub, "ugt": ua > ub, "uge": ua >= ub,
    }[pred]  # fmt: skip

    def body(bb: Builder, xs: list[SSAValue]) -> SSAValue:
        return bb.insert(arith.ExtUIOp(bb.insert(arith.CmpiOp(xs[0], xs[1], pred)), i8)).result

    assert run_elementwise([i8, i8], i8, [a, b], body).tolist() == ref.astype(np.int8).tolist()


@pytest.mark.parametrize(
    "pred",
    [
        "false",
        "oeq",
        "ogt",
        "oge",
        "olt",
        "ole",
        "one",
        "ord",
        "ueq",
        "ugt",
        "uge",
        "ult",
        "ule",
        "une",
        "uno",
        "true",
    ],
)
def test_float_compare_predicates(pred):
    a = np.array([1.0, np.nan, 2.0, 1.0, np.nan], np.float64)
    b = np.array([1.0, 1.0, 1.0, 2.0, np.nan], np.float64)
    unordered = np.isnan(a) | np.isnan(b)
    base = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b, "ne": a != b}
    if pred in ("false", "true"):
        ref = np.full(5, pred == "true")
    elif pred in ("ord", "uno"):
        ref = ~unordered if pred == "ord" else unordered
    elif pred[0] == "o":
        ref = base[pred[1:]] & ~unordered
    else:
        ref = base[pred[1:]] | unordered

    def body(bb: Builder, xs: list[SSAValue]) -> SSAValue:
        return bb.insert(arith.ExtUIOp(bb.insert(arith.CmpfOp(xs[0], xs[1], pred)), i8)).result

    assert run_elementwise([f64, f64], i8, [a, b], body).tolist() == ref.astype(np.int8).tolist()


def test_fma_fpowi_bitcast_acosh():
    x = np.array([1.5, 2.0, -3.0], np.float64)
    fma = run_elementwise(
        [f64, f64, f64], f64, [x, x, x], lambda b, xs: b.insert(math.FmaOp(*xs)).result
    )
    np.testing.assert_array_equal(fma, x * x + x)
    n = np.array([2, -1, 3], np.int32)
    powi = run_elementwise([f64, i32], f64, [x, n], op2(math.FPowIOp))
    np.testing.assert_allclose(powi, x ** n.astype(np.float64))
    bits = run_elementwise([f64], i64, [x], _cast(arith.BitcastOp, i64))
    np.testing.assert_array_equal(bits, x.view(np.int64))
    y = np.array([1.0, 2.0, 10.0], np.float64)
    np.testing.assert_allclose(run_elementwise([f64], f64, [y], op1(math.AcoshOp)), np.arccosh(y))
