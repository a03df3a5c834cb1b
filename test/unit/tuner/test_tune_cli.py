"""`dlc.tune` and `dlc-tune` end to end on tiny shapes (a few trials each): records
appended and applied, a broken candidate survived and never chosen, the table, the
plot, a 2-worker Dask LocalCluster, and every error message of the CLI."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.cli import dlc_tune
from dlc.passes.tensor.schedule_records import TuningDatabase, TuningWarning
from dlc.target import Target
from dlc.tuner import tune

pytest.importorskip("lightgbm")
pytest.importorskip("tqdm")

MM = """module "mm"
stage raw

func @mm: (<64 x 64 x f32>, <64 x 64 x f32>) -> <64 x 64 x f32> {
'entry(%a: <64 x 64 x f32>, %b: <64 x 64 x f32>):
    %c = dot %a: <64 x 64 x f32>, %b: <64 x 64 x f32>
    return %c: <64 x 64 x f32>
}
"""

MAP = """module "m"
stage raw

func @f: (<8 x f32>) -> <8 x f32> {
'entry(%x: <8 x f32>):
    %y = tanh %x: <8 x f32>
    return %y: <8 x f32>
}
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "mm.dl"
    path.write_text(MM)
    return path


def _records(db: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in db.read_text().splitlines()]


def test_tune_survives_wrong_candidates_and_the_db_applies(source: Path, tmp_path: Path) -> None:
    db = tmp_path / "tune.jsonl"
    report = tune(
        source, trials=4, db=db, batch=4, budget=0.01, progress=False, fault="wrong:vectorize"
    )
    (nest,) = report.nests
    records = _records(db)
    assert [r["schedule"] for r in records if r["search"] == "default"] == ["default"]
    records = [r for r in records if r["search"] != "default"]
    assert len(records) == 4 and {r["search"] for r in records} == {"model"}
    failed = [r for r in records if r["status"] != "ok"]
    assert failed and all("wrong result" in str(r["status"]) for r in failed)
    assert all("vectorize" in str(r["schedule"]) for r in failed)
    best = nest.best()
    assert best is not None and "vectorize" not in best.schedule
    loaded = TuningDatabase.load(db)
    record, _ = loaded.lookup(nest.key, Target.host().cpu)
    assert record is not None
    if best.seconds < nest.default_seconds:  # type: ignore[operator]
        assert record.schedule == best.schedule
    else:
        assert record.schedule == "default" and "*" in report.table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningWarning)  # the db covers every contraction
        mod = dlc.compile_file(source, tuning_db=db)
        if record.schedule != "default":
            assert best.schedule.removesuffix(">") in mod.ir("tensor")
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((64, 64), dtype=np.float32) for _ in range(2))
    np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert "dot 64x64 r64 f32" in report.table()


def test_cli_compares_searches_and_plots(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    db, png = tmp_path / "tune.jsonl", tmp_path / "curve.png"
    argv = [str(source), "--trials", "2", "--batch", "2", "--db", str(db), "--compare"]
    argv += ["--budget", "0.01"]
    assert dlc_tune.main([*argv, "--plot", str(png), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and "dot 64x64 r64 f32" in out and f"appended to {db}" in out
    assert {r["search"] for r in _records(db)} == {"model", "random", "default"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tune_on_two_local_workers_opens_no_socket(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`local:N` once started a Dask scheduler on 127.0.0.1 without authentication (and
    a dashboard): any local user could run code in its workers. Now no socket at all."""
    import socket

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("local:N opened a socket")

    monkeypatch.setattr(socket.socket, "bind", refused)
    monkeypatch.setattr(socket.socket, "listen", refused)
    db = tmp_path / "tune.jsonl"
    report = tune(source, trials=2, db=db, batch=2, budget=0.01, progress=False, cluster="local:2")
    assert len(_records(db)) == 3  # and the default
    assert report.nests[0].best() is not None


def test_nothing_to_tune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "map.dl"
    path.write_text(MAP)
    assert dlc_tune.main([str(path), "--db", str(tmp_path / "db.jsonl")]) == 0
    assert "@f: no contraction or group to tune" in capsys.readouterr().out


TRAP = """module "t"
stage raw

func @t: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    trap
    return %x: <4 x f32>
}
"""

TUPLE = """module "p"
stage raw

func @p: ((<4 x f32>, <4 x f32>)) -> <4 x f32> {
'entry(%x: (<4 x f32>, <4 x f32>)):
    %a = extract 0 from %x: (<4 x f32>, <4 x f32>)
    return %a: <4 x f32>
}
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TRAP, "dlc-tune: error: @t fails on random inputs: "),
        (TUPLE, "dlc-tune: error: @p: dlc-tune passes tensors and scalars only"),
    ],
)
def test_cli_errors_of_the_program(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.dl"
    path.write_text(text)
    assert dlc_tune.main([str(path), "--db", str(tmp_path / "db.jsonl")]) == 1
    assert message in capsys.readouterr().err


def test_cluster_address_that_does_not_answer(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed")
    from dlc.tuner import cluster

    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 0.5)
    with (
        pytest.raises(ValueError, match="cluster: cannot connect to 'tcp://127.0.0.1:9'"),
        pytest.warns(UserWarning, match="'tcp://127.0.0.1:9' is not a tls:// address"),
    ):
        tune(source, db=tmp_path / "db.jsonl", cluster="tcp://127.0.0.1:9", progress=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["{src}", "--db", "/proc/version"],
            "dlc-tune: error: cannot write the tuning database '/proc/version'",
        ),
        (["missing.dl"], "dlc-tune: error: cannot read 'missing.dl': No such file or directory"),
        (["{src}", "--entry", "g"], "dlc-tune: error: no function @g in {src}"),
        (
            ["{src}", "--trials", "0"],
            "dlc-tune: error: --trials, --batch and --timeout must be positive, --budget not negative",
        ),
        (
            ["{src}", "--cluster", "local:x"],
            "dlc-tune: error: cluster: expected local:N with N >= 1",
        ),
        (["{src}", "--random", "--compare"], "dlc-tune: error: argument --compare: not allowed"),
        (["{bad}"], "bad.dl:1:1: error:"),
    ],
)
def test_cli_errors(
    args: list[str], message: str, source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.dl"
    bad.write_text("nonsense\n")
    argv = [a.format(src=source, bad=bad) for a in args]
    assert dlc_tune.main(["--db", str(tmp_path / "db.jsonl"), *argv, "--no-progress"]) == 1
    assert message.format(src=source) in capsys.readouterr().err


def test_api_errors(source: Path) -> None:
    with pytest.raises(ValueError, match="search must be 'model', 'random' or 'both'"):
        dlc.tune(source, search="grid")
    with pytest.raises(ValueError, match="trials must be a positive int"):
        tune(source, trials=0)
    with pytest.raises(ValueError, match="batch must be a positive int"):
        tune(source, batch=0)
