"""Ahead-of-time libraries of functions with symbolic dimensions: the C entries take the
sizes at call time (one library serves every size), check them (a negative size, byte
counts that overflow: a status), and say how much arena a call at given sizes needs."""

from __future__ import annotations

import ctypes
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from aot_driver import aarch64_tools, build, driver_source, results, run
from onnx_models import make, node, randn

import dlc
from dlc.aot import ExportError
from dlc.aot.signature import c_function
from dlc.cli import dlc_compile
from dlc.dialects.abi import CTX_ARENA_TOP
from dlc.program_levels import defined_functions
from dlc.semantics.interpreter import run_function

CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler 'cc' on this machine")

PROGRAM = """\
module "sym"
stage raw

func @soft: (<%n x 8 x f32>, <8 x 8 x f32>) -> <%n x 8 x f32> {
'entry(%x: <%n x 8 x f32>, %w: <8 x 8 x f32>):
    %h = dot %x: <%n x 8 x f32>, %w: <8 x 8 x f32>
    %e = exp %h: <%n x 8 x f32>
    %s = reduce %e: <%n x 8 x f32> by add init 0: f32 along 1
    %s2 = padShape %s: <%n x f32> at 1
    %y = divide %e: <%n x 8 x f32>, %s2: <%n x 1 x f32>
    return %y: <%n x 8 x f32>
}

func @flip: (<%rows x %cols x f32>, <%cols x f32>) -> <%cols x %rows x f32> {
'entry(%a: <%rows x %cols x f32>, %b: <%cols x f32>):
    %t = transpose %a: <%rows x %cols x f32>
    %c = padShape %b: <%cols x f32> at 1
    %y = multiply %t: <%cols x %rows x f32>, %c: <%cols x 1 x f32>
    return %y: <%cols x %rows x f32>
}

func @fixed: (<2 x 3 x f32>) -> <3 x 2 x f32> {
'entry(%a: <2 x 3 x f32>):
    %t = transpose %a: <2 x 3 x f32>
    %y = multiply %t: <3 x 2 x f32>, 2: f32
    return %y: <3 x 2 x f32>
}
"""

CASES = [
    ("soft", (1,)),
    ("soft", (7,)),
    ("soft", (600,)),
    ("flip", (2, 3)),
    ("flip", (5, 1)),
    ("fixed", ()),  # static, in a module with symbolic dimensions: no sizes
]
SYMBOLS = {"soft": ("n",), "flip": ("rows", "cols"), "fixed": ()}


def _inputs(name: str, sizes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(sizes))
    if name == "soft":
        x = rng.standard_normal((sizes[0], 8)).astype(np.float32)
        return [x, (rng.standard_normal((8, 8)) / 4).astype(np.float32)]
    if name == "fixed":
        return [rng.standard_normal((2, 3)).astype(np.float32)]
    rows, cols = sizes
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    return [a, rng.standard_normal(cols).astype(np.float32)]


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libsym.so by dlc-compile and a driver linked against it by the system C compiler."""
    if CC is None:
        pytest.skip("no C compiler 'cc' on this machine")
    out = tmp_path_factory.mktemp("aot-symbolic")
    (out / "sym.dl").write_text(PROGRAM)
    assert dlc_compile.main([str(out / "sym.dl"), "-o", str(out / "libsym.so")]) == 0
    module = dlc.parse(PROGRAM, "sym.dl")
    functions = [c_function(f, "sym") for f in defined_functions(module).values()]
    (out / "driver.c").write_text(driver_source(functions, "sym.h"))
    build(CC, out / "driver.c", out / "driver", [f"-L{out}", "-lsym", f"-Wl,-rpath,{out}"])
    return out


def _check(printed: np.ndarray, name: str, inputs: list[np.ndarray]) -> None:
    expected = np.asarray(dlc.compile(PROGRAM, target_cpu="haswell")[name](*inputs)).ravel()
    np.testing.assert_allclose(printed, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(aarch64_tools() is not None, reason=aarch64_tools() or "")
def test_aarch64_library_under_qemu(tmp_path: Path) -> None:
    (tmp_path / "sym.dl").write_text(PROGRAM)
    argv = [str(tmp_path / "sym.dl"), "-o", str(tmp_path / "libsym.so")]
    assert dlc_compile.main([*argv, "--target", "aarch64-linux-gnu"]) == 0
    functions = [c_function(f, "sym") for f in defined_functions(dlc.parse(PROGRAM)).values()]
    (tmp_path / "driver.c").write_text(driver_source(functions, "sym.h"))
    link = [f"-L{tmp_path}", "-lsym", "-Wl,-rpath,$ORIGIN"]
    driver = build("aarch64-linux-gnu-gcc", tmp_path / "driver.c", tmp_path / "driver", link)
    for name, sizes in (("soft", (5,)), ("flip", (3, 2))):
        inputs = _inputs(name, sizes)
        (printed,) = results(run(driver, name, inputs, qemu=True, sizes=sizes))
        _check(printed, name, inputs)


@needs_cc
def test_an_older_cpu_and_a_32_bit_target(tmp_path: Path) -> None:
    module = dlc.compile(PROGRAM)
    module.export(tmp_path / "libsym.so", target_cpu="haswell")
    lib = _lib(tmp_path / "libsym.so")
    inputs = _inputs("soft", (9,))
    out = np.zeros((9, 8), np.float32)
    assert lib.sym_soft(9, *(a.ctypes.data for a in (*inputs, out))) == 0
    _check(out.ravel(), "soft", inputs)
    wasm = module.export(tmp_path / "wasm.o", target="wasm32-unknown-unknown", prefix="sym")
    assert wasm.library.read_bytes()[:4] == b"\0asm"
    assert "size_t sym_soft_arena_bytes(int64_t n);" in wasm.header.read_text()


def _lib(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.sym_status_message.restype = ctypes.c_char_p
    lib.sym_soft_arena_bytes.restype = ctypes.c_size_t
    lib.sym_soft_arena_bytes.argtypes = [ctypes.c_int64]
    lib.sym_flip_arena_bytes.restype = ctypes.c_size_t
    lib.sym_flip_arena_bytes.argtypes = [ctypes.c_int64, ctypes.c_int64]
    lib.sym_soft.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 3]
    lib.sym_flip.argtypes = [ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * 3]
    lib.sym_soft_with_arena.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int64,
        *[ctypes.c_void_p] * 3,
    ]
    return lib


@pytest.mark.parametrize(("name", "sizes"), CASES)
def test_one_library_serves_every_size(library: Path, name: str, sizes: tuple[int, ...]) -> None:
    inputs = _inputs(name, sizes)
    (printed,) = results(run(library / "driver", name, inputs, sizes=sizes))
    jit = dlc.compile(PROGRAM)[name](*inputs)
    static = PROGRAM  # the reference interpreter runs the program at these sizes
    for symbol, size in zip(SYMBOLS[name], sizes, strict=True):
        static = re.sub(rf"%{symbol}\b", str(size), static)
    reference = run_function(dlc.parse(static), name, inputs)
    np.testing.assert_allclose(printed, np.asarray(jit).ravel(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(printed, np.asarray(reference).ravel(), rtol=1e-5, atol=1e-6)


def test_header_names_the_sizes(library: Path) -> None:
    header = (library / "sym.h").read_text()
    assert "int32_t sym_flip(\n    int64_t rows,\n    int64_t cols,\n    const float *a," in header
    assert "size_t sym_flip_arena_bytes(int64_t rows, int64_t cols);" in header
    assert "int32_t sym_fixed(\n    const float *a,\n    float *result);" in header
    assert "size_t sym_fixed_arena_bytes(void);" in header
    assert " *   size cols: the extent of %cols (>= 0)" in header
    assert "in   a: f32 [%rows x %cols] (C-contiguous, read only, rows * cols elements)" in header
    assert "out  result: f32 [%cols x %rows] (C-contiguous, written by the call, cols * rows" in (
        header
    )
    assert (
        "int32_t sym_soft_with_arena(\n    void *arena,\n    size_t arena_bytes,\n    int64_t n,"
        in (header)
    )


def _call(lib: ctypes.CDLL, n: int, arena: np.ndarray | None) -> tuple[int, np.ndarray]:
    x, w = _inputs("soft", (n,))
    out = np.zeros((n, 8), np.float32)
    pointers = [a.ctypes.data for a in (x, w, out)]
    if arena is None:
        return lib.sym_soft(n, *pointers), out
    return lib.sym_soft_with_arena(arena.ctypes.data, arena.nbytes, n, *pointers), out


def test_any_arena_serves_and_the_formula_is_what_a_call_takes(library: Path) -> None:
    lib = _lib(library / "libsym.so")
    jit = dlc.compile(PROGRAM).soft
    for n in (3, 100, 40):
        jit(*_inputs("soft", (n,)))
        ctx = jit._contexts.current
        jit(*_inputs("soft", (n,)))  # in the arena: the top is what the call took
        took = int(ctx.words[CTX_ARENA_TOP]) - ctx.arena_base
        need = lib.sym_soft_arena_bytes(n)
        assert need == took + 64  # every buffer of @soft is sized outside loops: exact
        expected = np.asarray(jit(*_inputs("soft", (n,))))
        for arena in (
            None,
            np.zeros(0, np.uint8),
            np.zeros(64, np.uint8),
            np.zeros(need, np.uint8),
        ):
            code, out = _call(lib, n, arena)
            assert code == 0
            np.testing.assert_array_equal(out, expected)


def test_bad_sizes_return_a_status(library: Path) -> None:
    lib = _lib(library / "libsym.so")
    code = lib.sym_soft(-3, None, None, None)
    assert code > 0 and lib.sym_status_message(code) == b"@soft: size n (%n) is negative: -3"
    code = lib.sym_flip(4, -1, None, None, None)
    assert lib.sym_status_message(code) == b"@flip: size cols (%cols) is negative: -1"
    for sizes in ((2**40, 2**40), (2**62, 1)):
        code = lib.sym_flip(*sizes, None, None, None)
        assert lib.sym_status_message(code) == (
            b"@flip: sizes too large (rows, cols): a buffer's byte count overflows size_t"
        )
        assert lib.sym_flip_arena_bytes(*sizes) == 0
    assert lib.sym_soft_arena_bytes(-1) == 0
    lib.sym_fixed_arena_bytes.restype = ctypes.c_size_t
    assert lib.sym_fixed_arena_bytes() == 64 + 64  # 6 floats rounded past 64, the slack
    assert lib.sym_soft_arena_bytes(0) > 0  # each buffer is at least 64 bytes


def test_a_size_of_zero_runs(library: Path) -> None:
    lib = _lib(library / "libsym.so")
    code, out = _call(lib, 0, None)
    assert (code, out.shape) == (0, (0, 8))


def test_export_of_a_compiled_module(tmp_path: Path) -> None:
    exported = dlc.compile(PROGRAM).export(tmp_path / "sym.o", entries=["flip"])
    assert exported.library.read_bytes()[:4] == b"\x7fELF"
    header = exported.header.read_text()
    assert "int64_t rows" in header and "sym_soft" not in header


CLASH = """\
module "c"
stage raw

func @f: (<%n x f32>) -> <%n x f32> {
'entry(%x: <%n x f32>):
    %y = negate %x: <%n x f32>
    return %y: <%n x f32>
}

func @f_arena_bytes: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %y = negate %x: <2 x f32>
    return %y: <2 x f32>
}
"""


def test_the_arena_function_name_is_taken(tmp_path: Path) -> None:
    with pytest.raises(ExportError) as e:
        dlc.compile(CLASH).export(tmp_path / "sym.o")
    assert str(e.value) == "@f_arena_bytes: its C name sym_f_arena_bytes is also the C name of @f"


def _onnx_model(tmp_path: Path) -> str:
    model = make(
        [node("MatMul", ["x", "w"], ["h"]), node("Softmax", ["h"], ["y"], axis=-1)],
        {"x": ("batch", 4)},
        {"y": ("batch", 3)},
        {"w": randn(4, 3)},
    )
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    return path


@needs_cc
def test_dlc_compile_dynamic_onnx(tmp_path: Path) -> None:
    path = _onnx_model(tmp_path)
    assert dlc_compile.main([path, "-o", str(tmp_path / "libnet.so"), "--dynamic"]) == 0
    module = dlc.onnx.load(path, dynamic=True)
    functions = [c_function(f, "net") for f in defined_functions(module).values()]
    assert [s.name for s in functions[0].sizes] == ["batch"]
    (tmp_path / "driver.c").write_text(driver_source(functions, "net.h"))
    link = [f"-L{tmp_path}", "-lnet", f"-Wl,-rpath,{tmp_path}"]
    driver = build(CC, tmp_path / "driver.c", tmp_path / "driver", link)  # type: ignore[arg-type]
    jit = dlc.compile_onnx(path, dynamic=True)[functions[0].name]
    for batch in (1, 5, 33):
        x = randn(batch, 4, seed=batch)
        (printed,) = results(run(driver, functions[0].name, [x], sizes=(batch,)))
        np.testing.assert_allclose(printed, np.asarray(jit(x)).ravel(), rtol=1e-6, atol=1e-7)
