"""Ahead-of-time libraries as `.o` and `.a`: status codes and messages of traps and
bounds violations, scalars by value, module variables (the `random` generator's
state) as static storage, a caller-provided arena; and the errors of `dlc-compile`
and `CompiledModule.export`."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from aot_driver import build, driver_source, results, run

import dlc
from dlc.aot import ExportError
from dlc.aot.signature import c_function
from dlc.cli import dlc_compile
from dlc.program_levels import defined_functions

CC = shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler 'cc' on this machine")

SOURCE = """module "t"
stage raw

func @get: (<4 x f32>, i64) -> f32 {
'entry(%t: <4 x f32>, %i: i64):
    %v = extract %i: i64 from %t: <4 x f32>
    return %v: f32
}

func @fails: (f32) -> f32 {
'entry(%x: f32):
    trap
    return %x: f32
}

func @draw: (f64) -> <3 x f64> {
'entry(%scale: f64):
    %r = random 3 from 0: f64 upto 1: f64
    %s = multiply %r: <3 x f64>, %scale: f64
    return %s: <3 x f64>
}

func @inf: (i64) -> i64 {
'entry(%n: i64):
    %m = add %n: i64, 1: i64
    %r = apply @inf(%m: i64): (i64) -> i64
    return %r: i64
}

func @pick: (bool, <2 x i32>, <2 x i32>) -> (<2 x i32>, i32) {
'entry(%c: bool, %a: <2 x i32>, %b: <2 x i32>):
    %r = select %a: <2 x i32>, %b: <2 x i32> by %c: bool
    %s = reduce %r: <2 x i32> by add init 0: i32 along 0
    %t = literal (%r: <2 x i32>, %s: i32): (<2 x i32>, i32)
    return %t: (<2 x i32>, i32)
}
"""


@pytest.fixture(scope="module")
def drivers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The program as t.o and libt.a (bounds checked), each linked into a driver."""
    out = tmp_path_factory.mktemp("aot-status")
    source = out / "t.dl"
    source.write_text(SOURCE)
    module = dlc.parse(SOURCE, str(source))
    functions = [c_function(f, "t") for f in defined_functions(module).values()]
    (out / "driver.c").write_text(driver_source(functions, "t.h"))
    made = {}
    for output in ("t.o", "libt.a"):
        argv = [str(source), "-o", str(out / output), "--bounds-check", "--prefix", "t"]
        assert dlc_compile.main(argv) == 0
        link = [str(out / output), "-lm"] if output == "t.o" else [f"-L{out}", "-lt", "-lm"]
        made[output] = build(CC, out / "driver.c", out / f"driver_{output[:-2]}", link)  # type: ignore[arg-type]
    return made


@pytest.mark.parametrize("kind", ["t.o", "libt.a"])
def test_object_and_archive_link_and_run(drivers: dict[str, Path], kind: str) -> None:
    a, b = np.array([1, 2], np.int32), np.array([30, 40], np.int32)
    printed = results(run(drivers[kind], "pick", [np.array(True), a, b]))
    assert [list(p) for p in printed] == [[1, 2], [3]]
    printed = results(run(drivers[kind], "pick", [np.array(False), a, b]))
    assert [list(p) for p in printed] == [[30, 40], [70]]


def test_trap_returns_a_status_and_its_message(drivers: dict[str, Path]) -> None:
    printed = run(drivers["t.o"], "fails", [np.float32(1)])
    assert printed.startswith("status ") and printed.rstrip().endswith("t.dl:12:5: trap")


def test_bounds_violation_message_has_the_index(drivers: dict[str, Path]) -> None:
    table = np.arange(4, dtype=np.float32)
    assert results(run(drivers["t.o"], "get", [table, np.int64(2)])) == [2.0]
    printed = run(drivers["t.o"], "get", [table, np.int64(7)])
    assert "t.dl:6:10: out-of-bounds extract index 7 into <4 x f32>" in printed


def test_unbounded_recursion_returns_a_status(drivers: dict[str, Path]) -> None:
    printed = run(drivers["t.o"], "inf", [np.int64(0)])
    assert "call depth limit exceeded (20000) in @inf" in printed or "stack overflow" in printed


def test_module_variables_are_static_storage(drivers: dict[str, Path]) -> None:
    """The generator's state starts as `dlc.compile`'s (seed 0): the same draws."""
    first = results(run(drivers["libt.a"], "draw", [np.float64(2)]))[0]
    expected = dlc.compile(SOURCE, filename="t.dl").draw(np.float64(2))
    np.testing.assert_allclose(first, expected, rtol=1e-15)


ARENA_DRIVER = r"""#include <stdio.h>
#include <stdlib.h>
#include "mlp.h"
int main(void) {
  float *x = calloc(784, 4), *w1 = calloc(784 * 256, 4), *b1 = calloc(256, 4);
  float *w2 = calloc(2560, 4), *b2 = calloc(10, 4), out[10], again[10];
  for (int i = 0; i < 10; i++) b2[i] = (float)i;
  void *arena = malloc(MLP_ARENA_BYTES);
  int32_t ok = mlp_mlp_with_arena(arena, MLP_ARENA_BYTES, x, w1, b1, w2, b2, out);
  int32_t same = mlp_mlp(x, w1, b1, w2, b2, again);
  int32_t small = mlp_mlp_with_arena(arena, 8, x, w1, b1, w2, b2, out);
  printf("%d %d %d %.6g %.6g\n", ok, same, small > 0, out[9], again[9]);
  printf("%s\n", mlp_status_message(small));
  return 0;
}
"""


THREADS_DRIVER = r"""#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlp.h"
static float x[784], w1[784 * 256], b1[256], w2[2560], b2[10], want[10];
static void *worker(void *arg) {
  float out[10];
  for (int k = 0; k < 50; k++)
    if (mlp_mlp(x, w1, b1, w2, b2, out) != 0 || memcmp(out, want, sizeof out) != 0)
      return arg;
  return NULL;
}
int main(void) {
  for (int i = 0; i < 784 * 256; i++) w1[i] = (float)(i % 13) / 1300.0f;
  for (int i = 0; i < 2560; i++) w2[i] = (float)(i % 10) / 1000.0f;
  for (int i = 0; i < 784; i++) x[i] = (float)(i % 5);
  if (mlp_mlp(x, w1, b1, w2, b2, want) != 0) return 1;
  pthread_t threads[4];
  static int ids[4];
  for (int t = 0; t < 4; t++) pthread_create(&threads[t], NULL, worker, &ids[t]);
  int failed = 0;
  for (int t = 0; t < 4; t++) {
    void *result;
    pthread_join(threads[t], &result);
    failed += result != NULL;
  }
  printf("%d failed, %.6g\n", failed, want[3]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def mlp_object(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aot-mlp")
    examples = Path(__file__).resolve().parents[3] / "examples"
    assert dlc_compile.main([str(examples / "mlp.dl"), "-o", str(out / "mlp.o")]) == 0
    return out / "mlp.o"


def test_concurrent_calls_from_threads(mlp_object: Path) -> None:
    """Re-entrant: four threads call at once and all get the single-threaded result."""
    source = mlp_object.with_name("threads.c")
    source.write_text(THREADS_DRIVER)
    driver = build(CC, source, source.with_suffix(""), [str(mlp_object), "-lm", "-pthread"])  # type: ignore[arg-type]
    printed = run(driver, "-", [])
    assert printed.startswith("0 failed, ") and float(printed.split()[-1]) > 0


def test_caller_provided_arena(mlp_object: Path) -> None:
    source = mlp_object.with_name("arena.c")
    source.write_text(ARENA_DRIVER)
    driver = build(CC, source, source.with_suffix(""), [str(mlp_object), "-lm"])  # type: ignore[arg-type]
    lines = run(driver, "-", []).splitlines()
    numbers = lines[0].split()
    assert numbers[:3] == ["0", "0", "1"] and numbers[3] == numbers[4]
    assert "out of memory" in lines[1] and "(arena)" in lines[1]


EXTERN = """module "e"
stage raw

[extern]
func @user_gain: (f32) -> f32

func @amp: (f32) -> f32 {
'entry(%x: f32):
    %g = apply @user_gain(%x: f32): (f32) -> f32
    return %g: f32
}
"""


def test_externs_are_symbols_the_user_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "e.dl").write_text(EXTERN)
    err = _error([str(tmp_path / "e.dl"), "-o", str(tmp_path / "e.o")], capsys)
    assert "extern function @user_gain is not allowed" in err
    argv = [str(tmp_path / "e.dl"), "-o", str(tmp_path / "e.o"), "--allow-extern", "user_gain"]
    assert dlc_compile.main(argv) == 0
    assert "(link them): user_gain." in (tmp_path / "e.h").read_text()
    functions = [c_function(f, "e") for f in defined_functions(dlc.parse(EXTERN)).values()]
    source = driver_source(functions, "e.h") + "float user_gain(float x) { return 3.0f * x; }\n"
    (tmp_path / "driver.c").write_text(source)
    driver = build(CC, tmp_path / "driver.c", tmp_path / "driver", [str(tmp_path / "e.o"), "-lm"])  # type: ignore[arg-type]
    assert results(run(driver, "amp", [np.float32(2)])) == [6.0]


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert dlc_compile.main(argv) == 1
    return capsys.readouterr().err


def test_bad_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.dl").write_text(SOURCE)
    err = _error([str(tmp_path / "t.dl"), "-o", str(tmp_path / "t.dylib")], capsys)
    assert err.startswith("dlc-compile: error: cannot tell what to write from the name")


def test_unsupported_signature_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = (
        SOURCE
        + """
func @load_at: (*<4 x f32>, i64) -> f32 {
'entry(%p: *<4 x f32>, %i: i64):
    %q = elementPointer %p: *<4 x f32> at %i: i64
    %v = load %q: *f32
    return %v: f32
}
"""
    )
    (tmp_path / "p.dl").write_text(program)
    err = _error([str(tmp_path / "p.dl"), "-o", str(tmp_path / "p.o")], capsys)
    assert (
        "p.dl:38:6: error: @load_at cannot be exported to C: parameter %p has type *<4 x f32>"
        in err
    )
    # the other functions export when they are chosen
    assert dlc_compile.main([str(tmp_path / "p.dl"), "-o", str(tmp_path / "p.o"), "-e", "get"]) == 0


def test_missing_linker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.dl").write_text(SOURCE)
    argv = [str(tmp_path / "t.dl"), "-o", str(tmp_path / "libt.so"), "--cc", "no-such-cc-for-dlc"]
    err = _error(argv, capsys)
    assert "no C compiler 'no-such-cc-for-dlc' to link the library" in err
    assert not (tmp_path / "libt.so").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--entry", "nope"], "no function @nope is defined (defined functions: @get, @fails"),
        (["--prefix", "9lives"], "prefix '9lives' is not a C identifier"),
        (["--target", "sparc-linux-gnu"], "unsupported target 'sparc-linux-gnu'"),
        (["--target", "aarch64-linux-gnu", "--target-cpu", "znver5"], "unknown CPU model 'znver5'"),
    ],
)
def test_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    (tmp_path / "t.dl").write_text(SOURCE)
    err = _error([str(tmp_path / "t.dl"), "-o", str(tmp_path / "t.o"), *options], capsys)
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "malloc",
            "@malloc: the library needs the name malloc for a C function the entry points call",
        ),
        (
            "t_status_message",
            "the library needs the name t_status_message for the status message function",
        ),
    ],
)
def test_function_names_the_library_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    (tmp_path / "t.dl").write_text(SOURCE.replace("@fails", f"@{name}"))
    assert message in _error([str(tmp_path / "t.dl"), "-o", str(tmp_path / "t.o")], capsys)


def test_wasm32_writes_objects_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.dl").write_text(SOURCE)
    argv = [
        str(tmp_path / "t.dl"),
        "-o",
        str(tmp_path / "t.a"),
        "--target",
        "wasm32-unknown-unknown",
    ]
    assert "produces .o object files only" in _error(argv, capsys)


def test_export_errors_from_python(tmp_path: Path) -> None:
    mod = dlc.compile(SOURCE, filename="t.dl")
    with pytest.raises(ExportError, match="no directory"):
        mod.export(tmp_path / "missing" / "t.o")
    with pytest.raises(ExportError, match="would overwrite the library"):
        mod.export(tmp_path / "t.o", header=tmp_path / "t.o")
    with pytest.raises(ExportError, match="cannot write .*t.h"):
        mod.export(tmp_path / "t.o", header=tmp_path / "t.o" / "t.h")
