"""dlc-opt follows mlir-opt's conventions: `-` for stdin, every `--split-input-file`
chunk processed, `--verify-diagnostics` with `expected-error` comments, IR dumps after
passes and after a failure, and output errors as one line."""

from __future__ import annotations

import errno
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import ADD_ONE, BAD_SHAPES, BreakIRPass, CrashPass, assert_one_line_error, opt, write

import dlc.pipeline

SEPARATOR = "// -----\n"
BAD_LINE = "    %y = add %x: <2 x 3 x f32>, %z: <3 x 2 x f32>"
BAD_MESSAGE = "add: shapes <2 x 3 x f32> and <3 x 2 x f32> are not broadcastable"


@pytest.fixture
def failing_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dlc.pipeline.get_all_passes

    def with_test_passes() -> dict:
        return {**real(), "break-ir": lambda: BreakIRPass, "crash": lambda: CrashPass}

    monkeypatch.setattr(dlc.pipeline, "get_all_passes", with_test_passes)


def stdin_with(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def expecting(text: str, designator: str, message: str) -> str:
    """BAD_SHAPES with `// expected-error<designator> {{message}}` before the bad line."""
    comment = f"    // expected-error{designator} {{{{{message}}}}}\n"
    return text.replace(BAD_LINE + "\n", comment + BAD_LINE + "\n")


# -- input ------------------------------------------------------------------------------


def test_dash_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin_with(monkeypatch, ADD_ONE)
    r = opt(capsys, "-")
    assert (r.code, r.out, r.err) == (0, ADD_ONE, "")


def test_dash_diagnostics_name_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin_with(monkeypatch, BAD_SHAPES)
    r = opt(capsys, "-")
    assert r.code == 1
    assert r.err.splitlines()[0] == f"<stdin>:6:10: error: {BAD_MESSAGE}"


@pytest.mark.parametrize("name", ["model", ".model", "dir.d/model"])
def test_file_without_extension_is_dlvm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    (tmp_path / "dir.d").mkdir()
    r = opt(capsys, write(tmp_path, name, ADD_ONE))
    assert (r.code, r.out, r.err) == (0, ADD_ONE, "")


def test_unknown_extension_is_still_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(capsys, write(tmp_path, "model.txt", ADD_ONE))
    assert_one_line_error(r)
    assert r.err == (
        "dlc-opt: error: cannot tell the input syntax from extension 'txt'; use -f dl or -f mlir\n"
    )
    assert opt(capsys, tmp_path / "model.txt", "-f", "dl").code == 0


# -- --split-input-file -------------------------------------------------------------------


def test_split_input_file_processes_every_chunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BAD_SHAPES + SEPARATOR + ADD_ONE + SEPARATOR + BAD_SHAPES
    path = write(tmp_path, "s.dl", text)
    r = opt(capsys, path, "--split-input-file")
    assert r.code == 1
    assert r.out == SEPARATOR + ADD_ONE + SEPARATOR
    second = BAD_SHAPES.count("\n") + ADD_ONE.count("\n") + 2 + 6  # 2 separators
    assert [line for line in r.err.splitlines() if "error:" in line] == [
        f"{path}:6:10: error: {BAD_MESSAGE}",
        f"{path}:{second}:10: error: {BAD_MESSAGE}",
    ]


def test_split_input_file_all_chunks_fine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(capsys, write(tmp_path, "s.dl", ADD_ONE + SEPARATOR + ADD_ONE), "--split-input-file")
    assert (r.code, r.out, r.err) == (0, ADD_ONE + SEPARATOR + ADD_ONE, "")


# -- --verify-diagnostics -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("designator", "where"),
    [
        ("", "on the line"),
        ("@+1", "before"),
        ("@below", "before"),
        ("@-1", "after"),
        ("@above", "after"),
    ],
)
def test_expected_error_matched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], designator: str, where: str
) -> None:
    comment = f"// expected-error{designator} {{{{are not broadcastable}}}}"
    if where == "on the line":
        text = BAD_SHAPES.replace(BAD_LINE, f"{BAD_LINE} {comment}")
    elif where == "before":
        text = BAD_SHAPES.replace(BAD_LINE, f"    {comment}\n{BAD_LINE}")
    else:
        text = BAD_SHAPES.replace(BAD_LINE, f"{BAD_LINE}\n    {comment}")
    path = write(tmp_path, "v.dl", ADD_ONE + SEPARATOR + text)
    r = opt(capsys, path, "--split-input-file", "--verify-diagnostics")
    assert (r.code, r.out, r.err) == (0, ADD_ONE + SEPARATOR, "")


def test_expected_error_not_produced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ADD_ONE.replace("    return", "    // expected-error @-1 {{no such error}}\n    return")
    path = write(tmp_path, "v.dl", text)
    r = opt(capsys, path, "--verify-diagnostics")
    assert r.code == 1
    assert r.err.splitlines() == [
        f'{path}:7:8: error: expected error "no such error" was not produced',
        "    // expected-error @-1 {{no such error}}",
        "       ^",
    ]


def test_unexpected_error_and_wrong_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = expecting(BAD_SHAPES, "@+1", "a different message")
    path = write(tmp_path, "v.dl", text)
    r = opt(capsys, path, "--verify-diagnostics")
    assert r.code == 1
    lines = r.err.splitlines()
    assert lines[0] == f"{path}:7:10: error: unexpected error: {BAD_MESSAGE}"
    assert lines[1:3] == [BAD_LINE, "         ^"]
    assert lines[3] == f'{path}:6:8: error: expected error "a different message" was not produced'


def test_expected_error_on_another_line_does_not_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "v.dl", expecting(BAD_SHAPES, "@+2", "are not broadcastable"))
    r = opt(capsys, path, "--verify-diagnostics")
    assert r.code == 1
    assert "error: unexpected error: add: shapes" in r.err
    assert 'error: expected error "are not broadcastable" was not produced' in r.err


def test_expectations_are_per_chunk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A chunk without an expectation that reports an error fails, whatever other chunks expect."""
    text = expecting(BAD_SHAPES, "@+1", "are not broadcastable") + SEPARATOR + BAD_SHAPES
    path = write(tmp_path, "v.dl", text)
    r = opt(capsys, path, "--split-input-file", "--verify-diagnostics")
    assert r.code == 1
    line = text.count("\n") - BAD_SHAPES.count("\n") + 6
    assert r.err.splitlines()[0] == f"{path}:{line}:10: error: unexpected error: {BAD_MESSAGE}"


def test_unlocated_error_is_expected_at_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "// expected-error@unknown {{-t dl prints graph-level modules only}}\n" + ADD_ONE
    path = write(tmp_path, "v.dl", text)
    r = opt(capsys, path, "--verify-diagnostics", "-p", "lower-graph-to-tensor", "-t", "dl")
    assert (r.code, r.err) == (0, "")
    r = opt(capsys, path, "--verify-diagnostics")
    assert r.code == 1
    assert r.err.startswith(
        f'{path}:1:4: error: expected error "-t dl prints graph-level modules only" was not produced\n'
    )


@pytest.mark.parametrize("designator", ["expected-warning", "expected-note", "expected-error-re"])
def test_other_expectations_are_unsupported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], designator: str
) -> None:
    path = write(tmp_path, "v.dl", f"// {designator} {{{{x}}}}\n" + ADD_ONE)
    r = opt(capsys, path, "--verify-diagnostics")
    assert r.code == 1
    assert r.err.splitlines()[0] == (
        f"{path}:1:4: error: {designator} is not supported: dlc reports errors only (use expected-error)"
    )


def test_without_expectations_diagnostics_are_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dlc's compatibility mode: an input without any expected-* comment prints its
    diagnostics to stdout and exits 0 (the parser's and dialects' lit tests use it)."""
    r = opt(capsys, write(tmp_path, "v.dl", BAD_SHAPES), "--verify-diagnostics")
    assert (r.code, r.err) == (0, "")
    assert r.out.splitlines()[0].endswith(f"v.dl:6:10: error: {BAD_MESSAGE}")


# -- IR dumps -------------------------------------------------------------------------------


def test_print_ir_after_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    passes = "lower-graph-to-tensor,lower-tensor-to-loop"
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-p", passes, "--print-ir-after-all")
    assert r.code == 0
    headers = [line for line in r.err.splitlines() if line.startswith("// -----//")]
    assert headers == [
        "// -----// IR Dump After lower-graph-to-tensor //----- //",
        "// -----// IR Dump After lower-tensor-to-loop //----- //",
    ]
    assert r.err.split(headers[1] + "\n")[1] == r.out + "\n"  # the last dump is the output


def test_print_ir_after_all_covers_the_llvm_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-t", "llvm", "--mlir-print-ir-after-all")
    assert r.code == 0
    steps = dlc.pipeline.steps(dlc.pipeline.Options(opt_level=2))
    dumped = [line for line in r.err.splitlines() if line.startswith("// -----//")]
    assert dumped == [f"// -----// IR Dump After {s.pass_.name} //----- //" for s in steps]
    assert r.err.startswith('// -----// IR Dump After differentiate //----- //\nmodule "m"\n')


@pytest.mark.usefixtures("failing_passes")
def test_print_ir_after_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "m.dl", ADD_ONE)
    r = opt(capsys, path, "-p", "canonicalize,break-ir,cse", "--mlir-print-ir-after-failure")
    assert r.code == 1 and r.out == ""
    lines = r.err.splitlines()
    assert lines[0] == "// -----// IR Dump After break-ir Failed //----- //"
    assert '"arith.constant"() <{value = 1 : i32}> : () -> f32' in r.err
    assert lines[-1] == "dlc-opt: error: unexpected operation 'arith.constant' at module level"
    r = opt(capsys, path, "-p", "canonicalize,break-ir,cse")
    assert_one_line_error(r)


@pytest.mark.usefixtures("failing_passes")
def test_print_ir_after_failure_of_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-p", "crash", "--print-ir-after-failure")
    assert r.code == 2
    assert r.err.startswith("// -----// IR Dump After crash Failed //----- //\n" + ADD_ONE)
    assert r.err.endswith("dlc-opt: internal error: RuntimeError: boom\n")


def test_no_dump_without_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-p", "cse", "--print-ir-after-failure")
    assert (r.code, r.out, r.err) == (0, ADD_ONE, "")


# -- output errors ---------------------------------------------------------------------------


def test_output_to_a_full_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-o", "/dev/full")
    assert_one_line_error(r)
    assert r.err == "dlc-opt: error: cannot write '/dev/full': No space left on device\n"


def test_output_to_proc_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Opening /proc/version to write fails for users; root gets EIO when writing."""
    r = opt(capsys, write(tmp_path, "m.dl", ADD_ONE), "-o", "/proc/version")
    assert_one_line_error(r)
    assert r.err.startswith("dlc-opt: error: cannot write '/proc/version': ")


class FullStream(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_stdout_write_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "m.dl", ADD_ONE)
    monkeypatch.setattr(sys, "stdout", FullStream())
    r = opt(capsys, path)
    assert (r.code, r.err) == (
        1,
        "dlc-opt: error: cannot write to stdout: No space left on device\n",
    )


def test_input_read_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """/proc/self/mem opens but cannot be read at offset 0."""
    r = opt(capsys, "/proc/self/mem")
    assert_one_line_error(r)
    assert r.err == "dlc-opt: error: cannot read '/proc/self/mem': Input/output error\n"


# -- start-up ------------------------------------------------------------------------------

NOT_FOR_GRAPH_PASSES = {"llvmlite", "onnx", "onnxruntime", "scipy", "z3", "lightgbm", "ml_dtypes"}
"""Packages a graph-level `dlc-opt -p` run must not import (each lit RUN line starts a
dlc-opt: its start-up is most of the lit suite's time)."""

NOT_FOR_GRAPH_MODULES = (
    "dlc.superopt_costs",  # the superoptimizer's runtime side: when a pass first asks
    "dlc.api",
    "dlc.runtime",
    "dlc.lowering",
    "dlc.dialects.tensor",  # the levels below graph: when a lowering makes them
    "dlc.dialects.loop",
    "dlc.dialects.schedule",
    "dlc.passes.tensor",  # --tuning-db's SchedulePass: only with --tuning-db
    "dlc.viewer",  # only with --view
)

OPT_MODULES = """
import runpy, sys
sys.argv = ["dlc-opt", *sys.argv[1:]]
try:
    runpy.run_module("dlc.cli.dlc_opt", run_name="__main__")
except SystemExit as stop:
    assert not stop.code, stop.code
print(sorted(sys.modules))
"""


def test_a_graph_level_pipeline_imports_nothing_heavy(tmp_path: Path) -> None:
    """`dlc-opt m.dl -p canonicalize,cse,dce` (in a fresh process) loads neither the
    packages of NOT_FOR_GRAPH_PASSES nor the dlc modules of NOT_FOR_GRAPH_MODULES, so
    a new eager import on dlc-opt's start-up path fails here."""
    path = write(tmp_path, "m.dl", ADD_ONE)
    run = [sys.executable, "-c", OPT_MODULES, str(path), "-p", "canonicalize,cse,dce"]
    done = subprocess.run(run, capture_output=True, text=True, check=True, timeout=300)
    assert "func @add_one" in done.stdout
    modules = set(json.loads(done.stdout.splitlines()[-1].replace("'", '"')))
    assert {"dlc.parser", "dlc.passes.graph.cse", "numpy"} <= modules
    assert not {m.partition(".")[0] for m in modules} & NOT_FOR_GRAPH_PASSES
    loaded = sorted(m for m in modules if m.startswith(NOT_FOR_GRAPH_MODULES))
    assert not loaded, loaded
