"""Denial of service by size (issue 28): 1,000 tiny functions calling each other took
102 s to compile. A module budget (functions, instructions, call nesting) refuses such
programs before any lowering work, with a located error naming the option that raises
the limit; `dlc-run --random-inputs` caps the sum of its inputs, not only each one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.budget import ModuleBudget
from dlc.cli import dlc_run, run_io


def _chain(n: int) -> str:
    """@f0 calls @f1 ... calls @f{n-1}: n functions, a chain n calls deep."""
    parts = ['module "chain"\nstage raw\n']
    for k in range(n):
        body = (
            f"    %y = apply @f{k + 1}(%x: f32): (f32) -> f32\n    return %y: f32"
            if k + 1 < n
            else "    %y = add %x: f32, 1: f32\n    return %y: f32"
        )
        parts.append(f"\nfunc @f{k}: (f32) -> f32 {{\n'entry(%x: f32):\n{body}\n}}\n")
    return "".join(parts)


def _separate(n: int) -> str:
    parts = ['module "many"\nstage raw\n']
    for k in range(n):
        parts.append(
            f"\nfunc @g{k}: (f32) -> f32 {{\n'entry(%x: f32):\n"
            "    %y = add %x: f32, 1: f32\n    return %y: f32\n}\n"
        )
    return "".join(parts)


def test_too_many_functions_is_a_located_error() -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(_separate(1000), filename="many.dl")
    assert info.value.filename == "many.dl" and info.value.line == 4 + 6 * 256
    assert info.value.message == (
        "the module defines more than 256 functions (1000): raise it with "
        "budget=ModuleBudget(max_functions=...)"
    )


def test_too_many_instructions_is_a_located_error() -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(_separate(20), budget=ModuleBudget(max_instructions=30))
    assert info.value.line == 4 + 6 * 10  # @g10 brings the total to 33
    assert info.value.message == (
        "the module has more than 30 instructions (at @g10): raise it with "
        "budget=ModuleBudget(max_instructions=...)"
    )


def test_deep_call_chains_are_a_located_error() -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(_chain(100), filename="chain.dl")
    assert info.value.message == (
        "@f35 starts a chain of more than 64 nested calls: raise it with "
        "budget=ModuleBudget(max_call_depth=...)"
    )
    assert info.value.line == 4 + 6 * 35


def test_raised_budgets_compile() -> None:
    budget = ModuleBudget(max_call_depth=8)
    assert dlc.compile(_chain(8), budget=budget).f0(np.float32(1)) == 2
    with pytest.raises(dlc.DiagnosticError, match="more than 4 nested calls"):
        dlc.compile(_chain(8), budget=ModuleBudget(max_call_depth=4))


def test_recursion_is_not_nesting() -> None:
    text = """module "r"
stage raw

func @f: (i64) -> i64 {
'entry(%n: i64):
    %done = lessThanOrEqual %n: i64, 0: i64
    conditional %done: bool then 'out() else 'more()
'out():
    return 0: i64
'more():
    %m = subtract %n: i64, 1: i64
    %r = apply @f(%m: i64): (i64) -> i64
    %s = add %r: i64, 1: i64
    return %s: i64
}
"""
    assert dlc.compile(text, budget=ModuleBudget(max_call_depth=1)).f(np.int64(5)) == 5


def test_random_inputs_are_capped_in_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_io, "MAX_RANDOM_INPUT_BYTES", 1000)
    path = tmp_path / "two.dl"
    path.write_text(
        'module "two"\nstage raw\n\nfunc @f: (<200 x f32>, <200 x f32>) -> <200 x f32> {\n'
        "'entry(%a: <200 x f32>, %b: <200 x f32>):\n"
        "    %c = add %a: <200 x f32>, %b: <200 x f32>\n    return %c: <200 x f32>\n}\n"
    )
    assert dlc_run.main([str(path), "--random-inputs"]) == 1
    assert capsys.readouterr().err == (
        "dlc-run: error: --random-inputs: the random inputs take 1600 bytes together, more "
        "than the limit of 1000; give some with --input NAME=PATH.npy\n"
    )
    np.save(tmp_path / "a.npy", np.zeros(200, np.float32))
    assert dlc_run.main([str(path), "--random-inputs", "--input", f"a={tmp_path / 'a.npy'}"]) == 0
