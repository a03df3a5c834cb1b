"""Extern functions are a capability (dlc/externs.py): a program calls an `[extern]` C
function only if the compile allows it (`externs=` / `dlc-run --allow-extern`).

The two exploits of the security review (`kill(getpid(), 9)`; `malloc` + `memset` +
`system` running a shell command) are located diagnostics by default and nothing of them
runs, through `dlc.compile` and through `dlc-run`; allowed, the same programs do run,
which shows the allow-list is what stops them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlc
from dlc import api
from dlc.externs import LIBM, allowed_externs
from dlc.pipeline import Options
from dlc.runtime import cache
from dlc.runtime.native import resolve_symbols

KILL = """module "evil"
stage raw

[extern]
func @getpid: () -> i32

[extern]
func @kill: (i32, i32) -> i32

func @main: () -> i32 {
'entry():
    %pid = apply @getpid(): () -> i32
    %r = apply @kill(%pid: i32, SIGNAL: i32): (i32, i32) -> i32
    return %r: i32
}
"""

SYSTEM_HEAD = """module "evil"
stage raw

[extern]
func @malloc: (i64) -> i64

[extern]
func @memset: (i64, i32, i64) -> i64

[extern]
func @system: (i64) -> i32

func @main: () -> i32 {
'entry():
    %p = apply @malloc(256: i64): (i64) -> i64
"""

SIN = """module "m"
stage raw

[extern]
func @sinf: (f32) -> f32

[extern]
func @sin: (f64) -> f64

func @f: (f32, f64) -> (f32, f64) {
'entry(%x: f32, %y: f64):
    %a = apply @sinf(%x: f32): (f32) -> f32
    %b = apply @sin(%y: f64): (f64) -> f64
    %t = literal (%a: f32, %b: f64): (f32, f64)
    return %t: (f32, f64)
}
"""

NOT_ALLOWED = (
    "extern function @{0} is not allowed: externs run native code with this process's "
    "rights; allow it with externs=['{0}'] or dlc-run --allow-extern {0}"
)


def kill_program(signal: int) -> str:
    return KILL.replace("SIGNAL", str(signal))


def system_program(command: str) -> str:
    """`system(command)`, the string written byte by byte with memset into malloc'd memory
    (each address is the previous memset's result plus one, so no call is dead)."""
    lines = [SYSTEM_HEAD.rstrip("\n")]
    address = "%p"
    for k, byte in enumerate([*command.encode(), 0]):
        lines.append(
            f"    %m{k} = apply @memset({address}: i64, {byte}: i32, 1: i64): (i64, i32, i64) -> i64"
        )
        lines.append(f"    %a{k} = add %m{k}: i64, 1: i64")
        address = f"%a{k}"
    n = len(command) + 1
    lines.append(f"    %s = subtract {address}: i64, {n}: i64")
    lines.append("    %r = apply @system(%s: i64): (i64) -> i32")
    lines.append("    return %r: i32")
    lines.append("}")
    return "\n".join(lines) + "\n"


def diagnostic(path: str, line: int, name: str) -> str:
    """The first line of the diagnostic for the `[extern]` @name declared at `line`."""
    return f"{path}:{line}:6: error: " + NOT_ALLOWED.format(name)


@pytest.fixture
def compile_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The compile steps that run, in order: cache lookups, lowerings, symbol lookups."""
    calls: list[str] = []

    def record(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(what)
            return original(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(cache, "lookup", record("cache.lookup", cache.lookup))
    monkeypatch.setattr(api, "lower", record("lower", api.lower))
    monkeypatch.setattr(api, "resolve_symbols", record("resolve_symbols", api.resolve_symbols))
    return calls


def dlc_run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    """dlc-run in a child process: if an exploit ran, it hits the child, not pytest."""
    return subprocess.run(
        [sys.executable, "-m", "dlc.cli.dlc_run", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=300,
    )


# -- the exploits, through dlc.compile ------------------------------------------------


def test_kill_exploit_is_a_located_diagnostic(compile_steps: list[str]) -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(kill_program(9), filename="evil.dl")
    assert str(info.value).splitlines() == [
        diagnostic("evil.dl", 5, "getpid"),
        "func @getpid: () -> i32",
        "     ^",
    ]
    assert compile_steps == []


def test_system_exploit_is_a_located_diagnostic(tmp_path: Path, compile_steps: list[str]) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(system_program(f"touch {marker}"), filename="evil.dl")
    assert str(info.value).splitlines()[0] == diagnostic("evil.dl", 5, "malloc")
    assert compile_steps == []
    assert not marker.exists()


def test_every_called_extern_must_be_allowed(compile_steps: list[str]) -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(kill_program(9), filename="evil.dl", externs=["getpid"])
    assert str(info.value).splitlines()[0] == diagnostic("evil.dl", 8, "kill")
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(kill_program(9), filename="evil.dl", externs="libm")
    assert info.value.message == NOT_ALLOWED.format("getpid")
    assert compile_steps == []


def test_libm_preset_does_not_allow_system(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = system_program(f"touch {marker}")
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(text, externs="libm")
    assert info.value.message == NOT_ALLOWED.format("malloc")
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(text, externs=["libm", "malloc", "memset"])
    assert info.value.message == NOT_ALLOWED.format("system")
    assert not marker.exists()


def test_compile_file_checks_externs(tmp_path: Path) -> None:
    path = tmp_path / "evil.dl"
    path.write_text(kill_program(9))
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile_file(path)
    assert (info.value.filename, info.value.line) == (str(path), 5)
    assert dlc.compile_file(path, externs=["getpid", "kill"]) is not None  # not called


# -- the exploits, through dlc-run ----------------------------------------------------


def test_dlc_run_refuses_the_kill_exploit(tmp_path: Path) -> None:
    path = tmp_path / "evil.dl"
    path.write_text(kill_program(9))
    ran = dlc_run(path)
    assert ran.returncode == 1, ran.stderr  # -9 if the exploit had run
    assert ran.stderr.splitlines()[0] == diagnostic(str(path), 5, "getpid")
    assert ran.stdout == ""


def test_dlc_run_refuses_the_system_exploit(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.dl"
    path.write_text(system_program(f"touch {marker}"))
    ran = dlc_run(path)
    assert ran.returncode == 1, ran.stderr
    assert ran.stderr.splitlines()[0] == diagnostic(str(path), 5, "malloc")
    assert not marker.exists()
    ran = dlc_run(path, "--allow-extern", "libm", "--allow-extern", "malloc")
    assert ran.returncode == 1
    assert ran.stderr.splitlines()[0] == diagnostic(str(path), 8, "memset")
    assert not marker.exists()


def test_allowed_the_exploit_programs_do_run(tmp_path: Path) -> None:
    """The programs above are real: the allow-list is all that stops them."""
    probe = dlc.compile(kill_program(0), externs=["getpid", "kill"])
    assert probe.main() == 0  # kill(getpid(), 0): the process exists
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.dl"
    path.write_text(system_program(f"touch {marker}"))
    allow = ["--allow-extern", "malloc", "--allow-extern", "memset", "--allow-extern", "system"]
    ran = dlc_run(path, *allow)
    assert ran.returncode == 0, ran.stderr
    assert marker.exists()


# -- allowed externs ---------------------------------------------------------------------


@pytest.mark.parametrize("externs", ["libm", ["libm"], ["sinf", "sin"], ("libm", "my_fn")])
def test_allowed_libm_externs_compute(externs: object) -> None:
    mod = dlc.compile(SIN, externs=externs)  # type: ignore[arg-type]
    a, b = mod.f(np.float32(0.5), 0.25)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, np.sin(np.float32(0.5)), rtol=1e-6)
    assert b == pytest.approx(np.sin(0.25), rel=1e-15)


def test_a_libm_name_suggests_the_preset() -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(SIN, filename="m.dl", externs=["sin"])
    assert str(info.value).splitlines()[0] == (
        diagnostic("m.dl", 5, "sinf") + " (or the preset 'libm')"
    )


def test_unused_extern_declarations_are_harmless(monkeypatch: pytest.MonkeyPatch) -> None:
    """A declaration nothing references is never compiled nor looked up: allowed."""
    text = """module "m"
stage raw

[extern]
func @kill: (i32, i32) -> i32

func @main: (i32) -> i32 {
'entry(%x: i32):
    return %x: i32
}
"""
    looked_up: list[str] = []
    original = api.resolve_symbols

    def resolve(names: list[str]) -> list[str]:
        looked_up.extend(names)
        return original(names)

    monkeypatch.setattr(api, "resolve_symbols", resolve)
    cache.clear_memory()
    assert dlc.compile(text).main(np.int32(7)) == 7
    assert "kill" not in looked_up


def test_an_extern_used_as_a_function_value_must_be_allowed() -> None:
    text = """module "m"
stage raw

[extern]
func @fmaxf: (f32, f32) -> f32

func @f: (<4 x f32>) -> f32 {
'entry(%x: <4 x f32>):
    %y = reduce %x: <4 x f32> by @fmaxf: (f32, f32) -> f32 init 0: f32 along 0
    return %y: f32
}
"""
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(text, filename="m.dl")
    assert str(info.value).splitlines()[0] == (
        diagnostic("m.dl", 5, "fmaxf") + " (or the preset 'libm')"
    )


def test_loop_level_extern_calls_are_checked_again() -> None:
    """The second line of defence: a C call the graph-level check let through by mistake
    is still refused before anything is linked."""
    module = dlc.parse(SIN, "m.dl")
    with pytest.raises(dlc.DiagnosticError) as info:
        api.lower(module, Options(), externs=frozenset({"sin"}))
    assert info.value.message == NOT_ALLOWED.format("sinf") + " (or the preset 'libm')"
    assert info.value.line == 12  # the call
    api.lower(module, Options(), externs=frozenset({"sin", "sinf"}))


# -- the compile cache -------------------------------------------------------------------


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, empty compile cache (disk and memory) for one test."""
    monkeypatch.setenv("DLC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DLC_CACHE", raising=False)
    cache.clear_memory()
    yield tmp_path
    cache.clear_memory()


def test_a_cached_module_is_not_served_to_a_compile_that_disallows_its_externs(
    cache_dir: Path, compile_steps: list[str]
) -> None:
    assert dlc.compile(SIN, externs="libm").f(np.float32(0), 0.0) == (0, 0)
    assert compile_steps.count("cache.lookup") == 1
    compile_steps.clear()
    for externs in (None, [], ["sinf"]):
        with pytest.raises(dlc.DiagnosticError):
            dlc.compile(SIN, externs=externs)
    assert compile_steps == []  # refused before the cache was asked
    dlc.compile(SIN, externs=["sin", "sinf", "system"])  # same calls: a hit
    assert compile_steps == ["cache.lookup", "resolve_symbols"]


def test_cache_key_includes_the_allowed_externs() -> None:
    module = dlc.parse(SIN)
    key = api.cache_key(module, Options(), frozenset({"sin", "sinf"}))
    assert key != api.cache_key(module, Options())
    assert key != api.cache_key(module, Options(), frozenset({"sin"}))


# -- the option ------------------------------------------------------------------------


def test_allowed_externs() -> None:
    assert allowed_externs(None) == allowed_externs([]) == frozenset()
    assert allowed_externs("libm") == frozenset(LIBM)
    assert allowed_externs(["libm", "my_fn"]) == frozenset({*LIBM, "my_fn"})
    assert allowed_externs(iter(["a", "b"])) == {"a", "b"}


def test_libm_preset() -> None:
    doubles = (
        "sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 expm1 "
        "log log2 log10 log1p pow sqrt cbrt hypot erf erfc tgamma lgamma fabs floor ceil "
        "round trunc fmod remainder copysign fmin fmax fdim"
    ).split()
    assert len(LIBM) == len(set(LIBM))
    assert set(LIBM) == {*doubles, *(name + "f" for name in doubles)}
    assert resolve_symbols(list(LIBM)) == []  # all of them exist in this process


@pytest.mark.parametrize(
    ("externs", "error", "message"),
    [
        (3, TypeError, "externs must be None, a preset name or an iterable of C symbol names"),
        (b"libm", TypeError, "externs must be None"),
        ([1], TypeError, "externs: expected C symbol names (str), got int"),
        ("sinf", ValueError, "externs: unknown preset 'sinf' (presets: libm)"),
        (["sin f"], ValueError, "externs: 'sin f' is neither a C identifier nor a preset name"),
        ([""], ValueError, "externs: '' is neither"),
    ],
)
def test_bad_externs_option(externs: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        dlc.compile(SIN, externs=externs)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)
    with pytest.raises(error):
        api.compile_graph_module(dlc.parse(SIN), externs=externs)  # type: ignore[arg-type]


def test_bad_option_is_reported_before_parsing() -> None:
    with pytest.raises(TypeError, match="externs"):
        dlc.compile("not a program", externs=7)  # type: ignore[arg-type]


def test_dlc_run_allow_extern(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dlc.cli import dlc_run as cli

    path = tmp_path / "sin.dl"
    path.write_text(SIN)
    code = cli.main([str(path), "--random-inputs", "--allow-extern", "libm"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out.startswith("output 0: f32\n")
    code = cli.main([str(path), "--random-inputs", "--allow-extern", "sinf"])
    out, err = capsys.readouterr()
    assert code == 1 and err.splitlines()[0] == diagnostic(str(path), 8, "sin") + (
        " (or the preset 'libm')"
    )
    code = cli.main([str(path), "--random-inputs", "--allow-extern", "sin f"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == (
        "dlc-run: error: --allow-extern: 'sin f' is neither a C identifier nor a preset name\n"
    )


TENSOR_EXTERN_C = r"""
/* out = a * x + b element by element over n floats; *sum = their sum */
void dlc_test_axpb(float a, const float *x, float b, float *out, float *sum) {
    float s = 0;
    for (int i = 0; i < 6; i++) { out[i] = a * x[i] + b; s += out[i]; }
    *sum = s;
}
"""

TENSOR_EXTERN_DL = """module "m"
stage raw

[extern]
func @dlc_test_axpb: (f32, <2 x 3 x f32>, f32) -> (<2 x 3 x f32>, f32)

func @f: (<2 x 3 x f32>, f32) -> (<2 x 3 x f32>, f32) {
'entry(%x: <2 x 3 x f32>, %a: f32):
    %0.0 = add %x: <2 x 3 x f32>, 1: f32
    %0.1 = apply @dlc_test_axpb(%a: f32, %0.0: <2 x 3 x f32>, 0.5: f32): (f32, <2 x 3 x f32>, f32) -> (<2 x 3 x f32>, f32)
    return %0.1: (<2 x 3 x f32>, f32)
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on this machine")
@pytest.mark.parametrize("opt_level", [0, 2])
def test_tensor_externs_take_pointers_and_write_their_results(
    tmp_path: Path, opt_level: int
) -> None:
    """Scalars by value, tensors as pointers to their elements, then one pointer per
    result (a tuple's elements in order), returning nothing."""
    import ctypes

    source = tmp_path / "axpb.c"
    source.write_text(TENSOR_EXTERN_C)
    library = tmp_path / "libaxpb.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", str(source), "-o", str(library)], check=True)
    ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    module = dlc.compile(TENSOR_EXTERN_DL, externs=["dlc_test_axpb"], opt_level=opt_level)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out, total = module.f(x, np.float32(2))
    np.testing.assert_array_equal(out, 2 * (x + 1) + 0.5)
    assert total == np.float32((2 * (x + 1) + 0.5).sum())
    with pytest.raises(dlc.DiagnosticError, match="dlc_test_axpb"):
        dlc.compile(TENSOR_EXTERN_DL)  # still a capability
