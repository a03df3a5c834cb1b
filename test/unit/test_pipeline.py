"""One pipeline for the API and the CLI (dlc/pipeline.py): `dlc-opt -O2 -t llvm`
prints the LLVM IR `dlc.compile(opt_level=2)` runs, apart from the Python entry
wrappers; the graph optimizer runs when users compile."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.cli.dlc_opt import main as dlc_opt_main
from dlc.pipeline import GRAPH_OPTIMIZER, Options, steps

ROOT = Path(__file__).resolve().parents[2]
SLOW = {"softmax_chain200.dl"}  # 23 s; the ops of softmax_chain20 (compared here), ten times over
PROGRAMS = sorted(
    p for p in [*ROOT.glob("examples/*.dl"), *ROOT.glob("benchmarks/*.dl")] if p.name not in SLOW
)


def _normalized(ir: str) -> str:
    """LLVM IR without the Python entry wrappers (`_dlc_py_`, `_dlc_pyfast_`) and their
    type table, and what only they use (LLVM
    inlines the kernels into them: intrinsic declarations and alias-scope metadata),
    attribute groups written out (`#3` -> `#{nounwind ...}`, since wrappers shift
    their numbering)."""
    groups = dict(re.findall(r"^attributes (#\d+) = \{ (.*) \}$", ir, re.M))
    lines: list[str] = []
    skipping = False
    for line in ir.splitlines():
        if line.startswith("define") and "@_dlc_py" in line:
            skipping = True
        if line.startswith("@_dlc_py_types"):
            continue
        if not skipping and not line.startswith(("attributes #", "; Function Attrs")):
            if line.strip():
                lines.append(re.sub(r"#\d+\b", lambda m: "#{" + groups.get(m[0], m[0]) + "}", line))
        if skipping and line == "}":
            skipping = False
    code = [line for line in lines if not line.startswith(("!", "declare"))]
    text = "\n".join(code)
    used = [d for d in lines if d.startswith("declare") and _symbol(d) in text.replace(d, "")]
    metadata = {m.split(" = ", 1)[0]: m for m in lines if m.startswith("!")}
    reachable: set[str] = set()
    work = re.findall(r"![0-9]+|![a-z.]+", "\n".join(code + used))
    while work:
        name = work.pop()
        if name in metadata and name not in reachable:
            reachable.add(name)
            work.extend(re.findall(r"![0-9]+|![a-z.]+", metadata[name].split(" = ", 1)[1]))
    kept = [m for n, m in metadata.items() if n in reachable]
    return "\n".join(code + used + kept)


def _symbol(declaration: str) -> str:
    return re.search(r"@[\w.$]+", declaration)[0]  # type: ignore[index]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_dlc_opt_prints_the_llvm_ir_the_api_compiles(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.ll"
    assert dlc_opt_main([str(path), "-O2", "-t", "llvm", "-o", str(out)]) == 0
    capsys.readouterr()
    api_ir = dlc.compile_file(path, opt_level=2).ir("llvm")
    assert "@_dlc_py_" in api_ir  # the wrappers exist on the API side only
    assert _normalized(out.read_text()) == _normalized(api_ir)


def test_steps_name_every_level_in_order() -> None:
    names = [s.pass_.name for s in steps(Options(opt_level=2))]
    assert names[0] == "differentiate"
    lowerings = [n for n in names if n.startswith("lower-")]
    assert lowerings == ["lower-graph-to-tensor", "lower-tensor-to-loop", "lower-loop-to-llvm"]
    assert names.index("fuse") > names.index("lower-graph-to-tensor")
    assert "canonicalize" in names and "matrix-chain-reorder" in names
    o0 = [s.pass_.name for s in steps(Options(opt_level=0))]
    assert not set(o0) & {"canonicalize", "cse", "fuse", "matrix-chain-reorder"}
    assert len(GRAPH_OPTIMIZER) > 4


def test_every_pipeline_ends_with_the_one_loop_lowering_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`steps`, `symbolic_steps` and the loop level lowered on its own (`CompiledModule.ir`
    asked for the loop level, then llvm) all lower the loop level through
    `pipeline.loop_lowering_step`: one place sets `lower-loop-to-llvm`'s options."""
    from dlc import pipeline

    options = Options(opt_level=2, bounds_check=True)
    expected = pipeline.loop_lowering_step(options)
    assert expected.pass_.bounds_check and expected.pass_.outline  # type: ignore[attr-defined]
    assert steps(options)[-1] == expected
    assert pipeline.symbolic_steps(options)[-1] == expected
    made: list[pipeline.Step] = []
    real = pipeline.loop_lowering_step

    def spy(options: Options) -> pipeline.Step:
        made.append(real(options))
        return made[-1]

    monkeypatch.setattr(pipeline, "loop_lowering_step", spy)
    compiled = dlc.compile(SMALL, opt_level=0)
    assert len(made) == 1
    assert "loop.for" in compiled.ir("loop") and len(made) == 2  # lowered again to the loop level
    assert compiled.ir_module("llvm").body.block.ops and len(made) == 3  # on from the loop level


SMALL = """module "small"
stage raw

func @twice: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = add %x: <4 x f32>, %x: <4 x f32>
    return %y: <4 x f32>
}
"""

BAD_CHAIN = """module "chain"
stage raw

func @chain: (<10 x 1000 x f32>, <1000 x 10 x f32>, <10 x 1000 x f32>) -> <10 x 1000 x f32> {
'entry(%a: <10 x 1000 x f32>, %b: <1000 x 10 x f32>, %c: <10 x 1000 x f32>):
    %ab = dot %a: <10 x 1000 x f32>, %b: <1000 x 10 x f32>
    %abc = dot %ab: <10 x 10 x f32>, %c: <10 x 1000 x f32>
    return %abc: <10 x 1000 x f32>
}
"""


def test_compile_runs_the_reordered_matrix_chain(capfd: pytest.CaptureFixture[str]) -> None:
    """(10x1000)(1000x10)(10x1000) is already cheapest left to right; written the other
    way round, the optimizer reorders it and the compile report says so."""
    bad = BAD_CHAIN.replace(
        """    %ab = dot %a: <10 x 1000 x f32>, %b: <1000 x 10 x f32>
    %abc = dot %ab: <10 x 10 x f32>, %c: <10 x 1000 x f32>""",
        """    %bc = dot %b: <1000 x 10 x f32>, %c: <10 x 1000 x f32>
    %abc = dot %a: <10 x 1000 x f32>, %bc: <1000 x 1000 x f32>""",
    )
    rng = np.random.default_rng(0)
    a, b, c = (
        rng.standard_normal(s).astype(np.float32) for s in ((10, 1000), (1000, 10), (10, 1000))
    )
    mod = dlc.compile(bad)
    assert capfd.readouterr().err == ""  # the API never writes to stderr
    stats = mod.pass_statistics()["matrix-chain-reorder"]
    assert stats["chains reordered"] == 1 and stats["FLOPs saved"] > 0
    want = (a.astype(np.float64) @ b) @ c
    np.testing.assert_allclose(mod.chain(a, b, c), want, rtol=1e-3, atol=1e-2)
    assert "dot" in mod.ir("graph") and "<1000 x 1000 x f32>" not in mod.ir("graph")
    o0 = dlc.compile(bad, opt_level=0)
    assert "matrix-chain-reorder" not in o0.pass_statistics()
    assert "<1000 x 1000 x f32>" in o0.ir("graph")


@pytest.mark.parametrize("setting, verified", [("1", 2), ("0", 0), ("", 0)])
def test_levels_verified_with_dlc_verify(
    monkeypatch: pytest.MonkeyPatch, setting: str, verified: int
) -> None:
    """DLC_VERIFY=1 (the test suite's default) verifies the tensor and the loop level
    of every compile; users' compiles leave that to dlc-opt and the tests."""
    from xdsl.dialects.builtin import ModuleOp

    calls: list[int] = []
    original = ModuleOp.verify

    def counting(self: ModuleOp, *args: object, **kwargs: object) -> None:
        calls.append(1)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ModuleOp, "verify", counting)
    monkeypatch.setenv("DLC_VERIFY", setting)
    monkeypatch.setenv("DLC_CACHE", "0")
    module = dlc.compile((ROOT / "examples" / "softmax.dl").read_text())
    assert len(calls) == verified
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    expected = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    np.testing.assert_allclose(module.softmax(x), expected, rtol=1e-5, atol=1e-9)
