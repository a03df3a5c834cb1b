"""Unsigned integers (u8-u64), bf16 and `dataTypeCast` across int/float/bool: DLVM text
round trip, literal ranges, the reference interpreter against NumPy, and native code
against the interpreter (one compiled module per test)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import dlc
from dlc.diagnostics import DiagnosticError
from dlc.semantics.interpreter import run_function

UNSIGNED = ("u8", "u16", "u32", "u64")
NP = {
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "bool": np.bool_,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "bf16": ml_dtypes.bfloat16,
}  # fmt: skip
N = 8


def _module(funcs: list[str]) -> str:
    return 'module "m"\nstage raw\n\n' + "\n".join(funcs)


def _binary(name: str, opcode: str, dt: str, out: str | None = None) -> str:
    t, r = f"<{N} x {dt}>", f"<{N} x {out or dt}>"
    return (
        f"func @{name}: ({t}, {t}) -> {r} {{\n'entry(%a: {t}, %b: {t}):\n"
        f"    %y = {opcode} %a: {t}, %b: {t}\n    return %y: {r}\n}}\n"
    )


def _cast(name: str, source: str, target: str) -> str:
    t, r = f"<{N} x {source}>", f"<{N} x {target}>"
    return (
        f"func @{name}: ({t}) -> {r} {{\n'entry(%a: {t}):\n"
        f"    %y = dataTypeCast %a: {t} to {target}\n    return %y: {r}\n}}\n"
    )


def _values(dt: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    info = np.iinfo(NP[dt])
    x = rng.integers(info.min, info.max, size=N, dtype=NP[dt], endpoint=True)
    x[:3] = [0, info.max, info.min if info.min else 1 << (info.bits - 1)]  # and the top bit
    return x


def test_unsigned_types_round_trip_through_text():
    text = _module([_binary(f"f_{dt}", "divide", dt) for dt in UNSIGNED])
    printed = dlc.print_module(dlc.parse(text))
    assert "<8 x u64>" in printed
    assert dlc.print_module(dlc.parse(printed)) == printed


@pytest.mark.parametrize(("literal", "message"), [("-1: u8", "-1"), ("256: u8", "256")])
def test_unsigned_literal_out_of_range_is_located(literal, message):
    text = _module([
        "func @f: (u8) -> u8 {\n'entry(%a: u8):\n"
        f"    %y = add %a: u8, {literal}\n    return %y: u8\n}}\n"
    ])  # fmt: skip
    with pytest.raises(DiagnosticError) as info:
        dlc.parse(text)
    assert f"<string>:6:22: error: integer literal {message} does not fit in u8" in str(info.value)


ARITH = {
    "divide": lambda a, b: np.where(b == 0, 0, a // np.where(b == 0, 1, b)),
    "modulo": lambda a, b: np.where(b == 0, 0, a % np.where(b == 0, 1, b)),
    "min": np.minimum,
    "max": np.maximum,
    "subtract": np.subtract,
    "lessThan": np.less,
    "greaterThanOrEqual": np.greater_equal,
}


def test_unsigned_arithmetic_native_matches_interpreter_and_numpy():
    funcs, cases = [], []
    for dt in UNSIGNED:
        for opcode in ARITH:
            name = f"{opcode}_{dt}"
            compare = opcode in ("lessThan", "greaterThanOrEqual")
            funcs.append(_binary(name, opcode, dt, "bool" if compare else None))
            cases.append((name, opcode, dt))
    text = _module(funcs)
    module, compiled = dlc.parse(text), dlc.compile(text)
    for name, opcode, dt in cases:
        a, b = _values(dt, 1), _values(dt, 2)
        b[5] = 0
        with np.errstate(all="ignore"):
            expected = ARITH[opcode](a, b)
        np.testing.assert_array_equal(run_function(module, name, [a, b]), expected, name)
        np.testing.assert_array_equal(getattr(compiled, name)(a, b), expected, name)


def test_unsigned_reductions_power_and_sign():
    funcs = []
    for dt in UNSIGNED:
        t = f"<{N} x {dt}>"
        funcs.append(
            f"func @r_{dt}: ({t}, {t}) -> ({dt}, {dt}, {t}, {t}) {{\n'entry(%a: {t}, %b: {t}):\n"
            f"    %mx = reduce %a: {t} by max init 0: {dt} along 0\n"
            f"    %mn = reduce %a: {t} by min init {np.iinfo(NP[dt]).max}: {dt} along 0\n"
            f"    %p = power %a: {t}, %b: {t}\n    %s = sign %a: {t}\n"
            f"    %r = literal (%mx: {dt}, %mn: {dt}, %p: {t}, %s: {t}): ({dt}, {dt}, {t}, {t})\n"
            f"    return %r: ({dt}, {dt}, {t}, {t})\n}}\n"
        )
    text = _module(funcs)
    module, compiled = dlc.parse(text), dlc.compile(text)
    for dt in UNSIGNED:
        a, b = _values(dt, 3), _values(dt, 4)
        expected = (a.max(), a.min(), a**b, (a != 0).astype(NP[dt]))
        for got in (run_function(module, f"r_{dt}", [a, b]), getattr(compiled, f"r_{dt}")(a, b)):
            for g, e in zip(got, expected, strict=True):
                np.testing.assert_array_equal(g, e, dt)


CAST_TYPES = ("f16", "bf16", "f32", "f64", "bool", "i8", "i32", "i64", "u8", "u16", "u64")
FLOAT_SOURCE = [-3.7, -0.5, 0.0, 2.5, 300.9, 1e30, -1e30, np.nan]


def _source(dt: str) -> np.ndarray:
    if dt == "bool":
        return np.array([True, False] * (N // 2))
    if dt[0] in "fb":
        with np.errstate(over="ignore"):
            return np.array(FLOAT_SOURCE, NP[dt])
    return _values(dt, 5)


def test_casts_native_match_interpreter():
    pairs = [(s, t) for s in CAST_TYPES for t in CAST_TYPES if s != t]
    text = _module([_cast(f"c_{s}_{t}", s, t) for s, t in pairs])
    module, compiled = dlc.parse(text), dlc.compile(text)
    for s, t in pairs:
        x = _source(s)
        want = run_function(module, f"c_{s}_{t}", [x])
        assert want.dtype == NP[t]
        got = getattr(compiled, f"c_{s}_{t}")(x)
        if t == "bf16":  # NumPy compares NaNs equal only in its own float types
            got, want = got.astype(np.float32), want.astype(np.float32)
        np.testing.assert_array_equal(got, want, f"{s} -> {t}")


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        # truncated to i64 (saturating, NaN -> 0), then wrapped as NumPy does: 300 -> 44
        ("f32", "i8", [-3, 0, 0, 2, 44, -1, 0, 0]),
        ("f32", "u8", [253, 0, 0, 2, 44, 255, 0, 0]),
        ("f32", "u64", [2**64 - 3, 0, 0, 2, 300, 2**64 - 1, 2**63, 0]),  # -1e30: i64's min
        ("f64", "i64", [-3, 0, 0, 2, 300, 2**63 - 1, -(2**63), 0]),
        ("f32", "bool", [True, True, False, True, True, True, True, True]),  # NaN is true
    ],
)
def test_float_to_int_and_bool_casts(source, target, expected):
    text = _module([_cast("c", source, target)])
    x, expected = _source(source), np.array(expected, NP[target])
    np.testing.assert_array_equal(run_function(dlc.parse(text), "c", [x]), expected)
    np.testing.assert_array_equal(dlc.compile(text).c(x), expected)


def test_bf16_is_stored_and_cast_through_f32():
    text = _module([_cast("to", "f32", "bf16"), _cast("back", "bf16", "f64")])
    x = np.array([1.00390625, 1.01171875, -200.7, 3e38, 1e-40, np.inf, -0.0, 7.0], np.float32)
    want = x.astype(ml_dtypes.bfloat16)  # to nearest even: 1.0039 -> 1.0, 1.0117 -> 1.0156
    module, compiled = dlc.parse(text), dlc.compile(text)
    for got in (run_function(module, "to", [x]), compiled.to(x)):
        assert got.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(compiled.back(want), want.astype(np.float64))
    nan = compiled.to(np.full(N, np.nan, np.float32)).astype(np.float32)
    assert np.isnan(nan).all()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("%y = add %a: <2 x bf16>, %a: <2 x bf16>", "add: operands must be numeric, got bf16"),
        ("%y = exp %a: <2 x bf16>", "exp: operand must be a float tensor, got <2 x bf16>"),
        (
            "%y = lessThan %a: <2 x bf16>, %a: <2 x bf16>",
            "lessThan: operands must be numeric, got bf16",
        ),
        (
            "%y = dot %a: <2 x bf16>, %a: <2 x bf16>",
            "dot: cannot multiply <2 x bf16> by <2 x bf16>: bf16 is a storage type (cast to f32 "
            "to compute)",
        ),
    ],
)
def test_bf16_arithmetic_is_refused_with_a_location(body, message):
    text = _module([f"func @f: (<2 x bf16>) -> <2 x bf16> {{\n'entry(%a: <2 x bf16>):\n"
                    f"    {body}\n    return %a: <2 x bf16>\n}}\n"])  # fmt: skip
    with pytest.raises(DiagnosticError) as info:
        dlc.parse(text)
    assert f"<string>:6:10: error: {message}" in str(info.value)


def test_convolve_on_bf16_is_refused():
    t = "<1 x 1 x 3 x bf16>"
    text = _module([f"func @f: ({t}) -> {t} {{\n'entry(%a: {t}):\n"
                    f"    %y = convolve %a: {t} kernel %a: {t}\n    return %a: {t}\n}}\n"])  # fmt: skip
    with pytest.raises(DiagnosticError, match="convolve: bf16 is a storage type"):
        dlc.parse(text)


def test_integer_casts_wrap_and_extend_by_the_source_signedness():
    module = dlc.parse(_module([_cast("a", "u8", "i32"), _cast("b", "i8", "u16"),
                                _cast("c", "u64", "f64"), _cast("d", "i32", "u8")]))  # fmt: skip
    u8 = np.array([0, 1, 127, 128, 200, 255, 3, 4], np.uint8)
    i8 = u8.view(np.int8)
    np.testing.assert_array_equal(run_function(module, "a", [u8]), u8.astype(np.int32))
    np.testing.assert_array_equal(run_function(module, "b", [i8]), i8.astype(np.uint16))
    big = np.full(N, 2**64 - 1, np.uint64)
    np.testing.assert_array_equal(run_function(module, "c", [big]), np.full(N, 2.0**64))
    i32 = np.arange(250, 258, dtype=np.int32)
    np.testing.assert_array_equal(run_function(module, "d", [i32]), i32.astype(np.uint8))


def test_unsigned_arrays_are_checked_at_the_call():
    compiled = dlc.compile(_module([_binary("f", "add", "u16")]))
    a = np.arange(N, dtype=np.uint16)
    np.testing.assert_array_equal(compiled.f(a, a), a + a)
    with pytest.raises(TypeError, match="expected <8 x u16>, got int16 array"):
        compiled.f(a.view(np.int16), a)


BITWISE = {
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


def _onnx_shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    """ONNX BitShift, element by element in Python integers."""
    bits = a.dtype.itemsize * 8
    out = []
    for x, n in zip(a.tolist(), b.tolist(), strict=True):
        if not 0 <= n < bits:
            out.append(-1 if (x < 0 and not left) else 0)
        else:
            out.append(x << n if left else x >> n)
    wrapped = [v & ((1 << bits) - 1) for v in out]
    return np.array(wrapped, dtype=f"u{a.dtype.itemsize}").view(a.dtype)


@pytest.mark.parametrize("dt", ["i8", "i32", "u8", "u64"])
def test_bitwise_and_shifts_native_match_interpreter_and_numpy(dt):
    funcs = [_binary(op, op, dt) for op in (*BITWISE, "shiftLeft", "shiftRight")]
    t = f"<{N} x {dt}>"
    funcs.append(f"func @not: ({t}) -> {t} {{\n'entry(%a: {t}):\n    %y = not %a: {t}\n"
                 f"    return %y: {t}\n}}\n")  # fmt: skip
    text = _module(funcs)
    module, compiled = dlc.parse(text), dlc.compile(text)
    a, b = _values(dt, 6), _values(dt, 7)
    amounts = np.array([0, 1, 3, 7, 8, 31, 63, 64][:N], np.int64) * (1 if dt[0] == "u" else -1)
    amounts[:4] = [0, 1, 3, 7]
    shift = amounts.astype(NP[dt])
    expected = {op: fn(a, b) for op, fn in BITWISE.items()}
    expected["shiftLeft"] = _onnx_shift(a, shift, left=True)
    expected["shiftRight"] = _onnx_shift(a, shift, left=False)
    for op, want in expected.items():
        second = shift if op.startswith("shift") else b
        np.testing.assert_array_equal(run_function(module, op, [a, second]), want, op)
        np.testing.assert_array_equal(getattr(compiled, op)(a, second), want, op)
    np.testing.assert_array_equal(run_function(module, "not", [a]), np.invert(a))
    np.testing.assert_array_equal(getattr(compiled, "not")(a), np.invert(a))


def test_xor_and_not_on_bool_are_logical():
    text = _module([_binary("x", "xor", "bool")])
    a = np.array([True, True, False, False] * 2)
    b = np.array([True, False, True, False] * 2)
    np.testing.assert_array_equal(dlc.compile(text).x(a, b), a ^ b)
    np.testing.assert_array_equal(run_function(dlc.parse(text), "x", [a, b]), a ^ b)
