"""dlc-run and dlc-compile on programs with symbolic dimensions: inputs of any size run,
random inputs are refused with one one-line error; dlc-compile writes a library whose
functions take the sizes (test/unit/aot calls them), `--dynamic` is for ONNX models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_cli import assert_one_line_error, run, write

from dlc.cli import dlc_compile

SCALE = """\
module "scale"
stage raw

func @f: (<%n x 2 x f32>) -> <%n x 2 x f32> {
'entry(%x: <%n x 2 x f32>):
    %y = multiply %x: <%n x 2 x f32>, 2: f32
    return %y: <%n x 2 x f32>
}
"""


@pytest.mark.parametrize("n", [1, 3])
def test_run_takes_inputs_of_any_size(
    n: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.arange(2 * n, dtype=np.float32).reshape(n, 2))
    r = run(capsys, write(tmp_path, "s.dl", SCALE), "--input", f"x={x}")
    assert (r.code, r.err) == (0, "")
    assert "output 0: <%n x 2 x f32>" in r.out
    assert f"{4 * n - 2}.]]" in r.out and r.out.count("[") == n + 1


def test_random_inputs_need_a_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, write(tmp_path, "s.dl", SCALE), "--random-inputs")
    assert_one_line_error(r, "dlc-run")
    assert r.err == (
        "dlc-run: error: --random-inputs: parameter %x (<%n x 2 x f32>) has the symbolic "
        "dimension %n; give it with --input x=PATH.npy\n"
    )


def test_compile_writes_a_library_taking_the_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path, "s.dl", SCALE)
    assert dlc_compile.main([str(source), "-o", str(tmp_path / "s.o")]) == 0
    header = (tmp_path / "s.h").read_text()
    assert "int32_t s_f(\n    int64_t n,\n    const float *x,\n    float *result);" in header
    assert "size_t s_f_arena_bytes(int64_t n);" in header


def test_dynamic_is_for_onnx_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(write(tmp_path, "s.dl", SCALE)), "-o", str(tmp_path / "s.o"), "--dynamic"]
    assert dlc_compile.main(argv) == 1
    assert capsys.readouterr().err == "dlc-compile: error: --dynamic applies to ONNX models only\n"
