"""The superoptimizer's final guard and opt_level 3's measured costs.

No assertion depends on a timing: the guard's decisions are tested with injected cost
tables, opt_level 3's measuring path with a stand-in timer; dlc's own timer only has
to give results that match the reference interpreter.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc import pipeline, superopt_costs
from dlc.api import compile_kernel
from dlc.options import Options
from dlc.parser import parse_module, print_module
from dlc.passes.graph.superopt import measure
from dlc.passes.graph.superoptimize import SuperoptimizePass
from dlc.semantics.interpreter import run_function

TWO_PRODUCTS = """module "t"
stage raw

func @f: (<4 x 6 x f32>, <6 x 5 x f32>, <6 x 5 x f32>) -> <4 x 5 x f32> {
'entry(%x: <4 x 6 x f32>, %a: <6 x 5 x f32>, %b: <6 x 5 x f32>):
    %p = dot %x: <4 x 6 x f32>, %a: <6 x 5 x f32>
    %q = dot %x: <4 x 6 x f32>, %b: <6 x 5 x f32>
    %r = multiply %p: <4 x 5 x f32>, %q: <4 x 5 x f32>
    return %r: <4 x 5 x f32>
}
"""

ATTENTION = Path(__file__).resolve().parents[5] / "benchmarks" / "attention.dl"


@pytest.fixture(autouse=True)
def runtime() -> None:
    superopt_costs.install(compile_kernel)


def table(path: Path, costs: dict[str, float]) -> str:
    path.write_text(json.dumps({"host": superopt_costs.host(), "costs": costs}))
    path.chmod(0o600)
    return str(path)


def run(text: str, **options: object) -> tuple[str, dict[str, int]]:
    module = parse_module(text, "<t>")
    p = SuperoptimizePass(budget=100.0, **options)  # type: ignore[arg-type]
    p.apply(None, module)  # type: ignore[arg-type]
    return print_module(module), p.take_statistics()


def test_the_guard_keeps_the_input_when_the_rewrite_is_not_cheaper_by_the_margin(
    tmp_path: Path,
) -> None:
    """The merged product x·[a b] costs 1.5 % less than the two products under the
    table: the search takes it, the guard (margin 3 %) puts the input back; with
    margin 0 the same table keeps the rewrite."""
    costs = {"matmul 4x6 6x5": 1e6, "matmul 4x6 6x10": 1.97e6}
    path = table(tmp_path / "costs.json", costs)
    out, stats = run(TWO_PRODUCTS, costs="table", cost_table=path)
    assert out == print_module(parse_module(TWO_PRODUCTS, "<t>"))
    assert stats["guard: functions kept, rewrite not 3% cheaper"] == 1
    assert "substitutions applied" not in stats
    assert stats["cost after (ns)"] == stats["cost before (ns)"]
    out, stats = run(TWO_PRODUCTS, costs="table", cost_table=path, margin=0.0)
    assert out.count("= dot ") == 1
    assert stats["guard: functions rewritten, at least 0% cheaper"] == 1
    assert stats["cost after (ns)"] < 0.99 * stats["cost before (ns)"]


def test_the_guard_prices_the_whole_function(tmp_path: Path) -> None:
    """Two functions: the one whose rewrite pays is rewritten, the other kept."""
    other = TWO_PRODUCTS.replace("@f", "@g").replace("4 x", "3 x").replace('module "t"\n', "")
    other = other.replace("stage raw\n", "").replace("4x", "3x")
    costs = {
        "matmul 4x6 6x5": 1e6,
        "matmul 4x6 6x10": 1e6,  # half the price of the two
        "matmul 3x6 6x5": 1e6,
        "matmul 3x6 6x10": 1.99e6,  # 0.5 % less
    }
    out, stats = run(TWO_PRODUCTS + other, costs="table", cost_table=table(tmp_path / "c", costs))
    f, g = out.split("func @g")
    assert f.count("= dot ") == 1 and g.count("= dot ") == 2
    assert stats["guard: functions rewritten, at least 3% cheaper"] == 1
    assert stats["guard: functions kept, rewrite not 3% cheaper"] == 1


def test_a_product_not_measured_stands_in_at_its_calibrated_analytical_cost(
    tmp_path: Path,
) -> None:
    """With the measuring budget spent (here 0 s), a shape the table lacks costs its
    analytical price times the measured/analytical ratio of the table's products."""
    known = "matmul 4x6 6x5"
    costs = {known: 3.0 * measure.analytical(known)}
    t = measure.CostTable.load(Path(table(tmp_path / "c", costs)), measure=True, budget_s=0.0)
    new = "matmul 4x6 6x10"
    assert t.price(new) == pytest.approx(3.0 * measure.analytical(new))
    assert t.stand_ins == 1 and t.measured == 0
    assert not t.measurable("matmul 4096x4096 4096x4096")  # too costly to time


def fake_timer(keys: list[str]) -> list[float]:
    """A stand-in for timing: the analytical price, so decisions are the model's."""
    return [measure.analytical(k) for k in keys]


def test_opt_level_3_measures_by_default_and_matches_the_reference(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlc.compile(opt_level=3) prices products by measured kernels (here a stand-in
    timer), writes the table of this CPU in the cache directory owner-only, reuses it
    on the next compile, and the results match the reference interpreter."""
    monkeypatch.setenv("DLC_SUPEROPT_COSTS", "measured")
    monkeypatch.setattr(superopt_costs.Runtime, "measure", staticmethod(fake_timer))
    s, d = 24, 40  # not multiples of a register tile
    text = ATTENTION.read_text().replace("128", str(s)).replace("512", str(d))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((s, d)).astype(np.float32)
    ws = [(rng.standard_normal((d, d)) * 0.1).astype(np.float32) for _ in range(3)]
    constants = {"attention": dict(zip(("wq", "wk", "wv"), ws, strict=True))}
    compiled = dlc.compile(text, opt_level=3, constants=constants)
    stats = compiled.pass_statistics()["superoptimize"]
    assert stats["costs measured"] > 0
    path = superopt_costs.default_path()
    assert path.parent == cache_dir and path.stat().st_mode & 0o777 == 0o600
    want = run_function(parse_module(text), "attention", [x, *ws])
    np.testing.assert_allclose(compiled.attention(x), want, rtol=1e-4, atol=1e-5)
    monkeypatch.setenv("DLC_CACHE", "0")  # a fresh compile, not the cached one
    again = dlc.compile(text, opt_level=3, constants=constants)
    assert again.pass_statistics()["superoptimize"]["costs measured"] == 0


def test_opt_level_3_with_real_timings_matches_the_reference(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the timings decide, the result is the program's."""
    monkeypatch.setenv("DLC_SUPEROPT_COSTS", "measured")
    rng = np.random.default_rng(8)
    module = parse_module(TWO_PRODUCTS, "<t>")
    args = [rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (6, 5), (6, 5))]
    compiled = dlc.compile(TWO_PRODUCTS, opt_level=3)
    assert compiled.pass_statistics()["superoptimize"]["costs measured"] > 0
    want = run_function(module, "f", args)
    np.testing.assert_allclose(compiled.f(*args), want, rtol=1e-5, atol=1e-5)


def test_other_targets_and_the_environment_choose_the_analytical_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert pipeline.superopt_costs(Options(opt_level=3, superopt_costs="measured")) == "measured"
    assert pipeline.superopt_costs(Options(opt_level=2, superopt_costs="measured")) == "analytical"
    cross = Options(opt_level=3, target_cpu="haswell", superopt_costs="measured")
    assert pipeline.superopt_costs(cross) == "analytical"  # timings here say nothing there
    monkeypatch.setenv("DLC_SUPEROPT_COSTS", "analytical")
    assert Options(opt_level=3).superopt_costs == "analytical"
    monkeypatch.setenv("DLC_SUPEROPT_COSTS", "guessed")
    with pytest.warns(UserWarning, match="DLC_SUPEROPT_COSTS='guessed' is not one of measured"):
        assert Options(opt_level=3).superopt_costs == "measured"
    with pytest.raises(ValueError, match="superopt_costs must be one of measured, analytical"):
        Options(opt_level=3, superopt_costs="guessed")


def test_bad_guard_options_are_reported() -> None:
    with pytest.raises(ValueError, match=r"margin must be in \[0, 1\), got 1.0"):
        SuperoptimizePass(margin=1.0)
    with pytest.raises(ValueError, match="measure-budget must be at least 0 s, got -1.0"):
        SuperoptimizePass(measure_budget=-1.0)
