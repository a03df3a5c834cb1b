"""The superoptimizer's measured costs (`superoptimize{costs=measured|table}`).

No assertion depends on a timing: the search's decisions are tested with injected
tables, the measuring path with a stand-in timer, and dlc's own measurement only for
producing a positive number for a product and a convolution.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dlc import superopt_costs
from dlc.api import compile_kernel
from dlc.parser import parse_module, print_module
from dlc.passes.graph.superopt import measure
from dlc.passes.graph.superoptimize import SuperoptimizePass

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


@pytest.fixture(autouse=True)
def runtime() -> None:
    superopt_costs.install(compile_kernel)


def write_table(
    path: Path, costs: dict[str, float], mode: int = 0o600, host: object = None
) -> Path:
    path.write_text(json.dumps({"host": host or superopt_costs.host(), "costs": costs}))
    path.chmod(mode)
    return path


def run(text: str, **options: object) -> tuple[str, dict[str, int]]:
    module = parse_module(text, "<t>")
    p = SuperoptimizePass(budget=100.0, **options)  # type: ignore[arg-type]
    p.apply(None, module)  # type: ignore[arg-type]
    return print_module(module), p.take_statistics()


@pytest.mark.parametrize(("separate_ns", "merged_ns", "dots"), [(1.0, 1e9, 2), (1e6, 1.0, 1)])
def test_a_cost_table_decides_whether_products_merge(
    tmp_path: Path, separate_ns: float, merged_ns: float, dots: int
) -> None:
    """Two products x·a, x·b: the table's prices of them and of the merged x·[a b]
    decide (with the analytical model, which prices shapes the table lacks, they merge)."""
    costs = {"matmul 4x6 6x5": separate_ns, "matmul 4x6 6x10": merged_ns}
    table = write_table(tmp_path / "costs.json", costs)
    out, stats = run(TWO_PRODUCTS, costs="table", cost_table=str(table))
    assert out.count("= dot ") == dots
    assert stats["costs measured"] == 0
    assert run(TWO_PRODUCTS)[0].count("= dot ") == 1


def test_measured_costs_are_cached_owner_only_and_settled_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each shape is measured when first priced; before the guard compares, the shapes
    on which input and rewrite differ are timed again in one alternating batch; the
    table is saved 0600 in 0700 directories, keyed by this CPU, and read next time."""
    batches: list[list[str]] = []

    def fake(keys: list[str]) -> list[float]:
        batches.append(list(keys))
        return [5000.0] * len(keys)

    monkeypatch.setattr(superopt_costs.Runtime, "measure", staticmethod(fake))
    table = tmp_path / "cache" / "deeper" / "costs.json"
    _, stats = run(TWO_PRODUCTS, costs="measured", cost_table=str(table))
    assert stats["costs measured"] == 2
    assert batches[0] == ["matmul 4x6 6x5"]  # the input's products, before the search
    assert batches[-1] == ["matmul 4x6 6x10", "matmul 4x6 6x5"]  # the guard's batch
    assert stats["guard: functions rewritten, at least 3% cheaper"] == 1
    assert os.stat(table).st_mode & 0o777 == 0o600
    assert os.stat(table.parent).st_mode & 0o777 == 0o700
    saved = json.loads(table.read_text())
    assert saved["costs"]["matmul 4x6 6x5"] == 5000.0
    assert saved["host"] == superopt_costs.host()
    batches.clear()
    _, again = run(TWO_PRODUCTS, costs="measured", cost_table=str(table))
    assert again["costs measured"] == 0 and not batches  # read from the table


def test_a_table_of_another_cpu_is_ignored_and_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        superopt_costs.Runtime, "measure", staticmethod(lambda keys: [7.0] * len(keys))
    )
    other = {"cpu": "some-other-cpu", "features": "+avx512f"}
    path = write_table(tmp_path / "costs.json", {"matmul 4x6 6x5": 1.0}, host=other)
    _, stats = run(TWO_PRODUCTS, costs="measured", cost_table=str(path))
    assert stats["cost table of another CPU ignored"] == 1
    saved = json.loads(path.read_text())
    assert saved["host"] == superopt_costs.host()
    assert saved["costs"]["matmul 4x6 6x5"] == 7.0  # measured here, not the other CPU's


def test_the_default_table_is_named_after_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CACHE_DIR", "/some/cache")
    path = superopt_costs.default_path()
    assert path == Path("/some/cache") / f"superopt-costs-{superopt_costs.host()['cpu']}.json"


@pytest.mark.parametrize(
    ("mode", "content", "message"),
    [
        (0o664, {"costs": {}}, "writable by group or others"),
        (0o600, {"costs": {"matmul 1x1 1x1": -1}}, "expected"),
        (0o600, [1, 2], "expected"),
    ],
)
def test_an_untrusted_or_malformed_cost_table_is_refused(
    tmp_path: Path, mode: int, content: object, message: str
) -> None:
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(content))
    path.chmod(mode)
    with pytest.raises(ValueError, match=message):
        SuperoptimizePass(costs="table", cost_table=str(path))


def test_a_table_in_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ValueError, match="writable by group or others"):
        SuperoptimizePass(costs="measured", cost_table=str(shared / "costs.json"))


def test_an_unknown_cost_model_is_an_option_error() -> None:
    with pytest.raises(ValueError, match="costs must be one of analytical, measured, table"):
        SuperoptimizePass(costs="guessed")


def test_without_the_runtime_measured_costs_are_an_option_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(measure, "BACKEND", [])
    monkeypatch.setattr(measure, "INSTALLERS", [])
    with pytest.raises(ValueError, match="measured costs need dlc's runtime"):
        SuperoptimizePass(costs="table")


@pytest.mark.parametrize("key", ["matmul 2x3 3x4", "conv 1x2x5x5 3x2x3x3 s2x1 p1x1x0x0"])
def test_dlc_measures_a_product_and_a_convolution(key: str) -> None:
    assert superopt_costs.measure_ns(key) > 0


def test_dlc_opt_installs_the_runtime_when_a_pass_first_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """dlc-opt leaves dlc.superopt_costs unimported until a superoptimize pass needs the
    runtime (a lazy installer), and a table's costs then decide as they do here."""
    from dlc.cli import dlc_opt

    monkeypatch.setattr(measure, "BACKEND", [])
    monkeypatch.setattr(measure, "INSTALLERS", [])
    costs = {"matmul 4x6 6x5": 1.0, "matmul 4x6 6x10": 1e9}
    table = write_table(tmp_path / "costs.json", costs)
    source = tmp_path / "t.dl"
    source.write_text(TWO_PRODUCTS)
    spec = f'superoptimize{{costs=table cost-table="{table}"}}'
    assert dlc_opt.main([str(source), "-p", spec]) == 0
    assert capsys.readouterr().out.count("= dot ") == 2
    assert measure.BACKEND and not measure.INSTALLERS
