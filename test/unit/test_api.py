"""The public Python API: dlc.parse, dlc.compile, dlc.compile_file, dlc.print_module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import dlc

ROOT = Path(__file__).resolve().parents[2]

AXPY = """module "demo"
stage raw

func @axpy: (f32, <4 x f32>, <4 x f32>) -> <4 x f32> {
'entry(%a: f32, %x: <4 x f32>, %y: <4 x f32>):
    %ax = multiply %a: f32, %x: <4 x f32>
    %r = add %ax: <4 x f32>, %y: <4 x f32>
    return %r: <4 x f32>
}
"""

TYPE_ERROR = """module "bad"
stage raw

func @f: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %y = dot %x: <2 x 3 x f32>, %x: <2 x 3 x f32>
    return %y: <2 x 3 x f32>
}
"""


def test_public_names() -> None:
    assert set(dlc.__all__) == {
        "DiagnosticError",
        "TrapError",
        "compile",
        "compile_file",
        "compile_onnx",
        "load_plugin",
        "parse",
        "print_module",
        "tune",
        "view",
    }
    from dlc.diagnostics import DiagnosticError

    assert dlc.DiagnosticError is DiagnosticError


def test_parse_and_print_round_trip() -> None:
    module = dlc.parse(AXPY)
    assert isinstance(module, ModuleOp)
    assert dlc.print_module(module) == AXPY
    assert dlc.print_module(dlc.parse(dlc.print_module(module))) == AXPY


def test_parse_accepts_bytes() -> None:
    assert dlc.print_module(dlc.parse(AXPY.encode())) == AXPY


def test_compile_and_call_with_numpy() -> None:
    mod = dlc.compile(AXPY)
    x = np.arange(4, dtype=np.float32)
    y = np.ones(4, dtype=np.float32)
    np.testing.assert_array_equal(mod.axpy(np.float32(2), x, y), 2 * x + y)
    np.testing.assert_array_equal(mod["axpy"](3.0, x, y), 3 * x + y)
    assert "axpy" in mod.functions


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
def test_opt_levels(opt_level: int) -> None:
    mod = dlc.compile(AXPY, opt_level=opt_level)
    np.testing.assert_array_equal(
        mod.axpy(1.0, np.ones(4, np.float32), np.ones(4, np.float32)), np.full(4, 2, np.float32)
    )


def test_ir_at_every_level() -> None:
    mod = dlc.compile(AXPY)
    assert "func @axpy" in mod.ir("graph")
    assert "tensor.compute" in mod.ir("tensor")
    assert "loop.for" in mod.ir("loop")
    assert "define void @dlc.fn.axpy" in mod.ir("llvm")


def test_compile_file(tmp_path: Path) -> None:
    path = tmp_path / "axpy.dl"
    path.write_text(AXPY)
    mod = dlc.compile_file(path)
    np.testing.assert_array_equal(
        mod.axpy(0.0, np.ones(4, np.float32), np.ones(4, np.float32)), np.ones(4, np.float32)
    )
    assert dlc.compile_file(str(path)).functions == mod.functions


def test_compile_file_missing_is_a_diagnostic(tmp_path: Path) -> None:
    missing = tmp_path / "missing.dl"
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile_file(missing)
    assert info.value.filename == str(missing)
    assert "cannot read" in info.value.message
    assert str(info.value) == f"{missing}: error: {info.value.message}"


def test_diagnostic_attributes() -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(TYPE_ERROR, filename="bad.dl")
    e = info.value
    assert (e.filename, e.line, e.column) == ("bad.dl", 6, 10)
    assert e.message.startswith("dot: ")
    lines = str(e).splitlines()
    assert lines[0] == f"bad.dl:6:10: error: {e.message}"
    assert lines[1] == "    %y = dot %x: <2 x 3 x f32>, %x: <2 x 3 x f32>"
    assert lines[2] == "         ^"


def test_syntax_error_is_a_diagnostic() -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.parse('module "m"\nstage raw\nfunc @f: (f32) -> f32 {\n', filename="s.dl")
    assert info.value.filename == "s.dl"
    assert info.value.line >= 3


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: dlc.parse(42), TypeError),
        (lambda: dlc.compile(None), TypeError),
        (lambda: dlc.compile(AXPY, opt_level="2"), TypeError),
        (lambda: dlc.compile(AXPY, opt_level=True), TypeError),
        (lambda: dlc.compile(AXPY, opt_level=4), ValueError),
        (lambda: dlc.compile_file(3), TypeError),
        (lambda: dlc.print_module("module"), TypeError),
    ],
)
def test_wrong_api_calls(call, error: type[Exception]) -> None:  # noqa: ANN001
    with pytest.raises(error):
        call()


def test_wrong_calls_of_a_compiled_function() -> None:
    mod = dlc.compile(AXPY)
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="axpy"):
        mod.axpy(1.0, x)
    with pytest.raises(ValueError, match="%x"):
        mod.axpy(1.0, np.ones(5, np.float32), x)
    with pytest.raises(TypeError, match="%x"):
        mod.axpy(1.0, np.ones(4, np.float64), x)
    with pytest.raises(AttributeError):
        mod.no_such_function  # noqa: B018


@pytest.mark.parametrize("name", ["mlp.dl", "softmax.dl", "lstm_cell.dl"])
def test_examples_compile_and_match_reference(name: str) -> None:
    from dlc.semantics.interpreter import run_function

    text = (ROOT / "examples" / name).read_text()
    mod = dlc.compile(text, filename=name)
    module = dlc.parse(text, filename=name)
    (entry,) = mod.functions
    rng = np.random.default_rng(0)
    func = next(
        op for op in module.ops if getattr(op, "sym_name", None) and op.sym_name.data == entry
    )
    args = [(rng.standard_normal(t.dims) * 0.1).astype(np.float32) for t in func.function_type.args]
    got = mod[entry](*args)
    want = run_function(module, entry, args)
    for g, w in zip(
        got if isinstance(got, tuple) else (got,),
        want if isinstance(want, tuple) else (want,),
        strict=True,
    ):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_trap_error_is_public_and_raised_by_a_compiled_trap() -> None:
    mod = dlc.compile(
        'module "t"\nstage raw\n\nfunc @f: (f32) -> f32 {\n'
        "'entry(%x: f32):\n    trap\n    return %x: f32\n}\n",
        filename="t.dl",
    )
    with pytest.raises(dlc.TrapError, match="t.dl:6:5"):
        mod.f(np.float32(1))
    with pytest.raises(AttributeError):
        dlc.NoSuchName  # noqa: B018


def test_compile_file_takes_compile_options(tmp_path) -> None:
    path = tmp_path / "m.dl"
    path.write_text(
        'module "m"\nstage raw\n\nfunc @f: (<4 x f32>) -> <4 x f32> {\n'
        "'entry(%x: <4 x f32>):\n    %e = exp %x: <4 x f32>\n    return %e: <4 x f32>\n}\n"
    )
    x = np.linspace(-3, 3, 4, dtype=np.float32)
    exact = dlc.compile_file(path, fast_math_functions=False, fuse=False, opt_level=0)
    fast = dlc.compile_file(path, seed=1, plan_memory=False)
    np.testing.assert_allclose(exact.f(x), np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(fast.f(x), np.exp(x), rtol=3e-7)
    with pytest.raises(TypeError, match="file name is the path"):
        dlc.compile_file(path, filename="other.dl")
