"""Every pass but `verify` works on one level and refuses a module at another level
(`dlc.analysis.levels.require_level`) instead of silently doing nothing or, for a
lowering, dropping every function it does not know."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

import dlc
from dlc.analysis.levels import LEVELS, level_of
from dlc.cli.dlc_opt import main
from dlc.diagnostics import DiagnosticError
from dlc.pipeline import LOWERINGS, get_all_passes, make_pass

PASS_LEVELS = {
    "differentiate": "graph",
    "decompose-composites": "graph",
    "canonicalize": "graph",
    "fold-constants": "graph",
    "cse": "graph",
    "dce": "graph",
    "inline": "graph",
    "cfg-simplify": "graph",
    "cfg-canonicalize": "graph",
    "literal-broadcasting-promotion": "graph",
    "matrix-chain-reorder": "graph",
    "superoptimize": "graph",
    "lower-graph-to-tensor": "graph",
    "lower-graph-to-loop": "graph",
    "unfold-convolutions": "tensor",
    "fuse": "tensor",
    "schedule": "tensor",
    "lower-tensor-to-loop": "tensor",
    "plan-memory": "loop",
    "math-approx": "loop",
    "lower-loop-to-llvm": "loop",
}

ADD_ONE = """module "m"
stage raw

func @add_one: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = add %x: <4 x f32>, 1.0: f32
    return %y: <4 x f32>
}
"""


def module_at(level: str) -> ModuleOp:
    module = dlc.parse(ADD_ONE)
    for above in LEVELS[: LEVELS.index(level)]:
        make_pass(LOWERINGS[above]).apply(Context(), module)
    assert level_of(module) == level
    return module


def test_every_pass_but_verify_has_a_level() -> None:
    assert set(get_all_passes()) == {*PASS_LEVELS, "verify"}


@pytest.mark.parametrize(
    ("name", "actual"),
    [(name, actual) for name, level in PASS_LEVELS.items() for actual in LEVELS if actual != level],
)
def test_pass_refuses_another_level(name: str, actual: str) -> None:
    level = PASS_LEVELS[name]
    module = module_at(actual)
    before = str(module)
    with pytest.raises(DiagnosticError) as caught:
        make_pass(name).apply(Context(), module)
    message = f"{name}: expected a module at the {level} level, got the {actual} level"
    lowerings = LEVELS[LEVELS.index(actual) : LEVELS.index(level)]
    if lowerings:
        message += f" (run {','.join(LOWERINGS[m] for m in lowerings)} first)"
    assert caught.value.message == message
    assert caught.value.location is None
    assert str(module) == before  # refused before touching anything


def test_lowering_hint_names_every_missing_lowering() -> None:
    with pytest.raises(DiagnosticError) as caught:
        make_pass("lower-loop-to-llvm").apply(Context(), module_at("graph"))
    assert caught.value.message == (
        "lower-loop-to-llvm: expected a module at the loop level, got the graph level "
        "(run lower-graph-to-tensor,lower-tensor-to-loop first)"
    )


@pytest.mark.parametrize("name", sorted(PASS_LEVELS))
def test_empty_module_is_at_every_level(name: str) -> None:
    make_pass(name).apply(Context(), ModuleOp([]))
    make_pass(name).apply(Context(), dlc.parse('module "e"\nstage raw\n'))


@pytest.mark.parametrize("level", LEVELS)
def test_verify_runs_at_every_level(level: str) -> None:
    make_pass("verify").apply(Context(), module_at(level))


def test_dlc_opt_reports_the_wrong_level_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    mlp = Path(__file__).resolve().parents[2] / "examples" / "mlp.dl"
    assert main([str(mlp), "-p", "lower-tensor-to-loop"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "dlc-opt: error: lower-tensor-to-loop: expected a module at the tensor level, "
        "got the graph level (run lower-graph-to-tensor first)\n"
    )


def test_dlc_opt_lowers_an_empty_module(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "empty.dl"
    path.write_text('module "e"\nstage raw\n')
    assert main([str(path), "-t", "llvm"]) == 0
    assert "target triple" in capsys.readouterr().out


MLP = """module "m"
stage raw

func @f: (<4 x 8 x f32>, <8 x 3 x f32>) -> <4 x 3 x f32> {
'entry(%x: <4 x 8 x f32>, %w: <8 x 3 x f32>):
    %y = dot %x: <4 x 8 x f32>, %w: <8 x 3 x f32>
    %z = max %y: <4 x 3 x f32>, 0.0: f32
    return %z: <4 x 3 x f32>
}
"""


def test_ir_above_llvm_lowers_no_further_than_the_loop_level(monkeypatch) -> None:
    """`ir("graph" | "tensor" | "loop")` runs no lower-loop-to-llvm; the llvm level asked
    for afterwards runs it once, on from the loop level, and the other levels stay."""
    pass_ = type(make_pass("lower-loop-to-llvm"))
    calls: list[int] = []
    real = pass_.apply

    def counting(self, ctx, module) -> None:  # noqa: ANN001
        calls.append(1)
        real(self, ctx, module)

    monkeypatch.setattr(pass_, "apply", counting)
    mod = dlc.compile(MLP)
    before = len(calls)
    above = {level: mod.ir(level) for level in ("graph", "tensor", "loop")}
    assert "loop.func @f" in above["loop"] and len(calls) == before
    resumed = str(mod.ir_module("llvm"))
    assert len(calls) == before + 1
    assert {level: mod.ir(level) for level in above} == above
    assert str(dlc.compile(MLP).ir_module("llvm")) == resumed  # lowered whole at once
