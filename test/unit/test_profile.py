"""The per-kernel profiler: `dlc.compile(..., profile=True)`, `mod.profile()`, `dlc-run
--profile`. Events match the kernels, the trace is valid Chrome trace JSON, times add
up, profile=False leaves the code as it was, and bad --profile paths are diagnostics.
No assertion on speed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx_models import make, node

import dlc
from dlc.cli import dlc_run
from dlc.dialects import abi
from dlc.options import Options
from dlc.parser import parse_module
from dlc.program_levels import lower
from dlc.runtime.jit import llvm_ir
from dlc.runtime.peaks import Peaks
from dlc.runtime.profile import KernelRow, spans

CHAIN = """module "chain"
stage raw

func @chain: (<32 x 48 x f32>, <48 x 64 x f32>, <64 x 16 x f32>) -> <32 x 16 x f32> {
'entry(%x: <32 x 48 x f32>, %w: <48 x 64 x f32>, %v: <64 x 16 x f32>):
    %xw = dot %x: <32 x 48 x f32>, %w: <48 x 64 x f32>
    %h = tanh %xw: <32 x 64 x f32>
    %y = dot %h: <32 x 64 x f32>, %v: <64 x 16 x f32>
    return %y: <32 x 16 x f32>
}
"""

SHAPES = [(32, 48), (48, 64), (64, 16)]


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def _kernels(mod: dlc.CompiledModule) -> list[dict]:
    return [k for k in mod._profiled[1] if k["kind"] != "function"]  # type: ignore[index]


@pytest.mark.parametrize("opt_level", [0, 2])
def test_one_event_per_kernel_run_named_after_its_line(opt_level: int) -> None:
    mod = dlc.compile(CHAIN, filename="chain.dl", profile=True, opt_level=opt_level)
    plain = dlc.compile(CHAIN, filename="chain.dl", opt_level=opt_level)
    args = _inputs()
    np.testing.assert_array_equal(mod.chain(*args), plain.chain(*args))
    mod.chain(*args)
    found = mod.profile()
    kernels = _kernels(mod)
    assert len(kernels) >= 2  # two dots never fuse into one nest
    nests = [s for s in found.spans if found.kernels[s.kernel]["kind"] != "function"]
    assert len(nests) == 2 * len(kernels)  # two calls, every kernel once per call
    assert sorted(r.kernel["name"] for r in found.rows) == sorted(k["name"] for k in kernels)
    lines = {line for k in kernels for line in k["sources"]}
    assert {"chain.dl:6", "chain.dl:8"} <= lines  # both dots
    dots = [k for k in kernels if "chain.dl:6" in k["sources"] or "chain.dl:8" in k["sources"]]
    assert all(k["flops"] > 0 and k["bytes"] > 0 for k in dots)
    assert mod.profile().spans == []  # taken: the next profile starts empty


def test_flops_of_a_dot_are_counted_from_its_nest() -> None:
    mod = dlc.compile(CHAIN, filename="chain.dl", profile=True, opt_level=0)
    first = next(k for k in _kernels(mod) if k["sources"] == ["chain.dl:6"])
    assert first["flops"] == 2 * 32 * 48 * 64 and first["exact"]
    assert first["bytes"] == 4 * (32 * 48 + 48 * 64 + 32 * 64)  # each buffer once


def test_kernel_times_add_up_to_the_calls() -> None:
    mod = dlc.compile(CHAIN, filename="chain.dl", profile=True)
    args = _inputs()
    for _ in range(5):
        mod.chain(*args)
    found = mod.profile()
    outer = [s for s in found.spans if s.depth == 0]
    assert len(outer) == 5 and all(found.kernels[s.kernel]["kind"] == "function" for s in outer)
    assert 0 < found.kernel_ns <= found.call_ns  # inside the calls, nothing counted twice
    assert sum(r.calls for r in found.rows) == 5 * len(_kernels(mod))


def test_chrome_trace_is_valid_json_with_complete_events(tmp_path: Path) -> None:
    mod = dlc.compile(CHAIN, filename="chain.dl", profile=True)
    mod.chain(*_inputs())
    path = tmp_path / "trace.json"
    mod.profile().save(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert events and all(e["ph"] == "X" for e in events)
    assert all(isinstance(e["ts"], float | int) and e["dur"] >= 0 for e in events)
    names = {e["name"] for e in events}
    assert "chain" in names and {k["name"] for k in _kernels(mod)} <= names
    kernel = next(e for e in events if e["cat"] == "nest")
    assert {"sources", "flops", "bytes", "bound", "schedules", "tuned"} <= set(kernel["args"])


def test_profile_false_compiles_the_same_code() -> None:
    module = parse_module(CHAIN, "chain.dl")
    plain, _ = lower(module, Options())
    marked, _ = lower(parse_module(CHAIN, "chain.dl"), Options(profile=True))
    text, profiled = llvm_ir(plain), llvm_ir(marked)
    assert "clock_gettime" not in text and abi.PROFILE_BUFFER not in text
    assert abi.PROFILE not in plain.attributes
    assert "clock_gettime" in profiled and abi.PROFILE_BUFFER in profiled
    again, _ = lower(parse_module(CHAIN, "chain.dl"), Options(profile=False))
    assert llvm_ir(again) == text


def test_profile_of_a_module_compiled_without_it_is_an_error() -> None:
    with pytest.raises(ValueError, match="compile with profile=True"):
        dlc.compile(CHAIN).profile()


def test_onnx_kernels_name_their_nodes() -> None:
    w = np.random.default_rng(1).standard_normal((16, 4)).astype(np.float32)
    nodes = [node("MatMul", ["x", "w"], ["m"]), node("Relu", ["m"], ["r"])]
    model = make(nodes, {"x": [8, 16]}, {"r": [8, 4]}, {"w": w})
    mod = dlc.compile_onnx(model, profile=True)
    mod.g(np.ones((8, 16), np.float32))
    rows = mod.profile().rows
    named = {n for r in rows for n in r.kernel["nodes"]}
    assert "node 'm' (MatMul)" in named
    assert all(r.where != "(no source)" for r in rows)


def test_spans_nest_and_drop_unmatched_marks() -> None:
    events = np.array([[0, 0], [2, 10], [3, 30], [4, 40], [1, 60]])
    found = spans(events)  # kernel 2 began and never ended (a trap): dropped
    assert [(s.kernel, s.duration_ns, s.self_ns, s.depth) for s in found] == [
        (0, 60, 40, 0),
        (1, 20, 20, 1),
    ]


def test_roofline_verdicts() -> None:
    peaks = Peaks(100.0, [(1 << 20, 50.0), (1 << 30, 10.0)], "cpu", 8)
    small = KernelRow({"flops": 1000, "bytes": 1000}, calls=1, ns=100, peaks=peaks)
    assert small.bound == "memory" and small.limit_gbps == 50.0  # 1 FLOP/B x 50 GB/s
    assert small.percent_of_limit == pytest.approx(100 * 10 / 50)
    dense = KernelRow({"flops": 10**6, "bytes": 1000}, calls=1, ns=20_000, peaks=peaks)
    assert dense.bound == "compute" and dense.percent_of_limit == pytest.approx(50.0)
    copy = KernelRow({"flops": 0, "bytes": 4 << 20}, calls=1, ns=1_000_000, peaks=peaks)
    assert copy.bound == "memory" and copy.limit_gbps == 10.0


def test_kernels_sized_at_run_time_have_unknown_rates() -> None:
    """A symbolic function's buffers are sized at run time: no FLOPs or bytes (not
    the negative sizes of run-time-sized buffers), `?` in the table, None in the trace."""
    mod = dlc.compile(CHAIN.replace("32 x", "%n x"), filename="chain.dl", profile=True)
    mod.chain(*_inputs())
    found = mod.profile()
    assert found.rows and all(not r.sized for r in found.rows)
    facts = found.rows[0].facts()
    assert facts["bytes"] is None and facts["gb_per_s"] is None
    assert facts["percent_of_limit"] is None and facts["bound"] == "?"
    line = found.table().splitlines()[1].split()
    assert line[4:8] == ["?", "?", "?", "?"]  # GFLOP/s, GB/s, bound, % limit


def test_dlc_run_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "chain.dl"
    program.write_text(CHAIN)
    trace = tmp_path / "out.json"
    code = dlc_run.main([str(program), "--random-inputs", "--profile", str(trace)])
    out = capsys.readouterr().out
    assert code == 0
    assert "GFLOP/s" in out and f"{program}:6" in out and "the kernels account for" in out
    assert json.loads(trace.read_text())["traceEvents"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing/out.json", "no directory"),
        (".", "is a directory"),
    ],
)
def test_dlc_run_bad_profile_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    program = tmp_path / "chain.dl"
    program.write_text(CHAIN)
    path = str(tmp_path / target)
    code = dlc_run.main([str(program), "--random-inputs", "--profile", path])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"dlc-run: error: --profile {path}: {message}" + (
        f" '{tmp_path / 'missing'}'" if message == "no directory" else ""
    )


def test_peaks_measured_on_a_busy_machine_are_raised_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored limit that a kernel beats was measured while the machine was busy: the
    profile measures again (once per process), keeps the higher of each limit, stores
    it, and no kernel is then above 100 % of a limit it could not beat."""
    from dlc.runtime import peaks as peaks_module

    monkeypatch.setenv("DLC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peaks_module, "_KNOWN", {})
    monkeypatch.setattr(peaks_module, "_RAISED", set())
    cpu, lanes = peaks_module._host()
    tiny = Peaks(1e-6, [(s, 1e-6) for s in peaks_module.WORKING_SETS], cpu, lanes)
    peaks_module._store(peaks_module.cache_path(cpu), tiny)
    measured: list[int] = []

    def fake_measure(cpu: str, lanes: int) -> Peaks:
        measured.append(1)
        return Peaks(1e6, [(s, 1e6) for s in peaks_module.WORKING_SETS], cpu, lanes)

    monkeypatch.setattr(peaks_module, "_measure", fake_measure)
    mod = dlc.compile(CHAIN, filename="chain.dl", profile=True)
    mod.chain(*_inputs())
    found = mod.profile()
    assert measured == [1] and found.peaks.gflops == 1e6
    assert all(row.percent_of_limit <= 100 for row in found.rows)
    stored = json.loads(peaks_module.cache_path(cpu).read_text())
    assert stored["gflops"] == 1e6
    mod.chain(*_inputs())
    assert mod.profile().peaks.gflops == 1e6 and measured == [1]  # once per process


PARTIAL = """module "p"
stage raw

func @p: (<49 x 1280 x f32>, <1280 x 320 x f32>) -> <49 x 320 x f32> {
'entry(%a: <49 x 1280 x f32>, %b: <1280 x 320 x f32>):
    %y = dot %a: <49 x 1280 x f32>, %b: <1280 x 320 x f32>
    return %y: <49 x 320 x f32>
}
"""


@pytest.mark.parametrize("target_cpu", ["haswell", "x86-64"])
def test_a_tiled_product_counts_one_branch_of_its_blocks(target_cpu: str) -> None:
    """A tiled product keeps a copy of its loops for full and for partial blocks under
    a `loop.if`: its FLOPs are one branch's (2·M·N·K and the padding its partial tiles
    compute), not both branches' (at least twice the product, as the estimate said)."""
    mod = dlc.compile(PARTIAL, profile=True, num_threads=1, target_cpu=target_cpu)
    (kernel,) = _kernels(mod)
    useful = 2 * 49 * 1280 * 320
    assert useful <= kernel["flops"] < 2 * useful
