"""dlc-opt and dlc-run: exit codes, diagnostics, output targets, files, inputs, timing."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, f32, i32
from xdsl.passes import ModulePass

import dlc.pipeline
from dlc.cli import dlc_opt, dlc_run

ADD_ONE = """module "m"
stage raw

func @add_one: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = add %x: <4 x f32>, 1.0: f32
    return %y: <4 x f32>
}
"""

BAD_SHAPES = """module "bad"
stage raw

func @f: (<2 x 3 x f32>, <3 x 2 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>, %z: <3 x 2 x f32>):
    %y = add %x: <2 x 3 x f32>, %z: <3 x 2 x f32>
    return %y: <2 x 3 x f32>
}
"""

TWO_FUNCS = """module "two"
stage raw

func @scale: (<2 x 2 x f32>, f32) -> <2 x 2 x f32> {
'entry(%x: <2 x 2 x f32>, %s: f32):
    %y = multiply %x: <2 x 2 x f32>, %s: f32
    return %y: <2 x 2 x f32>
}

func @count: (<3 x i32>) -> (<3 x i32>, i32) {
'entry(%v: <3 x i32>):
    %n = reduce %v: <3 x i32> by add init 0: i32 along 0
    %r = literal (%v: <3 x i32>, %n: i32): (<3 x i32>, i32)
    return %r: (<3 x i32>, i32)
}
"""


@dataclass
class Run:
    code: int
    out: str
    err: str


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def fill(argv: list[str], names: dict[str, str]) -> list[str]:
    """Replace `{name}` placeholders (only those; pass specs keep their own braces)."""
    filled = []
    for arg in argv:
        for key, value in names.items():
            arg = arg.replace("{" + key + "}", value)
        filled.append(arg)
    return filled


def opt(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Run:
    code = dlc_opt.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Run:
    code = dlc_run.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def assert_one_line_error(r: Run, tool: str = "dlc-opt") -> None:
    assert r.code == 1
    assert r.err.startswith(f"{tool}: error: ")
    assert r.err.count("\n") == 1
    assert "Traceback" not in r.err


# -- dlc-opt ----------------------------------------------------------------------------


def test_prints_dl_at_graph_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE))
    assert (r.code, r.err) == (0, "")
    assert r.out == ADD_ONE


def test_diagnostic_on_stderr_with_caret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "bad.dl", BAD_SHAPES)
    r = opt(capsys, path)
    assert r.code == 1 and r.out == ""
    lines = r.err.splitlines()
    assert (
        lines[0]
        == f"{path}:6:10: error: add: shapes <2 x 3 x f32> and <3 x 2 x f32> are not broadcastable"
    )
    assert lines[1] == "    %y = add %x: <2 x 3 x f32>, %z: <3 x 2 x f32>"
    assert lines[2] == "         ^"


def test_verify_diagnostics_prints_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(capsys, write(tmp_path, "bad.dl", BAD_SHAPES), "--verify-diagnostics")
    assert (r.code, r.err) == (0, "")
    assert ":6:10: error: add: shapes" in r.out
    assert r.out.splitlines()[-1] == "         ^"


def test_split_input_file_counts_lines_in_whole_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = ADD_ONE + "// -----\n" + BAD_SHAPES
    r = opt(capsys, write(tmp_path, "s.dl", text), "--split-input-file", "--verify-diagnostics")
    assert r.code == 0
    first, second = r.out.split("// -----\n")
    assert first == ADD_ONE
    assert f":{ADD_ONE.count(chr(10)) + 1 + 6}:10: error: add:" in second


def test_split_input_file_without_verify_goes_on_after_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(
        capsys, write(tmp_path, "s.dl", BAD_SHAPES + "// -----\n" + ADD_ONE), "--split-input-file"
    )
    assert r.code == 1
    assert ":6:10: error:" in r.err
    assert r.out == "// -----\n" + ADD_ONE


def test_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.dl"
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-o", out)
    assert (r.code, r.out, r.err) == (0, "", "")
    assert out.read_text() == ADD_ONE


def test_stdin_defaults_to_dl(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(ADD_ONE.encode())))
    r = opt(capsys)
    assert (r.code, r.out) == (0, ADD_ONE)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("dl", "func @add_one: (<4 x f32>) -> <4 x f32> {"),
        ("mlir", '"graph.func"() <{sym_name = "add_one"'),
        ("llvm", "define void @dlc.fn.add_one(ptr"),
        ("asm", "add_one:"),
    ],
)
def test_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, expected: str
) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-t", target)
    assert (r.code, r.err) == (0, "")
    assert expected in r.out


def test_lowered_module_prints_as_mlir_and_reparses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(
        capsys, write(tmp_path, "m.dl", ADD_ONE), "-p", "lower-graph-to-tensor,lower-tensor-to-loop"
    )
    assert r.code == 0 and "loop.for %" in r.out
    r2 = opt(capsys, write(tmp_path, "m.mlir", r.out), "-t", "llvm", "-O", "0")
    assert (r2.code, r2.err) == (0, "")
    assert "define void @dlc.fn.add_one(ptr" in r2.out


def test_dl_target_below_graph_level_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-p", "lower-graph-to-tensor", "-t", "dl")
    assert_one_line_error(r)
    assert "tensor level" in r.err


def test_print_between_passes_and_timing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passes = "lower-graph-to-tensor,lower-tensor-to-loop"
    r = opt(
        capsys, write(tmp_path, "m.dl", ADD_ONE), "-p", passes, "--print-between-passes", "--timing"
    )
    assert r.code == 0
    assert r.out.count("IR after") == 1
    assert "// -----// IR after lower-graph-to-tensor //----- //" in r.out
    for step in ("parse", "lower-graph-to-tensor", "lower-tensor-to-loop", "emit default"):
        assert f"dlc-opt: timing: {step}: " in r.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{missing}"], "cannot read"),
        (["{file}", "-p", "no-such-pass"], "unknown pass 'no-such-pass'"),
        (["{file}", "-p", "verify{x"], "invalid pass pipeline"),
        (["{file}", "-p", "verify{x=1}"], "invalid pass options"),
        (["{file}", "--no-such-flag"], "unrecognized arguments"),
        (["{file}", "-t", "pdf"], "invalid choice"),
        (["{file}", "-o", "{unwritable}"], "cannot write"),
        (["{odd}"], "cannot tell the input syntax"),
    ],
)
def test_user_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    names = {
        "file": str(write(tmp_path, "m.dl", ADD_ONE)),
        "missing": str(tmp_path / "missing.dl"),
        "unwritable": str(tmp_path / "no-dir" / "out.dl"),
        "odd": str(write(tmp_path, "m.txt", ADD_ONE)),
    }
    r = opt(capsys, *fill(argv, names))
    assert_one_line_error(r)
    assert message in r.err


@dataclass(frozen=True)
class BreakIRPass(ModulePass):
    """Test-only: appends an `arith.constant` whose value and result types disagree."""

    name = "break-ir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        op.body.block.add_op(
            arith.ConstantOp.create(properties={"value": IntegerAttr(1, i32)}, result_types=[f32])
        )


@dataclass(frozen=True)
class CrashPass(ModulePass):
    """Test-only: a pass with a bug."""

    name = "crash"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise RuntimeError("boom")


@pytest.fixture
def test_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dlc.pipeline.get_all_passes

    def with_test_passes() -> dict:
        return {**real(), "break-ir": lambda: BreakIRPass, "crash": lambda: CrashPass}

    monkeypatch.setattr(dlc.pipeline, "get_all_passes", with_test_passes)


@pytest.mark.usefixtures("test_passes")
def test_invalid_ir_after_a_pass_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(capsys, write(tmp_path, "e.mlir", "builtin.module {}\n"), "-p", "break-ir")
    assert_one_line_error(r)
    assert "IR does not verify after pass 'break-ir'" in r.err


@pytest.mark.usefixtures("test_passes")
def test_internal_error_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-p", "crash")
    assert r.code == 2
    assert r.err == "dlc-opt: internal error: RuntimeError: boom\n"


def test_mlir_parse_error_is_a_located_diagnostic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "bad.mlir", 'builtin.module {\n  "foo.bar"() : () -> ()\n}\n')
    r = opt(capsys, path)
    assert r.code == 1
    assert r.err.startswith(f"{path}:2:")
    assert "error: Operation foo.bar is not registered" in r.err.splitlines()[0]


@pytest.mark.parametrize(
    "text",
    [
        "builtin.module {" * 200 + "}" * 200,
        "builtin.module attributes {a = " + "[" * 2000 + "]" * 2000 + "} {}",
        "builtin.module {\n"
        + '"graph.var"() <{sym_name = "g", var_type = '
        + "!graph.ptr<" * 500
        + "!graph.stack"
        + ">" * 500
        + "}> : () -> ()\n}",
    ],
)
def test_deeply_nested_mlir_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """200 nested modules once ended in a RecursionError reported as an internal error."""
    path = write(tmp_path, "deep.mlir", text + "\n")
    r = opt(capsys, path)
    assert r.code == 1
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: error: input nests too deeply\n", r.err)
    assert "Traceback" not in r.err


# -- dlc-run ----------------------------------------------------------------------------


def test_run_random_inputs_and_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, write(tmp_path, "m.dl", ADD_ONE), "--random-inputs", "--seed", "5", "--time")
    assert (r.code, r.err) == (0, "")
    lines = r.out.splitlines()
    assert lines[0] == "output 0: <4 x f32>"
    expected = np.random.default_rng(5).standard_normal(4, dtype=np.float32) + np.float32(1)
    assert lines[1] == repr(expected)
    assert lines[-2].startswith("compile time: ")
    assert lines[-1].startswith("time per call: ") and lines[-1].endswith("calls)")


def test_run_inputs_from_npy_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "s.npy", np.array(3, dtype=np.float32))
    source = write(tmp_path, "two.dl", TWO_FUNCS)
    r = run(
        capsys,
        source,
        "--entry",
        "@scale",
        "--input",
        f"%x={tmp_path / 'x.npy'}",
        "--input",
        f"1={tmp_path / 's.npy'}",
    )
    assert (r.code, r.err) == (0, "")
    assert r.out == f"output 0: <2 x 2 x f32>\n{x * 3!r}\n"


def test_run_tuple_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "v.npy", np.array([1, 2, 3], dtype=np.int32))
    r = run(
        capsys, write(tmp_path, "two.dl", TWO_FUNCS), "-e", "count", "-i", f"v={tmp_path / 'v.npy'}"
    )
    assert r.code == 0
    assert r.out.splitlines() == [
        "output 0: <3 x i32>",
        "array([1, 2, 3], dtype=int32)",
        "output 1: i32",
        "array(6, dtype=int32)",
    ]


def test_run_single_function_needs_no_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = run(capsys, write(tmp_path, "m.dl", ADD_ONE), "--random-inputs")
    assert r.code == 0 and r.out.startswith("output 0: <4 x f32>\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["{two}", "--random-inputs"],
            "choose a function with --entry (defined functions: @scale, @count)",
        ),
        (["{two}", "--entry", "nope"], "no function @nope is defined"),
        (["{two}", "--entry", "scale"], "no value for parameter %x"),
        (["{two}", "--entry", "scale", "--input", "x"], "--input expects NAME=PATH.npy"),
        (["{two}", "--entry", "scale", "--input", "y={npy}"], "--input y: no such parameter"),
        (["{two}", "--entry", "scale", "--input", "x={missing}"], "cannot load"),
        (
            ["{two}", "--entry", "scale", "--random-inputs", "--input", "x={npy}"],
            "argument 0 (%x) of @scale",
        ),
        (["{missing}"], "cannot read"),
        (["{two}", "--bogus"], "unrecognized arguments"),
    ],
)
def test_run_user_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    np.save(tmp_path / "wrong.npy", np.zeros((3, 3), dtype=np.float32))
    names = {
        "two": str(write(tmp_path, "two.dl", TWO_FUNCS)),
        "npy": str(tmp_path / "wrong.npy"),
        "missing": str(tmp_path / "missing.npy"),
    }
    r = run(capsys, *fill(argv, names))
    assert_one_line_error(r, "dlc-run")
    assert message in r.err


def test_run_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "bad.dl", BAD_SHAPES)
    r = run(capsys, path, "--random-inputs")
    assert r.code == 1
    assert r.err.startswith(f"{path}:6:10: error: add:")
    assert r.err.splitlines()[-1] == "         ^"


# -- the installed console scripts -----------------------------------------------------


def script(name: str) -> str:
    path = Path(sys.executable).parent / name
    assert path.is_file(), f"{name} is not installed next to {sys.executable}"
    return str(path)


def test_console_scripts(tmp_path: Path) -> None:
    source = write(tmp_path, "m.dl", ADD_ONE)
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    opt_run = subprocess.run(
        [script("dlc-opt"), str(source)], capture_output=True, text=True, env=env
    )
    assert (opt_run.returncode, opt_run.stdout, opt_run.stderr) == (0, ADD_ONE, "")
    bad = subprocess.run(
        [script("dlc-opt"), str(tmp_path / "nope.dl")], capture_output=True, text=True
    )
    assert bad.returncode == 1 and bad.stderr.startswith("dlc-opt: error: cannot read")
    ran = subprocess.run(
        [script("dlc-run"), str(source), "--random-inputs"], capture_output=True, text=True
    )
    assert ran.returncode == 0 and ran.stdout.startswith("output 0: <4 x f32>\n"), ran.stderr


def test_dlc_run_reports_a_trap_as_a_located_error(tmp_path) -> None:
    """A `trap` in compiled code is a user-facing run-time error, not an internal one."""
    path = tmp_path / "trap.dl"
    path.write_text(
        'module "t"\nstage raw\n\nfunc @f: (f32) -> f32 {\n'
        "'entry(%x: f32):\n    trap\n    return %x: f32\n}\n"
    )
    import contextlib
    import io

    from dlc.cli.dlc_run import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([str(path), "--random-inputs"])
    assert code == 1
    assert err.getvalue() == f"{path}:6:5: error: trap\n    trap\n    ^\n"
