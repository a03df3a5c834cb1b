"""ONNX models compile ahead of time too: `dlc-compile model.onnx` and
`dlc.compile_onnx(...).export`, with `--input-shape` for dynamic dimensions."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from aot_driver import build, driver_source, results, run
from onnx_models import make, node, randn

import dlc
from dlc.aot.signature import c_function
from dlc.cli import dlc_compile
from dlc.program_levels import defined_functions

CC = shutil.which("cc")


def _model(tmp_path: Path) -> str:
    model = make(
        [node("Gemm", ["input.1", "w"], ["h"], transB=1), node("Relu", ["h"], ["y"])],
        {"input.1": ("batch", 4)},
        {"y": ("batch", 3)},
        {"w": randn(3, 4)},
    )
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    return path


@pytest.mark.skipif(CC is None, reason="no C compiler 'cc' on this machine")
def test_dlc_compile_reads_onnx(tmp_path: Path) -> None:
    path = _model(tmp_path)
    argv = [path, "-o", str(tmp_path / "libnet.so"), "--input-shape", "input.1=2x4"]
    assert dlc_compile.main(argv) == 0
    module = dlc.onnx.load(path, {"input.1": (2, 4)})
    functions = [c_function(f, "net") for f in defined_functions(module).values()]
    assert [a.name for a in functions[0].params] == ["input_1"]
    (tmp_path / "driver.c").write_text(driver_source(functions, "net.h"))
    link = [f"-L{tmp_path}", "-lnet", f"-Wl,-rpath,{tmp_path}"]
    driver = build(CC, tmp_path / "driver.c", tmp_path / "driver", link)  # type: ignore[arg-type]
    x = randn(2, 4, seed=5)
    (printed,) = results(run(driver, functions[0].name, [x]))
    expected = dlc.compile_onnx(path, input_shapes={"input.1": (2, 4)})[functions[0].name](x)
    np.testing.assert_allclose(printed, np.asarray(expected).ravel(), rtol=1e-6, atol=1e-7)


def test_compile_onnx_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _model(tmp_path)
    compiled = dlc.compile_onnx(path, input_shapes={"input.1": (1, 4)})
    exported = compiled.export(tmp_path / "net.o")
    assert exported.library.read_bytes()[:4] == b"\x7fELF"
    assert "in   input_1: f32 [1 x 4]" in exported.header.read_text()
    assert dlc_compile.main([path, "-o", str(tmp_path / "n.o")]) == 1
    assert "dynamic" in capsys.readouterr().err
