"""Parallel loops on the OpenMP runtime (dlc/lowering/loop_to_llvm/parallel.py): results
are bit-identical for any thread count, small nests stay serial, and the thread count
comes from `num_threads`, `DLC_NUM_THREADS` or the process's cores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.runtime.native import default_threads, openmp_available

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not openmp_available(), reason="no OpenMP runtime")

PROGRAMS = {
    "matmul": ("benchmarks/matmul.dl", None),
    "conv2d": ("benchmarks/conv2d.dl", None),
    "mlp_b64": ("benchmarks/mlp_b64.dl", None),
    "layernorm_gelu": ("benchmarks/layernorm_gelu.dl", None),
    "lstm_tail": ("benchmarks/lstm_tail.dl", None),
}


def _inputs(mod: dlc.runtime.module.CompiledModule, name: str, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    checks = mod[name]._checks  # type: ignore[union-attr]
    return [rng.standard_normal(shape).astype(dtype) for dtype, shape, _ in checks]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_results_do_not_depend_on_the_thread_count(program: str) -> None:
    path = ROOT / PROGRAMS[program][0]
    mods = {n: dlc.compile_file(path, num_threads=n) for n in (1, 2, 3)}
    name = mods[1].functions[0]
    assert "GOMP_parallel" in mods[1].ir("llvm")  # big enough to be parallel
    args = _inputs(mods[1], name)
    results = {n: mod[name](*args) for n, mod in mods.items()}
    for n in (2, 3):
        for got, want in zip(
            *(
                np.atleast_1d(r) if not isinstance(r, tuple) else r
                for r in (results[n], results[1])
            ),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)


def test_tiled_products_of_awkward_shapes_on_three_threads_match_the_reference() -> None:
    from dlc.semantics.interpreter import run_function

    rng = np.random.default_rng(4)
    for m, k, n in ((131, 257, 67), (1, 700, 97), (97, 1, 300)):
        text = (
            'module "mm"\nstage raw\n'
            f"func @mm: (<{m} x {k} x f32>, <{k} x {n} x f32>) -> <{m} x {n} x f32> {{\n"
            f"'entry(%a: <{m} x {k} x f32>, %b: <{k} x {n} x f32>):\n"
            f"    %c = dot %a: <{m} x {k} x f32>, %b: <{k} x {n} x f32>\n"
            f"    return %c: <{m} x {n} x f32>\n}}\n"
        )
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        want = run_function(dlc.parse(text), "mm", [a, b])
        bound = 4 * np.sqrt(k) * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b)) + 1e-30
        for threads, checked in ((1, False), (3, False), (3, m == 131)):
            got = dlc.compile(text, num_threads=threads, bounds_check=checked).mm(a, b)
            assert np.all(np.abs(got - want) <= 2 * bound), (m, k, n, threads, checked)


def test_small_nests_stay_serial() -> None:
    mod = dlc.compile_file(ROOT / "benchmarks" / "call_overhead.dl", num_threads=4)
    assert "GOMP_parallel" not in mod.ir("llvm")


def test_thread_count_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.delenv("DLC_NUM_THREADS")
    assert default_threads() >= 1
    text = (ROOT / "benchmarks" / "call_overhead.dl").read_text()
    with pytest.raises(ValueError, match="num_threads must be at least 1, got 0"):
        dlc.compile(text, num_threads=0)
    with pytest.raises(TypeError, match="num_threads must be None or an int, got float"):
        dlc.compile(text, num_threads=2.0)  # type: ignore[arg-type]


def test_every_iteration_runs_once_for_any_thread_count_and_trip() -> None:
    """Dynamic chunks: trips smaller than the team, not a multiple of the chunk, and
    a team larger than the cores, all give the serial result bit for bit."""
    rng = np.random.default_rng(7)
    for n, m in ((3, 40000), (97, 1024), (1031, 64)):
        text = (
            'module "ew"\nstage raw\n'
            f"func @ew: (<{n} x {m} x f32>) -> <{n} x {m} x f32> {{\n"
            f"'entry(%x: <{n} x {m} x f32>):\n"
            f"    %t = tanh %x: <{n} x {m} x f32>\n"
            f"    %y = multiply %t: <{n} x {m} x f32>, %x: <{n} x {m} x f32>\n"
            f"    return %y: <{n} x {m} x f32>\n}}\n"
        )
        x = rng.standard_normal((n, m)).astype(np.float32)
        want = dlc.compile(text, num_threads=1).ew(x)
        for threads in (2, 5, 8):
            mod = dlc.compile(text, num_threads=threads)
            if n > 3:
                assert "GOMP_loop_dynamic_start" in mod.ir("llvm")
            np.testing.assert_array_equal(mod.ew(x), want)


def test_openmp_waits_briefly_then_sleeps_unless_the_user_chose() -> None:
    """libgomp reads its wait policy once, when it loads: dlc asks for a short spin
    (`GOMP_SPINCOUNT`) unless `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT` is set."""
    import os
    import subprocess
    import sys

    from dlc.runtime.native import WAIT_SPIN

    probe = (
        "import os; from dlc.runtime.native import openmp_available as a; a(); "
        "print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"
    )
    cases = (({}, f"{WAIT_SPIN} None"), ({"OMP_WAIT_POLICY": "active"}, "None active"))
    cases += (({"GOMP_SPINCOUNT": "5"}, "5 None"),)
    for extra, want in cases:
        env = {
            k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
        }
        env.update(extra)
        out = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split("\n")[0] == want, (extra, out.stdout, out.stderr)


def test_a_process_with_actively_waiting_workers_exits_cleanly() -> None:
    """LLVM closes its library handles when the process exits; dlc keeps its own on
    libgomp, so workers still spinning in it (`OMP_WAIT_POLICY=active`) are not left
    running in unmapped code (that exit crashed with a segmentation fault)."""
    import os
    import subprocess
    import sys

    probe = (
        "import numpy as np, dlc\n"
        f"mod = dlc.compile_file({str(ROOT / PROGRAMS['lstm_tail'][0])!r}, num_threads=2)\n"
        "f = mod[mod.functions[0]]\n"
        "args = [np.ones(s, d) for d, s, _ in f._checks]\n"
        "for _ in range(50): f(*args)\n"
        "print('ran')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    env["OMP_WAIT_POLICY"] = "active"
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
        assert (out.returncode, out.stdout.strip()) == (0, "ran"), out.stderr[-2000:]


def test_the_load_governor_steps_down_on_pressure_and_back_after_calm() -> None:
    from dlc.runtime.governor import CALM_PERIODS, HIGH, LOW, Decision

    d = Decision()
    assert d.update(LOW / 2) is False
    assert d.update(HIGH + 0.1) is True  # contended at once
    assert d.update((HIGH + LOW) / 2) is True  # in between: stays down
    for _ in range(CALM_PERIODS - 1):
        assert d.update(LOW / 2) is True
    assert d.update(HIGH + 0.1) is True  # a busy period restarts the count
    for _ in range(CALM_PERIODS - 1):
        d.update(LOW / 2)
    assert d.update(LOW / 2) is False  # CALM_PERIODS calm periods in a row: back up


def test_the_governed_thread_word_changes_no_result(tmp_path: Path) -> None:
    """The governor writes a context's thread word between calls; a module's results
    are the same at the stepped-down count, and the word goes back when calm."""
    from dlc.dialects import abi
    from dlc.runtime.governor import GOVERNOR, read_some_total

    path = ROOT / PROGRAMS["lstm_tail"][0]
    mod = dlc.compile_file(path, num_threads=2)
    name = mod.functions[0]
    args = _inputs(mod, name)
    want = mod[name](*args)
    ctx = mod[name]._contexts.get()  # type: ignore[union-attr]
    assert ctx.words[abi.CTX_THREADS] in (1, 2) and ctx.requested_threads == 2
    ctx.set_threads(1)
    for got, ref in zip(mod[name](*args), want, strict=True):
        np.testing.assert_array_equal(got, ref)
    if read_some_total() is not None:  # watched where the kernel reports pressure
        assert ctx in GOVERNOR.watched
        GOVERNOR.decision.contended = False
        GOVERNOR.apply()
        assert ctx.words[abi.CTX_THREADS] == 2
    (tmp_path / "psi").write_text("some avg10=1.00 avg60=0.50 avg300=0.10 total=4242\n")
    assert read_some_total(str(tmp_path / "psi")) == 4242
    assert read_some_total(str(tmp_path / "missing")) is None


def test_a_parallel_nest_in_place_over_its_input_has_no_overlap_check():
    """The tanh GELU between two Gemms is planned in place over the first product's
    buffer (plan-memory's reuse). Its parallel loop receives the arena's base and
    recomputes both buffers from it, so LLVM sees one address and vectorizes without a
    run-time overlap check (given two captured pointers, the check failed on every call
    and the scalar loop ran)."""
    from onnx_models import interpret, make, node, randn

    m, k, n = 64, 64, 512
    weights = {"w0": randn(k, n, seed=5) * 0.1, "b0": randn(n, seed=6)}
    weights |= {"w": randn(n, k, seed=3) * 0.1, "b": randn(k, seed=4)}
    scalars = {"three": 3.0, "c": 0.044715, "kk": 0.7978846, "one": 1.0, "half": 0.5}
    weights |= {name: np.array(v, np.float32) for name, v in scalars.items()}
    nodes = [
        node("Gemm", ["x", "w0", "b0"], ["h"]),
        node("Pow", ["h", "three"], ["p"]),
        node("Mul", ["c", "p"], ["cp"]),
        node("Add", ["h", "cp"], ["s"]),
        node("Mul", ["kk", "s"], ["ks"]),
        node("Tanh", ["ks"], ["t"]),
        node("Add", ["one", "t"], ["o"]),
        node("Mul", ["h", "half"], ["hh"]),
        node("Mul", ["hh", "o"], ["g"]),
        node("Gemm", ["g", "w", "b"], ["y"]),
    ]
    model = make(nodes, {"x": (m, k)}, {"y": None}, weights)
    mod = dlc.compile_onnx(model, num_threads=2, target_cpu="haswell")
    ir = mod.ir("llvm")
    assert '@"dlc.fn.g$omp' in ir and "diff.check" not in ir
    x = randn(m, k, seed=1)
    np.testing.assert_allclose(mod.g(x), interpret(model, x), rtol=1e-4, atol=1e-4)
