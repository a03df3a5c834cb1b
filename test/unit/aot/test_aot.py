"""Ahead-of-time libraries (`dlc-compile`, `CompiledModule.export`): C programs link
them, call them and print what dlc's own run gives; aarch64 under qemu; no text
relocations; traps and bounds violations return a status and a message; user errors
are one diagnostic."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from aot_driver import aarch64_tools, build, driver_source, results, run

import dlc
from dlc.aot import text_relocations
from dlc.aot.signature import c_function
from dlc.cli import dlc_compile
from dlc.semantics.interpreter import run_function

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler 'cc' on this machine")


def _inputs(module: object, name: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    func = next(f for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data == name)  # type: ignore[attr-defined]
    return [rng.standard_normal(t.dims).astype(np.float32) for t in func.function_type.args]


def _flat(result: object) -> list[np.ndarray]:
    values = result if isinstance(result, tuple) else (result,)
    return [np.asarray(v, np.float64).ravel() for v in values]


def _functions(module: object, prefix: str) -> list:  # noqa: ANN401
    from dlc.program_levels import defined_functions

    return [c_function(f, prefix) for f in defined_functions(module).values()]  # type: ignore[arg-type]


EXAMPLE_CASES = [("mlp.dl", "mlp"), ("lstm_cell.dl", "lstm_cell")]


@pytest.fixture(scope="module")
def host_libraries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libmlp.so by dlc-compile, liblstm.so by `CompiledModule.export`, each with a
    driver linked against it by the system C compiler."""
    if CC is None:
        pytest.skip("no C compiler 'cc' on this machine")
    out = tmp_path_factory.mktemp("aot-host")
    assert dlc_compile.main([str(EXAMPLES / "mlp.dl"), "-o", str(out / "libmlp.so")]) == 0
    dlc.compile_file(EXAMPLES / "lstm_cell.dl").export(out / "liblstm.so", prefix="lstm")
    for lib, example in (("mlp", "mlp.dl"), ("lstm", "lstm_cell.dl")):
        module = dlc.parse((EXAMPLES / example).read_text(), example)
        source = out / f"{lib}_driver.c"
        source.write_text(driver_source(_functions(module, lib), f"{lib}.h"))
        build(CC, source, out / f"{lib}_driver", [f"-L{out}", f"-l{lib}", f"-Wl,-rpath,{out}"])
    return out


@pytest.mark.parametrize(("example", "name"), EXAMPLE_CASES)
def test_c_program_prints_what_dlc_computes(host_libraries: Path, example: str, name: str) -> None:
    lib = "mlp" if name == "mlp" else "lstm"
    text = (EXAMPLES / example).read_text()
    inputs = _inputs(dlc.parse(text, example), name, seed=7)
    expected = _flat(dlc.compile(text, filename=example)[name](*inputs))
    printed = results(run(host_libraries / f"{lib}_driver", name, inputs))
    assert len(printed) == len(expected)
    for got, want in zip(printed, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_header_documents_every_argument(host_libraries: Path) -> None:
    header = (host_libraries / "lstm.h").read_text()
    assert "#ifndef LSTM_H" in header and 'extern "C"' in header and "<stdint.h>" in header
    assert "in   wi: f32 [192 x 128]" in header
    assert "out  result1: f32 [1 x 128]" in header
    assert "int32_t lstm_lstm_cell(\n    const float *x," in header
    assert "const char *lstm_status_message(int32_t status);" in header
    assert "#define LSTM_ARENA_BYTES" in header and "re-entrant" in header


def test_shared_library_has_no_text_relocations(host_libraries: Path) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("no readelf on this machine")
    for lib in ("libmlp.so", "liblstm.so"):
        dynamic = subprocess.run(
            ["readelf", "-d", str(host_libraries / lib)], capture_output=True, text=True
        ).stdout
        assert "TEXTREL" not in dynamic and "(NEEDED)" in dynamic
        assert not text_relocations(host_libraries / lib)


def test_only_the_entry_points_are_exported(host_libraries: Path) -> None:
    if shutil.which("nm") is None:
        pytest.skip("no nm on this machine")
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(host_libraries / "libmlp.so")],
        capture_output=True,
        text=True,
    ).stdout
    names = {line.split()[-1] for line in symbols.splitlines()}
    assert {"mlp_mlp", "mlp_mlp_with_arena", "mlp_status_message"} <= names
    assert "mlp" not in names and not any(n.startswith("_dlc") for n in names)


@pytest.mark.skipif(aarch64_tools() is not None, reason=aarch64_tools() or "")
def test_aarch64_library_under_qemu(tmp_path: Path) -> None:
    """Cross-compiled for aarch64, linked by aarch64-linux-gnu-gcc, run under qemu:
    the results of the reference interpreter."""
    for example, name in EXAMPLE_CASES:
        lib = name.split("_")[0]
        text = (EXAMPLES / example).read_text()
        module = dlc.parse(text, example)
        argv = [
            str(EXAMPLES / example),
            "-o",
            str(tmp_path / f"lib{lib}.so"),
            "--target",
            "aarch64-linux-gnu",
        ]
        assert dlc_compile.main(argv) == 0
        source = tmp_path / f"{lib}_driver.c"
        source.write_text(driver_source(_functions(module, lib), f"{lib}.h"))
        link = [f"-L{tmp_path}", f"-l{lib}", f"-Wl,-rpath,{tmp_path}"]
        driver = build("aarch64-linux-gnu-gcc", source, tmp_path / f"{lib}_driver", link)
        inputs = _inputs(module, name, seed=11)
        expected = _flat(run_function(module, name, inputs))
        printed = results(run(driver, name, inputs, qemu=True))
        for got, want in zip(printed, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert not text_relocations(tmp_path / f"lib{lib}.so")


PARALLEL = """module "par"
stage raw

func @scale: (<512 x 1024 x f32>, <512 x 1024 x f32>) -> <512 x 1024 x f32> {
'entry(%x: <512 x 1024 x f32>, %y: <512 x 1024 x f32>):
    %p = multiply %x: <512 x 1024 x f32>, %y: <512 x 1024 x f32>
    %s = add %p: <512 x 1024 x f32>, 1.0: f32
    return %s: <512 x 1024 x f32>
}
"""


@needs_cc
def test_parallel_loops_link_the_openmp_runtime(tmp_path: Path) -> None:
    mod = dlc.compile(PARALLEL, filename="par.dl")
    if "GOMP_parallel" not in mod.ir("llvm"):
        pytest.skip("no OpenMP runtime here: the loops are serial")
    mod.export(tmp_path / "libpar.so")
    assert "the OpenMP runtime" in (tmp_path / "par.h").read_text()
    dynamic = subprocess.run(
        ["readelf", "-d", str(tmp_path / "libpar.so")], capture_output=True, text=True
    ).stdout
    assert "libgomp" in dynamic and "TEXTREL" not in dynamic
    source = tmp_path / "driver.c"
    source.write_text(driver_source(_functions(dlc.parse(PARALLEL), "par"), "par.h"))
    driver = build(
        CC, source, tmp_path / "driver", [f"-L{tmp_path}", "-lpar", f"-Wl,-rpath,{tmp_path}"]
    )  # type: ignore[arg-type]
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((512, 1024)).astype(np.float32) for _ in range(2))
    (printed,) = results(run(driver, "scale", [x, y]))
    np.testing.assert_allclose(printed, (x * y + 1).astype(np.float64).ravel(), rtol=1e-6)


def test_aot_guide_worked_example(host_libraries: Path) -> None:
    """The AOT guide's C driver prints what the guide says; its header excerpt is real."""
    section = (EXAMPLES.parent / "docs" / "guide" / "aot.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    main = next(text for lang, text in blocks if lang == "c" and "int main" in text)
    excerpt = next(text for lang, text in blocks if lang == "c" and "/* @mlp" in text)
    header = (host_libraries / "mlp.h").read_text()
    prototype = excerpt[excerpt.index("/* @mlp") : excerpt.index("float *result);")]
    assert prototype in header
    (host_libraries / "main.c").write_text(main)
    link = [f"-L{host_libraries}", "-lmlp", f"-Wl,-rpath,{host_libraries}"]
    driver = build(CC, host_libraries / "main.c", host_libraries / "main", link)  # type: ignore[arg-type]
    printed = run(driver, "-", []).split()
    shown = re.search(r"&& \./main\n(.*)\n", section)
    assert shown is not None and printed == shown.group(1).split()
