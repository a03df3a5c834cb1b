"""An epilogue at a register tile whose accumulators live in memory
(dlc/lowering/tensor_to_loop/epilogue.py): when an outer reduction loop is unrolled,
whether a block is the reduction's last is known while lowering, and only the last
block's values go through the epilogue; the earlier blocks store their partial values
(there was no runtime branch to build: the lowering crashed building `loop.if` on
a Python bool)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlc.cli.dlc_opt import main as dlc_opt_main
from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import LowerTensorToLoopPass

A, W, R = "!graph.tensor<4x16xf32>", "!graph.tensor<16x4xf32>", "!graph.tensor<4x4xf32>"

# r0 = 16 in two blocks of 8 (r0.0 unrolled, outside d0 and d1): the register chain is
# r0.1 alone, so the accumulators are in memory; `epilogue 1` is the relu after it.
SCHEDULE = "tile [r0 = [8]], interchange [r0.0, d0, d1, r0.1], unroll [r0.0], epilogue 1"

SOURCE = f"""tensor.func @f(%a: {A}, %w: {W}) -> {R} {{
    %e = tensor.compute(%a, %w) reduce [16] by "add" init 0.000000e+00 : f32 schedule #schedule.nest<{SCHEDULE}> {{
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : {A}
      %y = tensor.read %w[%k, %j] : {W}
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    }} : ({A}, {W}) -> {R}
    %r = tensor.compute(%e) schedule #schedule.nest<> {{
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %e[%i, %j] : {R}
      %z = arith.constant 0.000000e+00 : f32
      %m = arith.maximumf %v, %z : f32
      tensor.yield %m : f32
    }} : ({R}) -> {R}
    tensor.return %r : {R}
}}
"""


def test_an_unrolled_reduction_block_applies_the_epilogue_only_at_the_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "e.mlir"
    source.write_text(SOURCE)
    assert dlc_opt_main([str(source), "-p", LowerTensorToLoopPass.name]) == 0
    out = capsys.readouterr().out
    reductions = [m.start() for m in re.finditer(r"iter_args", out)]
    relus = [m.start() for m in re.finditer(r"arith\.maximumf", out)]
    assert len(reductions) == 2  # one reduction loop per unrolled block of r0
    assert len(relus) == 1 and relus[0] > reductions[1]  # the relu after the last block only
    assert "loop.if" not in out  # which block is last is known: no runtime test
