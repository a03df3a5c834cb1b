"""tools/thread_balance.py: the busiest thread's share under dynamic chunks, and the
ideal speedup of a product whose column blocks split evenly or not (scheduled for
haswell, so no host dependence)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import thread_balance  # noqa: E402

from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
from dlc.parser import parse_module
from dlc.passes.tensor import schedule_blocks
from dlc.passes.tensor.fuse import FusePass
from dlc.passes.tensor.schedule import SchedulePass
from dlc.pipeline import context


def test_busiest_share() -> None:
    assert thread_balance.busiest_share([1, 1, 1], 2) == pytest.approx(2 / 3)
    assert thread_balance.busiest_share([4] * 8, 2) == pytest.approx(1 / 2)
    assert thread_balance.busiest_share([4] * 8, 1) == 1.0
    # 52 rows in blocks of 12, 12, 12, 12, 4 on 2 threads: 12 + 12 + 4 on the first
    assert thread_balance.busiest_share([12, 12, 12, 12, 4], 2) == pytest.approx(28 / 52)
    # chunks of 2 iterations (9 iterations, 2 threads x 4 chunks): 2+2+1 against 2+2
    assert thread_balance.busiest_share([1] * 9, 2) == pytest.approx(5 / 9)


def _scheduled(m: int, k: int, n: int) -> object:
    a, b, c = (f"<{x} x {y} x f32>" for x, y in ((m, k), (k, n), (m, n)))
    source = (
        f'module "mm"\nstage raw\nfunc @f: ({a}, {b}) -> {c} {{\n'
        f"'entry(%a: {a}, %b: {b}):\n    %c = dot %a: {a}, %b: {b}\n    return %c: {c}\n}}\n"
    )
    module = parse_module(source)
    for p in (LowerGraphToTensorPass(), FusePass(), SchedulePass(target="haswell")):
        p.apply(context(), module)
    return module


def test_ideal_speedup_of_column_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """BERT's 128 x 768 x 3072 product in 8+ column blocks splits evenly on 2 threads;
    in 3 blocks (the blocks before `column_blocks`) at most 1.5x."""
    shares = thread_balance.nest_shares(_scheduled(128, 3072, 768), 2)
    assert thread_balance.ideal_speedup(shares) == pytest.approx(2.0)
    assert thread_balance.ideal_speedup(thread_balance.nest_shares(_scheduled(8, 8, 8), 2)) >= 1
    monkeypatch.setattr("dlc.passes.tensor.schedule_policy.column_blocks", lambda n, nc, nr: 256)
    shares = thread_balance.nest_shares(_scheduled(128, 3072, 768), 2)
    assert thread_balance.ideal_speedup(shares) == pytest.approx(1.5)
    assert schedule_blocks.PARALLEL_BLOCKS >= 2
