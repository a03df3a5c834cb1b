"""The superoptimizer's guard by timing whole functions (`superopt/timed.py`).

No assertion depends on a timing: the decisions are tested with a stand-in for the
runtime's `time_functions`; dlc's own timing only has to give results that match the
reference interpreter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_superopt_guard import TWO_PRODUCTS  # two products of x: the merge the guard judges

import dlc
from dlc import superopt_costs
from dlc.api import compile_kernel, compile_timed
from dlc.dialects.graph import FuncOp
from dlc.parser import parse_module, print_module
from dlc.passes.graph.superopt import timed
from dlc.passes.graph.superoptimize import SuperoptimizePass
from dlc.semantics.interpreter import run_function

WITH_COUNT = TWO_PRODUCTS.replace(
    "(<4 x 6 x f32>, <6 x 5 x f32>, <6 x 5 x f32>) ->",
    "(<4 x 6 x f32>, <6 x 5 x f32>, <6 x 5 x f32>, i32) ->",
).replace("%b: <6 x 5 x f32>):", "%b: <6 x 5 x f32>, %n: i32):")

# per-op prices under which merging the two products into x·[a b] halves the cost
CHEAP_MERGE = {"matmul 4x6 6x5": 1e6, "matmul 4x6 6x10": 1e6}


class Timer:
    """A stand-in for `superopt_costs.time_functions`: fixed times, and what it was given."""

    def __init__(self, times: list[float] | None) -> None:
        self.times = times
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, modules: Sequence[Any], name: str) -> list[float] | None:
        self.calls.append(([print_module(m) for m in modules], name))
        return self.times


def run(
    text: str,
    tmp_path: Path,
    timer: Timer,
    monkeypatch: pytest.MonkeyPatch,
    threads: int = 1,
    fresh: bool = True,
) -> tuple[str, dict[str, int]]:
    path = tmp_path / "costs.json"
    if fresh:
        path.write_text(json.dumps({"host": superopt_costs.host(), "costs": CHEAP_MERGE}))
        path.chmod(0o600)
    superopt_costs.install(compile_kernel, lambda m, name: compile_timed(m, name, threads), threads)
    monkeypatch.setattr(superopt_costs.Runtime, "time_functions", staticmethod(timer))
    module = parse_module(text, "<t>")
    p = SuperoptimizePass(budget=100.0, costs="measured", cost_table=str(path))
    p.apply(None, module)  # type: ignore[arg-type]
    return print_module(module), p.take_statistics()


@pytest.mark.parametrize(
    "times,kept", [([1e5, 2e5], True), ([2e5, 1e5], False), ([1e5, 0.98e5], True)]
)
def test_the_timed_whole_function_decides(
    times: list[float], kept: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-op prices call the merged product half the cost; the guard times the
    function both ways and keeps the rewrite only if it is 3 % faster as a whole."""
    timer = Timer(times)
    out, stats = run(TWO_PRODUCTS, tmp_path, timer, monkeypatch)
    assert stats["guard: functions timed whole (opt 2, alternating rounds)"] == 1
    ((texts, name),) = timer.calls
    assert name == "f" and [t.count("= dot ") for t in texts] == [2, 1]
    assert out.count("= dot ") == (2 if kept else 1)
    verdict = "kept, rewrite not 3% cheaper" if kept else "rewritten, at least 3% cheaper"
    assert stats[f"guard: functions {verdict}"] == 1
    assert (stats["cost before (ns)"], stats["cost after (ns)"]) == (
        (times[0], times[0]) if kept else tuple(times)
    )


def test_whole_timings_are_kept_in_the_cost_table_per_thread_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second compile of the same function on this host reuses the timings the first
    one saved (no compile, no timing); another thread count times again."""
    timer = Timer([2e5, 1e5])
    first, stats = run(TWO_PRODUCTS, tmp_path, timer, monkeypatch)
    saved = json.loads((tmp_path / "costs.json").read_text())["functions"]
    assert list(saved.values()) == [[2e5, 1e5]] and len(timer.calls) == 1
    again, stats = run(TWO_PRODUCTS, tmp_path, timer, monkeypatch, fresh=False)
    assert again == first and len(timer.calls) == 1
    assert stats["guard: functions' whole timings reused from the cost table"] == 1
    assert "guard: functions timed whole (opt 2, alternating rounds)" not in stats
    run(TWO_PRODUCTS, tmp_path, timer, monkeypatch, threads=2, fresh=False)
    assert len(timer.calls) == 2
    assert len(json.loads((tmp_path / "costs.json").read_text())["functions"]) == 2


@pytest.mark.parametrize("functions", [[1.0, 2.0], {"k": [1.0]}, {"k": [1.0, -2.0]}])
def test_a_malformed_function_timing_is_refused(
    functions: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table's "functions" hold two positive nanosecond counts per key: anything
    else is an option error naming the file, like a malformed cost."""
    path = tmp_path / "costs.json"
    table = {"host": superopt_costs.host(), "costs": CHEAP_MERGE, "functions": functions}
    path.write_text(json.dumps(table))
    path.chmod(0o600)
    superopt_costs.install(compile_kernel)
    with pytest.raises(ValueError, match=r'costs.json: expected "functions": \{key: \[ns, ns\]\}'):
        SuperoptimizePass(budget=100.0, costs="measured", cost_table=str(path))


def test_without_a_timing_the_per_op_prices_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime that cannot time the function (None) leaves the decision to the
    per-op prices, under which the merge pays."""
    out, stats = run(TWO_PRODUCTS, tmp_path, Timer(None), monkeypatch)
    assert out.count("= dot ") == 1
    assert "guard: functions timed whole (opt 2, alternating rounds)" not in stats


def test_functions_with_other_parameters_are_not_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An integer parameter could be a trip count or an index that random values
    would make wrong: such a function is priced per op, never run."""
    timer = Timer([1e5, 2e5])
    out, stats = run(WITH_COUNT, tmp_path, timer, monkeypatch)
    assert timer.calls == [] and out.count("= dot ") == 1
    (func,) = (op for op in parse_module(WITH_COUNT).body.block.ops if isinstance(op, FuncOp))
    assert not timed.eligible(func)
    (func,) = (op for op in parse_module(TWO_PRODUCTS).body.block.ops if isinstance(op, FuncOp))
    assert timed.eligible(func)


def test_a_failing_timing_falls_back_to_the_per_op_prices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure inside the timing is dlc's bug: counted, and the program still compiles."""

    def broken(modules: Sequence[Any], name: str) -> list[float]:
        raise RuntimeError("planted")

    out, stats = run(TWO_PRODUCTS, tmp_path, broken, monkeypatch)  # type: ignore[arg-type]
    assert stats["guard: whole-function timing failed (RuntimeError)"] == 1
    assert out.count("= dot ") == 1


def test_dlc_times_both_forms_and_the_result_is_the_programs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real runtime: two compiled functions timed against each other (positive
    times), and whatever they decide, the compiled program matches the interpreter."""
    module = parse_module(TWO_PRODUCTS, "<t>")
    superopt_costs.install(compile_kernel, lambda m, name: compile_timed(m, name, 1))
    ns = superopt_costs.time_functions([module, module], "f")
    assert ns is not None and len(ns) == 2 and min(ns) > 0
    monkeypatch.setenv("DLC_SUPEROPT_COSTS", "measured")
    monkeypatch.setenv("DLC_CACHE", "0")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (6, 5), (6, 5))]
    compiled = dlc.compile(TWO_PRODUCTS, opt_level=3)
    want = run_function(parse_module(TWO_PRODUCTS, "<t>"), "f", args)
    np.testing.assert_allclose(compiled.f(*args), want, rtol=1e-5, atol=1e-5)
