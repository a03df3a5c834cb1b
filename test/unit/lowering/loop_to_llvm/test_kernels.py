"""Kernels (`lower-loop-to-llvm{outline=true}`, `loop_to_llvm/kernels.py`, and
`lower-tensor-to-loop{kernels=true}`, `tensor_to_loop/kernels.py`): loop nests and
reductions that repeat are compiled once and called from each place, with unchanged
results; and the compile's progress line (`dlc.progress`)."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import dlc
from dlc import pipeline, progress
from dlc.dialects import loop
from dlc.lowering.loop_to_llvm import kernels
from dlc.lowering.tensor_to_loop import kernels as tensor_kernels
from dlc.program_levels import lower
from dlc.semantics.interpreter import run_function

# Three layers alike (the same shapes, their own weights), then a different nest.
LAYER = """    %d{k} = dot %h{j}: <16 x 32 x f32>, %w{k}: <32 x 32 x f32>
    %m{k} = reduce %d{k}: <16 x 32 x f32> by max init -inf: f32 along 0, 1
    %h{k} = subtract %d{k}: <16 x 32 x f32>, %m{k}: f32
"""
PROGRAM = (
    """module "layers"
stage raw

func @f: (<16 x 32 x f32>, <32 x 32 x f32>, <32 x 32 x f32>, <32 x 32 x f32>, <16 x 32 x f32>) -> <16 x 32 x f32> {
'entry(%h0: <16 x 32 x f32>, %w1: <32 x 32 x f32>, %w2: <32 x 32 x f32>, %w3: <32 x 32 x f32>, %c: <16 x 32 x f32>):
"""
    + "".join(LAYER.format(j=k - 1, k=k) for k in (1, 2, 3))
    + """    %e = subtract %h3: <16 x 32 x f32>, %c: <16 x 32 x f32>
    return %e: <16 x 32 x f32>
}
"""
)

RNG = np.random.default_rng(5)
ARGS = [
    (RNG.standard_normal(s) * 0.2).astype(np.float32) for s in [(16, 32), *[(32, 32)] * 3, (16, 32)]
]


def options(opt_level: int) -> pipeline.Options:
    return pipeline.Options(opt_level=opt_level)


@pytest.fixture(autouse=True)
def no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CACHE", "0")


def kernel_calls(opt_level: int) -> tuple[int, int]:
    """(kernel functions, calls of them) in the llvm level of `PROGRAM`."""
    from xdsl.dialects import llvm

    llvm_level, _ = lower(dlc.parse(PROGRAM), options(opt_level))
    kernels = {
        f.sym_name.data
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and ".kernel" in f.sym_name.data
    }
    calls = [
        op
        for op in llvm_level.walk()
        if isinstance(op, llvm.CallOp) and op.callee is not None
        and op.callee.string_value() in kernels
    ]  # fmt: skip
    return len(kernels), len(calls)


@pytest.mark.parametrize("opt_level", [0, 2])
def test_repeated_layers_share_kernels(opt_level: int) -> None:
    kernels, calls = kernel_calls(opt_level)
    assert kernels >= 1
    assert calls >= 2 * kernels  # by the three layers (the last one's max, fused with
    # the final subtract at opt_level 2, is another group)


@pytest.mark.parametrize("opt_level", [0, 1])
def test_results_bit_identical_with_and_without_kernels(
    opt_level: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    outlined = dlc.compile(PROGRAM, opt_level=opt_level).f(*ARGS)
    monkeypatch.setattr(kernels, "MIN_OPS", 10**9)  # nothing outlined
    monkeypatch.setattr(tensor_kernels, "MIN_SITES", 10**9)
    assert kernel_calls(opt_level) == (0, 0)
    inline = dlc.compile(PROGRAM, opt_level=opt_level).f(*ARGS)
    np.testing.assert_array_equal(outlined, inline)


def test_results_within_tolerance_at_opt_level_2() -> None:
    expected = run_function(dlc.parse(PROGRAM), "f", ARGS)
    got = dlc.compile(PROGRAM, opt_level=2).f(*ARGS)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_outline_is_in_the_pipeline() -> None:
    assert pipeline.lowering("loop", options(0)).outline  # type: ignore[attr-defined]
    assert pipeline.lowering("tensor", options(0)).kernels  # type: ignore[attr-defined]


@pytest.mark.parametrize("setting", ["bounds_check", "profile"])
def test_no_tensor_kernels_when_each_place_is_named(setting: str) -> None:
    """Checked accesses and profiled kernels name their own place: no shared code."""
    chosen = pipeline.Options(opt_level=2, **{setting: True})
    assert not pipeline.lowering("tensor", chosen).kernels  # type: ignore[attr-defined]


def loop_level(opt_level: int) -> ModuleOp:
    module = dlc.parse(PROGRAM)
    return pipeline.run(module, pipeline.steps(options(opt_level), stop="loop"))


@pytest.mark.parametrize("opt_level", [0, 2])
def test_repeated_reductions_are_lowered_once_at_the_tensor_level(opt_level: int) -> None:
    """The three layers' products are one kernel, called three times; their maxima
    (alone, or in a fusion group at opt_level 2) another."""
    module = loop_level(opt_level)
    funcs = [f for f in module.body.block.ops if isinstance(f, loop.FuncOp)]
    made = {f.sym_name.data for f in funcs if tensor_kernels.KERNEL in f.attributes}
    calls = [op.callee.data for op in module.walk() if isinstance(op, loop.CallOp)]
    counted = Counter(calls)
    assert counted["f.kernel0"] == 3  # the product
    assert set(counted) == made and min(counted.values()) >= 2  # the max (in a group or not)


def test_compute_key_is_the_content_up_to_the_values_read() -> None:
    """The layers' products read different weights and share a key (so do the maxima);
    the literal a product reads is part of its key (it may be packed at compile time)."""
    module = pipeline.run(dlc.parse(PROGRAM), pipeline.steps(options(2), stop="tensor"))
    assert sorted(tensor_kernels.KernelTable.of(module).counts.values()) == [3, 3]
    (first, *_), _ = tensor_kernels.KernelTable.of(module).keys.popitem()[1]
    assert first == (True,)  # no epilogue member; the result is read elsewhere


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal() -> None:
    stream = Terminal()
    p = progress.Progress(stream, delay=0.0)
    p.enter("graph")
    p.enter("loop")
    p._drawn = 0.0  # redraw now, not a tenth of a second later
    p.items(3, 10)
    assert "dlc: [" in stream.getvalue()
    assert "loop 3/10 kernels" in stream.getvalue()
    p.finish()
    assert stream.getvalue().endswith("\r\x1b[K")  # erased at the end
    assert set(p.phases) == {"graph", "loop"}


def test_progress_waits_for_long_compiles() -> None:
    stream = Terminal()
    p = progress.Progress(stream, delay=1000.0)
    p.enter("tensor")
    p.finish()
    assert stream.getvalue() == ""


def test_progress_silent_off_a_terminal_or_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not progress.terminal(io.StringIO())
    assert progress.terminal(Terminal())
    monkeypatch.setenv("DLC_PROGRESS", "0")
    assert not progress.terminal(Terminal())


def test_a_compile_reports_every_level() -> None:
    with progress.tracking(progress.Progress()) as tracked:
        dlc.compile(PROGRAM)
    assert set(tracked.phases) == set(progress.LEVELS)
    assert all(wall >= 0 and cpu >= 0 for wall, cpu in tracked.phases.values())
