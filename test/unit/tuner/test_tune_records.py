"""Workload keys, the tuning database and the `schedule` pass's use of it
(dlc/passes/tensor/schedule_records.py, schedule_tuned.py): keys ignore names and
positions, the best record per key and target wins, corrupt and stale lines are a
warning and never stop a compile, every contraction without a usable record is a
located warning saying why, and a tuned program still computes the right numbers."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc import pipeline
from dlc.cli import dlc_opt, dlc_run
from dlc.dialects import tensor
from dlc.parser import parse_module
from dlc.passes.tensor.schedule_records import (
    Record,
    TuningDatabase,
    TuningWarning,
    append_record,
    workload_key,
)
from dlc.target import Target

MM = """module "mm"
stage raw

func @mm: (<{m} x {k} x f32>, <{k} x {n} x f32>) -> <{m} x {n} x f32> {{
'entry(%{a}: <{m} x {k} x f32>, %b: <{k} x {n} x f32>):
    %c = dot %{a}: <{m} x {k} x f32>, %b: <{k} x {n} x f32>
    return %c: <{m} x {n} x f32>
}}
"""

TWO = """module "two"
stage raw

func @two: (<64 x 64 x f32>, <64 x 64 x f32>) -> <64 x 64 x f32> {
'entry(%x: <64 x 64 x f32>, %y: <64 x 64 x f32>):
    %t = tanh %x: <64 x 64 x f32>
    %p = dot %t: <64 x 64 x f32>, %y: <64 x 64 x f32>
    return %p: <64 x 64 x f32>
}
"""

TUNED = "#schedule.nest<tile [d0 = [4], d1 = [16]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1]>"


def _computes(text: str) -> list[tensor.ComputeOp]:
    graph = parse_module(text)
    module = pipeline.run(graph, pipeline.steps(pipeline.Options(), stop="tensor"))
    return [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]


def _dot_key(text: str) -> str:
    (dot,) = [op for op in _computes(text) if op.reduction_extents]
    return workload_key(dot)


def _record(key: str, **fields: object) -> Record:
    values: dict[str, object] = {
        "key": key,
        "target": Target.host().cpu,
        "schedule": TUNED,
        "seconds": 1e-3,
    }
    values.update(fields)
    return Record(**values)  # type: ignore[arg-type]


def test_key_ignores_names_and_position_but_not_shapes() -> None:
    base = _dot_key(MM.format(m=64, k=64, n=64, a="a"))
    assert base == _dot_key(MM.format(m=64, k=64, n=64, a="other_name"))
    assert base == _dot_key(TWO)  # the same dot after another op, other SSA names
    assert base != _dot_key(MM.format(m=64, k=32, n=64, a="a"))
    assert len(base) == 16


def test_best_record_per_key_and_target(tmp_path: Path) -> None:
    db = tmp_path / "db.jsonl"
    for seconds in (3e-3, 1e-3, 2e-3):
        append_record(db, _record("k1", seconds=seconds, schedule=f"s{seconds}"))
    append_record(db, _record("k1", seconds=None, status="failed: crashed (SIGSEGV)"))
    append_record(db, _record("k2", target="haswell"))
    loaded = TuningDatabase.load(db)
    best, why = loaded.lookup("k1", Target.host().cpu)
    assert best is not None and best.seconds == 1e-3 and why == ""
    assert loaded.lookup("k2", Target.host().cpu)[1].startswith(
        "records only for target(s) haswell"
    )
    assert "not in" in loaded.lookup("k3", "znver5")[1]


def test_corrupt_and_stale_lines_are_warnings(tmp_path: Path) -> None:
    db = tmp_path / "db.jsonl"
    append_record(db, _record("k1"))
    with open(db, "a") as f:
        f.write("{not json\n")
        f.write(json.dumps({"key": "k2"}) + "\n")
        f.write(_record("k3", version="0.0.1").to_json() + "\n")
        f.write(json.dumps({**json.loads(_record("k4").to_json()), "seconds": -1}) + "\n")
    with pytest.warns(TuningWarning) as caught:
        loaded = TuningDatabase.load(db)
    messages = [str(w.message) for w in caught]
    assert any(f"{db}:2: warning: corrupt tuning record ignored" in m for m in messages)
    assert any("and 2 more corrupt lines" in m for m in messages)
    assert any(f"{db}:4: warning: 1 tuning record(s) of another dlc version" in m for m in messages)
    assert loaded.lookup("k1", Target.host().cpu)[0] is not None
    assert "records only from dlc 0.0.1" in loaded.lookup("k3", Target.host().cpu)[1]


def test_unreadable_database_is_a_warning(tmp_path: Path) -> None:
    with pytest.warns(TuningWarning, match="cannot read the tuning database"):
        loaded = TuningDatabase.load(tmp_path)  # a directory
    assert not loaded.best
    assert not TuningDatabase.load(tmp_path / "missing.jsonl").best  # no file: no records


def test_compile_applies_the_record_and_stays_correct(tmp_path: Path) -> None:
    text = MM.format(m=64, k=64, n=64, a="a")
    db = tmp_path / "db.jsonl"
    append_record(db, _record(_dot_key(text)))
    with open(db, "a") as f:
        f.write("garbage\n")  # a corrupt line never stops a compile
    with pytest.warns(TuningWarning, match="corrupt tuning record"):
        mod = dlc.compile(text, tuning_db=db)
        assert TUNED.removesuffix(">") in mod.ir("tensor")
    assert mod.pass_statistics()["schedule"]["nests scheduled from the tuning database"] == 1
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64), dtype=np.float32) for _ in range(2))
    np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_each_miss_is_a_located_warning_saying_why(tmp_path: Path) -> None:
    text = MM.format(m=64, k=64, n=64, a="a")
    db = tmp_path / "db.jsonl"
    append_record(db, _record("0000000000000000"))
    with pytest.warns(TuningWarning) as caught:
        dlc.compile(text, filename="mm.dl", tuning_db=db)
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("mm.dl:6:10: warning: schedule: no tuning record used for this nest")
    assert "(dot 64x64 r64 f32)" in message and "not in" in message
    assert message.endswith("^")


def test_a_record_that_does_not_fit_is_reported(tmp_path: Path) -> None:
    text = MM.format(m=64, k=64, n=64, a="a")
    db = tmp_path / "db.jsonl"
    append_record(db, _record(_dot_key(text), schedule="#schedule.nest<tile [d5 = [4]]>"))
    with pytest.warns(TuningWarning, match="the record does not fit this nest: tile: no axis d5"):
        mod = dlc.compile(text, tuning_db=db)
        assert "d5" not in mod.ir("tensor")
    append_record(db, _record(_dot_key(text), schedule="#schedule.nest<nonsense>", seconds=1e-6))
    with pytest.warns(TuningWarning, match="its schedule does not parse"):
        dlc.compile(text, tuning_db=db)


def test_tuned_nest_leaves_its_fusion_group(tmp_path: Path) -> None:
    """The 64x256x10 dot of W3 is in a group by default; a record takes it out."""
    text = Path("benchmarks/mlp_b64.dl").read_text()
    dots = [op for op in _computes(text) if op.reduction_extents == (256,)]
    db = tmp_path / "db.jsonl"
    schedule = "#schedule.nest<interchange [d0, r0, d1], parallel [d0]>"
    append_record(db, _record(workload_key(dots[0]), schedule=schedule))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TuningWarning)
        tuned = dlc.compile(text, tuning_db=db)
        assert schedule.removesuffix(">") + "> {" in tuned.ir("tensor")
    rng = np.random.default_rng(1)
    args = [
        rng.standard_normal(s, dtype=np.float32)
        for s in ((64, 784), (784, 256), (1, 256), (256, 10), (1, 10))
    ]
    np.testing.assert_allclose(tuned.mlp(*args), dlc.compile(text).mlp(*args), rtol=1e-5, atol=1e-6)


def test_api_checks_the_tuning_db_type() -> None:
    with pytest.raises(TypeError, match="tuning_db must be None or a path, got int"):
        dlc.compile(MM.format(m=4, k=4, n=4, a="a"), tuning_db=3)  # type: ignore[arg-type]


def test_dlc_opt_and_dlc_run_take_a_tuning_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = MM.format(m=64, k=64, n=64, a="a")
    source = tmp_path / "mm.dl"
    source.write_text(text)
    db = tmp_path / "db.jsonl"
    db.write_text("{corrupt\n")
    spec = "lower-graph-to-tensor,schedule"
    assert dlc_opt.main([str(source), "-p", spec, "--tuning-db", str(db), "--pass-statistics"]) == 0
    err = capsys.readouterr().err
    assert f"{db}:1: warning: corrupt tuning record ignored" in err
    assert f"{source}:6:10: warning: schedule: no tuning record used" in err
    assert "schedule: contractions without a usable tuning record: 1" in err
    append_record(db, _record(_dot_key(text)))
    assert dlc_opt.main([str(source), "-p", spec, "--tuning-db", str(db)]) == 0
    assert TUNED.removesuffix(">") in capsys.readouterr().out
    assert dlc_opt.main([str(source), "-t", "llvm", "--tuning-db", str(db), "-o", "/dev/null"]) == 0
    assert dlc_run.main([str(source), "--random-inputs", "--tuning-db", str(db)]) == 0
    assert "output 0" in capsys.readouterr().out


def test_a_fastest_default_record_keeps_the_policy(tmp_path: Path) -> None:
    text = MM.format(m=64, k=64, n=64, a="a")
    key = _dot_key(text)
    db = tmp_path / "db.jsonl"
    append_record(db, _record(key, seconds=2e-3))
    append_record(db, _record(key, schedule="default", seconds=1e-3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningWarning)  # kept on purpose: no warning
        mod = dlc.compile(text, tuning_db=db)
        assert TUNED.removesuffix(">") not in mod.ir("tensor")
    stats = mod.pass_statistics()["schedule"]
    assert stats["nests the tuning database leaves to the default policy"] == 1
    assert "nests scheduled from the tuning database" not in stats


def test_old_and_newer_record_formats(tmp_path: Path) -> None:
    """A format-1 record (no `format` field, features before `pack` and `epilogue`)
    still applies and trains the model with its features extended; a record of a
    newer format is ignored with a warning, never an error."""
    from dlc.tuner.features import FEATURE_COUNT, FORMAT1_FEATURE_COUNT, training_features

    text = MM.format(m=64, k=64, n=64, a="a")
    old = json.loads(_record(_dot_key(text), features=[0.5] * FORMAT1_FEATURE_COUNT).to_json())
    del old["format"]
    packed = dict(old, schedule=TUNED.removesuffix(">") + ", pack [1]>", seconds=2e-3)
    db = tmp_path / "db.jsonl"
    db.write_text(json.dumps(old) + "\n" + json.dumps(packed) + "\n")
    newer = json.loads(_record(_dot_key(text), seconds=1e-6).to_json())
    with open(db, "a") as f:
        f.write(json.dumps(dict(newer, format=3)) + "\n")
    with pytest.warns(
        TuningWarning,
        match=r"db.jsonl:3: warning: 1 tuning record\(s\) of a newer record format ignored",
    ):
        loaded = TuningDatabase.load(db)
    first, second = loaded.all_records
    assert first.format == 1 and loaded.best[(first.key, first.target)] == first
    extended = [training_features(r) for r in (first, second)]
    assert [len(f or []) for f in extended] == [FEATURE_COUNT] * 2
    assert extended[0][-2:] == [0.0, 0.0] and extended[1][-2:] == [1.0, 0.0]  # type: ignore[index]
    with pytest.warns(TuningWarning, match="newer record format"):
        mod = dlc.compile(text, tuning_db=db)
    assert TUNED.removesuffix(">") in mod.ir("tensor")
    with pytest.raises(ValueError, match="field 'format' is not a positive int"):
        Record.from_json(json.dumps(dict(old, format="2")))
