"""The warm start (dlc/warm.py, dlc/runtime/quick.py): a program compiled before is loaded from its
quick record without parsing — no xDSL or Lark import in a new process — and behaves
exactly as after a full compile; any doubt about a record falls back to the full path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlc
import dlc.parser as parser
from dlc import options as compile_options_module
from dlc.runtime import cache, quick
from dlc.runtime.signature import (
    FuncSig,
    TensorSig,
    TupleSig,
    format_sig,
    from_json,
    rebuild,
    tensor_leaves,
    to_json,
)

pytestmark = pytest.mark.filterwarnings("error::dlc.runtime.cache.UntrustedCacheWarning")

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """module "q"
stage raw

func @scale: (<4 x f32>, f32) -> <4 x f32> {
'entry(%x: <4 x f32>, %a: f32):
    %y = multiply %x: <4 x f32>, %a: f32
    return %y: <4 x f32>
}

func @pair: (<2 x i32>) -> (<2 x i32>, (i32, <2 x i32>)) {
'entry(%v: <2 x i32>):
    %s = reduce %v: <2 x i32> by add init 0: i32 along 0
    %t = literal (%s: i32, %v: <2 x i32>): (i32, <2 x i32>)
    %u = literal (%v: <2 x i32>, %t: (i32, <2 x i32>)): (<2 x i32>, (i32, <2 x i32>))
    return %u: (<2 x i32>, (i32, <2 x i32>))
}

func @fails: (f32) -> f32 {
'entry(%x: f32):
    trap
    return %x: f32
}
"""

X = np.arange(4, dtype=np.float32)


def records(directory: Path) -> list[Path]:
    return sorted((directory / f"v{cache.FORMAT}").glob("*.quick"))


def check(mod: object, filename: str) -> None:
    np.testing.assert_array_equal(mod.scale(X, np.float32(2)), 2 * X)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(mod.scale(a=3.0, x=X), 3 * X)  # type: ignore[attr-defined]
    v = np.array([3, 4], np.int32)
    first, (total, again) = mod.pair(v)  # type: ignore[attr-defined]
    assert int(total) == 7 and first.tolist() == again.tolist() == [3, 4]
    with pytest.raises(dlc.TrapError, match=rf"^{filename}:20:5: trap$"):
        mod.fails(np.float32(1))  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"argument 0 \(%x\) of @scale: expected <4 x f32>"):
        mod.scale(X.astype(np.float64), 1.0)  # type: ignore[attr-defined]


def test_second_compile_uses_the_quick_record(cache_dir: Path, lowerings: list[int]) -> None:
    full = dlc.compile(PROGRAM, filename="a.dl")
    assert len(records(cache_dir)) == 1
    cache.clear_memory()
    parses: list[int] = []
    original = parser.parse_module

    def counted(*args: object, **kwargs: object) -> object:
        parses.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    try:
        parser.parse_module = counted  # type: ignore[assignment]
        warm = dlc.compile(PROGRAM, filename="other/b.dl")
        assert parses == [] and len(lowerings) == 1  # neither parsed nor lowered
        check(full, "a\\.dl")
        check(warm, "other/b\\.dl")  # messages name the file at hand
        assert warm.functions == full.functions
        assert warm.stats("scale") == full.stats("scale")
        assert warm.ir("graph") == full.ir("graph")  # parsed on first use
        assert parses == [1]
        assert warm.ir("llvm") == full.ir("llvm")  # lowered again: disk keeps no IR
    finally:
        parser.parse_module = original  # type: ignore[assignment]


def test_other_options_or_text_miss(cache_dir: Path, lowerings: list[int]) -> None:
    dlc.compile(PROGRAM)
    dlc.compile(PROGRAM, bounds_check=True)
    dlc.compile(PROGRAM + "\n")  # another text: the full path (then the same entry)
    assert len(lowerings) == 2
    assert len(records(cache_dir)) == 3
    dlc.compile(PROGRAM, externs="libm")  # the allowed externs key the record too
    assert len(records(cache_dir)) == 4 and len(lowerings) == 2


def test_tampered_record_falls_back(cache_dir: Path, lowerings: list[int]) -> None:
    dlc.compile(PROGRAM, filename="a.dl")
    (path,) = records(cache_dir)
    data = json.loads(path.read_text())
    data["record"]["positions"][0] = [1, 1]  # moves the trap's message: the MAC fails
    path.write_text(json.dumps(data))
    cache.clear_memory()
    check(dlc.compile(PROGRAM, filename="a.dl"), "a\\.dl")
    assert len(lowerings) == 1  # the entry itself was fine
    assert json.loads(path.read_text())["record"]["positions"][0] != [1, 1]  # rewritten


def test_record_of_an_evicted_entry_falls_back(cache_dir: Path, lowerings: list[int]) -> None:
    dlc.compile(PROGRAM)
    for p in (cache_dir / f"v{cache.FORMAT}").glob("*.o"):
        p.unlink()
    cache.clear_memory()
    check(dlc.compile(PROGRAM, filename="<string>"), "<string>")
    assert len(lowerings) == 2


def test_no_record_for_struct_signatures(cache_dir: Path) -> None:
    text = (ROOT / "examples" / "language_tour.dl").read_text()
    dlc.compile(text)
    assert records(cache_dir) == []  # structs go through values.py: the full path


def test_disabled_cache_and_tuning_db_write_no_record(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "tune.jsonl"
    db.write_text("")
    dlc.compile(PROGRAM, tuning_db=db)
    assert records(cache_dir) == []
    monkeypatch.setenv("DLC_CACHE", "0")
    dlc.compile(PROGRAM)
    assert records(cache_dir) == []


def test_bad_options_still_report_in_order(cache_dir: Path) -> None:
    dlc.compile(PROGRAM)
    with pytest.raises(ValueError, match="num_threads must be at least 1"):
        dlc.compile(PROGRAM, num_threads=0)
    with pytest.raises(dlc.DiagnosticError, match="expected"):
        dlc.compile("module", target_cpu="no-such-cpu")  # the syntax error first


def test_evict_counts_records(tmp_path: Path) -> None:
    from dlc.runtime import cache_evict

    for i, (suffix, size) in enumerate([("json", 10), ("o", 50), ("quick", 30)]):
        (tmp_path / f"{str(i) * 64}.{suffix}").write_bytes(b"x" * size)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        removed = cache_evict.evict(fd, limit=60)
    finally:
        os.close(fd)
    assert len(removed) >= 1 and sum(1 for _ in tmp_path.iterdir()) < 3


NEW_PROCESS = """
import sys, numpy as np, dlc
m = dlc.compile_file(sys.argv[1])
print(m.scale(np.arange(4, dtype=np.float32), np.float32(2)).tolist())
heavy = sorted(k for k in sys.modules if k.startswith(("xdsl.", "lark", "dlc.dialects.graph")))
print(heavy[:5])
"""


def test_a_new_process_loads_without_xdsl_or_lark(cache_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "p.dl"
    source.write_text(PROGRAM)
    env = {**os.environ, "DLC_CACHE_DIR": str(cache_dir)}
    run = [sys.executable, "-c", NEW_PROCESS, str(source)]
    cold = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    warm = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert cold.stdout.splitlines()[0] == warm.stdout.splitlines()[0] == "[0.0, 2.0, 4.0, 6.0]"
    assert cold.stdout.splitlines()[1] != "[]"  # the cold one parsed
    assert warm.stdout.splitlines()[1] == "[]", warm.stdout


HEAVY = {"ml_dtypes", "xdsl", "lark", "onnx", "scipy", "onnxruntime", "z3", "lightgbm"}
"""Packages the warm path must not import: each costs from tens of milliseconds
(xdsl, lark) to seconds (ml_dtypes 0.7)."""

HEAVY_MODULES = {
    "llvmlite.binding",
    "llvmlite.ir",
    "importlib.resources",
    "zipfile",
    "dlc.runtime.profile",
    "dlc.runtime.peaks",
}
"""Modules the warm path must not import either: llvmlite's Python binding (and what it
imports) costs more than loading the code through `dlc.llvm_c`; the profiler is for
modules compiled with `profile=True`."""

WARM_RUN = """
import runpy, sys
sys.argv = ["dlc-run", *sys.argv[1:]]
try:
    runpy.run_module("dlc.cli.dlc_run", run_name="__main__")
except SystemExit as stop:
    assert not stop.code, stop.code
print(sorted(sys.modules))
"""


def test_warm_dlc_run_imports_nothing_heavy(cache_dir: Path) -> None:
    """The README's first command, warm: the set of top-level modules it loads holds
    none of HEAVY, so a new eager import anywhere on that path fails here."""
    env = {**os.environ, "DLC_CACHE_DIR": str(cache_dir)}
    args = [str(ROOT / "examples" / "mlp.dl"), "--entry", "mlp", "--random-inputs", "--time"]
    run = [sys.executable, "-c", WARM_RUN, *args]
    subprocess.run(run, env=env, capture_output=True, text=True, check=True)  # cold
    warm = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    modules = set(json.loads(warm.stdout.splitlines()[-1].replace("'", '"')))
    loaded = {name.partition(".")[0] for name in modules}
    assert "dlc" in loaded and "numpy" in loaded and "dlc.llvm_c" in modules
    assert not loaded & HEAVY, sorted(loaded & HEAVY)
    assert not modules & HEAVY_MODULES, sorted(modules & HEAVY_MODULES)


BF16_PROGRAM = """module "b"
stage raw

func @widen: (<3 x bf16>) -> <3 x f32> {
'entry(%x: <3 x bf16>):
    %y = dataTypeCast %x: <3 x bf16> to f32
    return %y: <3 x f32>
}
"""

BF16_PROCESS = """
import sys, numpy as np, dlc
m = dlc.compile_file(sys.argv[1])
print("ml_dtypes" in sys.modules)
import ml_dtypes
x = np.array([1.5, -2.0, 3.0], ml_dtypes.bfloat16)
print(m.widen(x).tolist(), m.widen(x).tolist())
"""


def test_a_warm_bf16_function_loads_ml_dtypes_itself(cache_dir: Path, tmp_path: Path) -> None:
    """A module with a bf16 parameter loads ml_dtypes when it is loaded (its entry checks
    an argument's dtype against bf16's), and a bf16 array passes the native check."""
    source = tmp_path / "b.dl"
    source.write_text(BF16_PROGRAM)
    env = {**os.environ, "DLC_CACHE_DIR": str(cache_dir)}
    run = [sys.executable, "-c", BF16_PROCESS, str(source)]
    for _ in ("cold", "warm"):
        out = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
        assert out.stdout.splitlines() == ["True", "[1.5, -2.0, 3.0] [1.5, -2.0, 3.0]"]


def test_dlc_run_warm_prints_what_cold_prints(cache_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "p.dl"
    source.write_text(PROGRAM)
    env = {**os.environ, "DLC_CACHE_DIR": str(cache_dir)}
    dlc.compile(PROGRAM, filename=str(source))  # the record the warm runs use
    for args, code in [
        (["--entry", "pair", "--random-inputs", "--seed", "3", "--stats"], 0),
        (["--entry", "nope", "--random-inputs"], 1),
        (["--entry", "scale"], 1),  # no inputs given
        (["--entry", "fails", "--random-inputs"], 1),  # the trap, located with its line
    ]:
        run = [sys.executable, "-m", "dlc.cli.dlc_run", str(source), *args]
        full = {**env, "DLC_CACHE": "0"}  # the full path every time
        cold = subprocess.run(run, env=full, capture_output=True, text=True)
        warm = subprocess.run(run, env=env, capture_output=True, text=True)
        assert (cold.returncode, warm.returncode) == (code, code), warm.stderr
        assert (warm.stdout, warm.stderr) == (cold.stdout, cold.stderr)
    assert "p.dl:20:5: error: trap" in warm.stderr


def test_signature_json_round_trip_and_refusals() -> None:
    sig = FuncSig(
        "f",
        ("x", "n"),
        (TensorSig("f32", (2, 3)), TensorSig("i64", ())),
        TupleSig((TensorSig("bool", (4,)), TupleSig((TensorSig("f16", ()),)))),
    )
    assert from_json(json.loads(json.dumps(to_json(sig)))) == sig
    assert format_sig(sig.output) == "(<4 x bool>, (f16))"
    assert format_sig(TupleSig(())) == "()"
    leaves = tensor_leaves(sig.output)
    assert [t.dt for t in leaves] == ["bool", "f16"]
    assert rebuild(sig.output, iter([1, 2])) == (1, (2,))
    good = to_json(sig)
    for bad in [
        {**good, "args": [["f32", [2, -3]], ["i64", []]]},
        {**good, "args": [["u7", [2]], ["i64", []]]},
        {**good, "params": ["x"]},
        {**good, "output": {"tuple": "x"}},
        {**good, "extra": 1},
        [],
        {**good, "args": [{"tuple": []}, ["i64", []]]},  # parameters are tensors
    ]:
        assert from_json(bad) is None


def test_quick_key_depends_on_exact_text_and_options() -> None:
    options = compile_options_module.compile_options(
        opt_level=2,
        fuse=True,
        plan_memory=True,
        fast_math_functions=True,
        bounds_check=False,
        fma=None,
        target_cpu="host",
        tuning_db=None,
    )
    facts = compile_options_module.quick_facts(options, frozenset())
    assert facts is not None
    key = quick.quick_key(PROGRAM, facts)
    assert key == quick.quick_key(PROGRAM.encode(), facts)
    assert key != quick.quick_key(PROGRAM + " ", facts)
    other = compile_options_module.quick_facts(options, frozenset({"sinf"}))
    assert other is not None and key != quick.quick_key(PROGRAM, other)
