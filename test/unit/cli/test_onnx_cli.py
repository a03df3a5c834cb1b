"""dlc-run and dlc-opt on `.onnx` files: import, compile, run, print; errors are one
line per problem on stderr with exit code 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_models import make, node, randn

from dlc.cli import dlc_opt, dlc_run


def _model(tmp_path: Path, batch: int | str = 2) -> str:
    model = make(
        [node("Gemm", ["input.1", "w"], ["h"], transB=1), node("Relu", ["h"], ["y"])],
        {"input.1": (batch, 4)},
        {"y": (batch, 3)},
        {"w": randn(3, 4)},
    )
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    return path


def test_dlc_run_random_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = dlc_run.main([_model(tmp_path), "--random-inputs", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("output 0: <2 x 3 x f32>\n")


def test_dlc_run_named_input_and_input_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.abs(randn(5, 4))
    np.save(tmp_path / "x.npy", x)
    path = _model(tmp_path, batch="N")
    code = dlc_run.main(
        [path, "--input-shape", "input.1=5x4", "--input", f"input.1={tmp_path / 'x.npy'}"]
    )
    assert code == 0 and capsys.readouterr().out.startswith("output 0: <5 x 3 x f32>\n")


def test_dlc_run_dynamic_shape_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _model(tmp_path, batch="N")
    assert dlc_run.main([path, "--random-inputs"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"{path}: error: input 'input.1': dynamic shape (N, 4); give its shape with "
        "input_shapes={'input.1': (...)} (dlc-run: --input-shape input.1=...)\n"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("x=2xa", "--input-shape x=2xa: expected NAME=DIMxDIMx..."),
        ("=2", "--input-shape =2: expected NAME=DIMxDIMx..."),
    ],
)
def test_dlc_run_bad_input_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    assert dlc_run.main([_model(tmp_path), "--input-shape", spec]) == 1
    assert capsys.readouterr().err == f"dlc-run: error: {message}\n"


def test_dlc_run_input_shape_needs_an_onnx_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.dl"
    path.write_text('module "m"\nstage raw\n')
    assert dlc_run.main([str(path), "--input-shape", "x=2"]) == 1
    assert capsys.readouterr().err == "dlc-run: error: --input-shape applies to ONNX models only\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [([], "func @g: (<2 x 4 x f32>) -> <2 x 3 x f32>"), (["-t", "mlir"], "graph.dot")],
)
def test_dlc_opt_prints_the_imported_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    assert dlc_opt.main([_model(tmp_path), *args]) == 0
    assert expected in capsys.readouterr().out


def test_dlc_opt_reads_onnx_by_format_and_lowers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(_model(tmp_path))
    renamed = path.with_suffix(".bin")
    path.rename(renamed)
    assert dlc_opt.main([str(renamed), "-f", "onnx", "-t", "llvm"]) == 0
    assert "define" in capsys.readouterr().out


def test_dlc_opt_import_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "bad.onnx")
    onnx.save(make([node("Xyz", ["x"], ["y"])], {"x": (2,)}, {"y": None}), path)
    assert dlc_opt.main([path]) == 1
    assert (
        capsys.readouterr().err == f"{path}: error: node 'y' (Xyz): operator Xyz is not supported\n"
    )
