"""Fused groups and lone element-wise or reduction nests as tunable units
(dlc/passes/tensor/schedule_tuned_groups.py, dlc/tuner/space_groups.py): group keys,
records of member schedules applied as a whole (fused or apart) and matching the
reference interpreter, a located miss per group saying why, records that do not fit,
the search space's points accepted by the lowering, and a small tuning run of a
LayerNorm + GELU group found, recorded and applied."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc import pipeline
from dlc.dialects import tensor
from dlc.parser import parse_module
from dlc.passes.tensor.schedule_records import (
    Record,
    TuningDatabase,
    TuningWarning,
    append_record,
    group_key,
)
from dlc.passes.tensor.schedule_tuned_groups import tunable_units
from dlc.semantics.interpreter import run_function
from dlc.target import Target
from dlc.tuner.features_groups import GROUP_FEATURE_COUNT
from dlc.tuner.model import propose_random
from dlc.tuner.program import Program

LNG = """module "lng"
stage raw

func @lng: (<{r} x 64 x f32>, <1 x 64 x f32>, <1 x 64 x f32>) -> <{r} x 64 x f32> {{
'entry(%x: <{r} x 64 x f32>, %gamma: <1 x 64 x f32>, %beta: <1 x 64 x f32>):
    %sum = reduce %x: <{r} x 64 x f32> by add init 0.0: f32 along 1
    %mean = divide %sum: <{r} x f32>, 64.0: f32
    %mean2 = padShape %mean: <{r} x f32> at 1
    %xc = subtract %x: <{r} x 64 x f32>, %mean2: <{r} x 1 x f32>
    %sq = multiply %xc: <{r} x 64 x f32>, %xc: <{r} x 64 x f32>
    %sqsum = reduce %sq: <{r} x 64 x f32> by add init 0.0: f32 along 1
    %var = divide %sqsum: <{r} x f32>, 64.0: f32
    %var_eps = add %var: <{r} x f32>, 1e-05: f32
    %rstd = rsqrt %var_eps: <{r} x f32>
    %rstd2 = padShape %rstd: <{r} x f32> at 1
    %norm = multiply %xc: <{r} x 64 x f32>, %rstd2: <{r} x 1 x f32>
    %scaled = multiply %norm: <{r} x 64 x f32>, %gamma: <1 x 64 x f32>
    %y = add %scaled: <{r} x 64 x f32>, %beta: <1 x 64 x f32>
    %t = tanh %y: <{r} x 64 x f32>
    %gelu = multiply %y: <{r} x 64 x f32>, %t: <{r} x 64 x f32>
    return %gelu: <{r} x 64 x f32>
}}
"""

SOFTMAX = """module "sm"
stage raw

func @sm: (<16 x 40 x f32>) -> <16 x 40 x f32> {
'entry(%x: <16 x 40 x f32>):
    %m = reduce %x: <16 x 40 x f32> by max init -inf: f32 along 1
    %m2 = padShape %m: <16 x f32> at 1
    %s = subtract %x: <16 x 40 x f32>, %m2: <16 x 1 x f32>
    %e = exp %s: <16 x 40 x f32>
    %z = reduce %e: <16 x 40 x f32> by add init 0.0: f32 along 1
    %z2 = padShape %z: <16 x f32> at 1
    %p = divide %e: <16 x 40 x f32>, %z2: <16 x 1 x f32>
    return %p: <16 x 40 x f32>
}
"""

AXPY = """module "axpy"
stage raw

func @axpy: (<{n} x f32>, <{n} x f32>) -> <{n} x f32> {{
'entry(%x: <{n} x f32>, %y: <{n} x f32>):
    %a = multiply %x: <{n} x f32>, 3.0: f32
    %b = add %a: <{n} x f32>, %{v}: <{n} x f32>
    return %b: <{n} x f32>
}}
"""

CPU = Target.host().cpu


def _units(text: str) -> list[list[tensor.ComputeOp]]:
    program = Program.load(text, "t.dl", None, pipeline.Options())
    (computes,) = program.scheduled_blocks("")  # the units a compile sees
    return tunable_units(computes)


def _record(key: str, schedule: str, seconds: float = 1e-3) -> Record:
    return Record(key=key, target=CPU, schedule=schedule, seconds=seconds)


def _check(text: str, name: str, mod: object, shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    want = run_function(parse_module(text), name, args)
    np.testing.assert_allclose(getattr(mod, name)(*args), want, rtol=2e-5, atol=2e-5)


def test_units_and_keys() -> None:
    (group,) = _units(LNG.format(r=16))
    assert len(group) == 5  # the policy's one fused nest over the rows
    (single,) = _units(AXPY.format(n=256, v="y"))
    assert len(single) == 1  # a lone element-wise nest (after fuse: one compute)
    assert group_key(single) == group_key(_units(AXPY.format(n=256, v="y").replace("%x", "%u"))[0])
    assert group_key(single) != group_key(_units(AXPY.format(n=512, v="y"))[0])
    assert group_key(single) != group_key(_units(AXPY.format(n=256, v="x"))[0])  # wiring
    assert _units(AXPY.format(n=8, v="y")) == []  # fewer than 64 points: not worth it


def _lng_schedules(fused: bool) -> str:
    """Member schedules of LNG's group: the last member unrolled by 4; apart, the
    mean computed as vectors of 4 (tanh does not vectorize)."""
    group = ", group 0 at 1" if fused else ""
    plain = f"#schedule.nest<parallel [d0]{group}>"
    unrolled = "tile [d1 = [4]], interchange [d0, d1.0, d1.1], unroll [d1.1]"
    mean = plain
    if not fused:
        mean = "#schedule.nest<tile [d0 = [8]], interchange [d0.0, d0.1], unroll [d0.1], vectorize d0.1 x 4>"
    last = f"#schedule.nest<{unrolled}, parallel [d0]{group}>"
    return f"[{plain}, {mean}, {plain}, {plain}, {last}]"


@pytest.mark.parametrize("fused", [True, False])
def test_a_group_record_applies_as_a_whole(fused: bool, tmp_path: Path) -> None:
    text = LNG.format(r=16)
    (group,) = _units(text)
    db = tmp_path / "db.jsonl"
    append_record(db, _record(group_key(group), _lng_schedules(fused)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TuningWarning)  # the sum of squares: a contraction
        mod = dlc.compile(text, tuning_db=db)
    stats = mod.pass_statistics()["schedule"]
    assert stats["groups and lone nests scheduled from the tuning database"] == 1
    ir = mod.ir("tensor")
    assert ("unroll [d1.1], group" in ir) == fused
    assert ("vectorize d0.1 x 4" in ir) != fused
    _check(text, "lng", mod, [(16, 64), (1, 64), (1, 64)])


def test_the_profile_says_which_kernels_a_record_scheduled(tmp_path: Path) -> None:
    """End to end: a module compiled with a tuning database and profile=True marks the
    kernels a record scheduled as tuned (the table's "yes"); without the database none."""
    text = LNG.format(r=16)
    (group,) = _units(text)
    db = tmp_path / "db.jsonl"
    append_record(db, _record(group_key(group), _lng_schedules(True)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TuningWarning)
        tuned = dlc.compile(text, tuning_db=db, profile=True)
        plain = dlc.compile(text, profile=True)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in [(16, 64), (1, 64), (1, 64)]]
    tuned.lng(*args)
    plain.lng(*args)
    with_db, without = tuned.profile(), plain.profile()
    assert with_db.rows and all(row.kernel["tuned"] for row in with_db.rows)
    assert without.rows and not any(row.kernel["tuned"] for row in without.rows)
    assert " yes " in with_db.table() and " yes " not in without.table()


def test_a_fused_member_as_vectors(tmp_path: Path) -> None:
    """Without tanh the last member vectorizes inside the group (the earlier members'
    registers broadcast to the lanes), and the space offers it fused."""
    text = LNG.format(r=16).replace("    %t = tanh %y: <16 x 64 x f32>\n", "")
    text = text.replace("%t: <16 x 64", "%y: <16 x 64")
    (group,) = _units(text)
    last = "tile [d1 = [16]], interchange [d0, d1.0, d1.1], unroll [d1.1], vectorize d1.1 x 8"
    schedules = ["#schedule.nest<group 0 at 1>"] * 4 + [f"#schedule.nest<{last}, group 0 at 1>"]
    db = tmp_path / "db.jsonl"
    append_record(db, _record(group_key(group), "[" + ", ".join(schedules) + "]"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TuningWarning)  # the sum of squares: a contraction
        mod = dlc.compile(text, tuning_db=db)
    assert "vectorize d1.1 x 8, group" in mod.ir("tensor")
    _check(text, "lng", mod, [(16, 64), (1, 64), (1, 64)])
    program = Program.load(text, "t.dl", None, pipeline.Options())
    (space,) = program.group_spaces(Target.host(), "")
    fused_vectors = space.schedule(tuple(1 if k == "lanes" else 0 for k in space.knobs))
    assert fused_vectors is not None and fused_vectors.members[-1].vector is not None


def test_each_group_without_a_record_is_a_located_warning(tmp_path: Path) -> None:
    text = SOFTMAX + AXPY.format(n=256, v="y").split("stage raw", 1)[1]
    db = tmp_path / "db.jsonl"
    append_record(db, _record("0000000000000000", "default"))
    with pytest.warns(TuningWarning) as caught:
        mod = dlc.compile(text, filename="sm.dl", tuning_db=db)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2, messages
    assert messages[0].startswith(
        "sm.dl:20:10: warning: schedule: no tuning record used for this nest (map 256 f32): key "
    )
    assert messages[1].startswith(
        "sm.dl:6:10: warning: schedule: no tuning record used for this fused group "
        "(group of 4: map 16x40 f32): key "
    )
    assert all("; the default policy schedules it" in m for m in messages)
    stats = mod.pass_statistics()["schedule"]
    assert stats["groups and lone nests without a usable tuning record"] == 2


@pytest.mark.parametrize(
    ("schedule", "why"),
    [
        ("#schedule.nest<>", "its schedule does not parse (not an array of #schedule.nest"),
        ("[#schedule.nest<>]", "the record does not fit: 1 member schedules for 4 nests"),
        (
            "[#schedule.nest<group 0 at 1>, #schedule.nest<>, #schedule.nest<>, #schedule.nest<>]",
            "the record does not fit: some members fused and some not",
        ),
        (
            "[" + ", ".join(["#schedule.nest<tile [d5 = [2]]>"] * 4) + "]",
            "the record does not fit: member 0: tile: no axis d5",
        ),
        (
            "[#schedule.nest<group 0 at 1>, #schedule.nest<interchange [d1, d0], group 0 at 1>, "
            "#schedule.nest<group 0 at 1>, #schedule.nest<group 0 at 1>]",
            "the record does not fit: group 0: the first 1 loops must be d0 ... d0, untiled",
        ),
    ],
)
def test_a_group_record_that_does_not_fit(schedule: str, why: str, tmp_path: Path) -> None:
    (group,) = _units(SOFTMAX)
    db = tmp_path / "db.jsonl"
    append_record(db, _record(group_key(group), schedule))
    with pytest.warns(TuningWarning, match="fused group") as caught:
        mod = dlc.compile(SOFTMAX, tuning_db=db)
    assert why in str(caught[0].message)
    _check(SOFTMAX, "sm", mod, [(16, 40)])  # the policy's schedules, unchanged


def test_a_fastest_default_record_keeps_the_group(tmp_path: Path) -> None:
    (group,) = _units(SOFTMAX)
    db = tmp_path / "db.jsonl"
    append_record(db, _record(group_key(group), _lng_schedules(False), seconds=2e-3))
    append_record(db, _record(group_key(group), "default"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningWarning)
        mod = dlc.compile(SOFTMAX, tuning_db=db)
    stats = mod.pass_statistics()["schedule"]
    assert stats["groups and lone nests the tuning database leaves to the default policy"] == 1


def test_group_points_are_schedules_the_lowering_accepts(tmp_path: Path) -> None:
    program = Program.load(LNG.format(r=16), "t.dl", None, pipeline.Options())
    (space,) = program.group_spaces(Target.host(), "")
    assert {"fuse", "parallel", "unroll", "unroll_reduce"} <= set(space.knobs)
    assert space.kind == "group" and len(space.members) == 5
    points = propose_random(space, 10, set(), random.Random(4))
    assert len(points) == 10
    for n, point in enumerate(points):
        schedule = space.schedule(point)
        assert schedule is not None
        db = tmp_path / f"{n}.jsonl"
        append_record(db, _record(space.info.key, str(schedule)))
        assert program.validate(str(db)) is None, schedule
        assert space.parse(str(schedule)) == schedule
        feats = space.features(schedule)
        assert len(feats) == GROUP_FEATURE_COUNT and all(np.isfinite(feats))
    assert space.knobs["fuse"][0] is True and space.knobs["lanes"][1] > 0
    fused_vectors = tuple(1 if k == "lanes" else 0 for k in space.knobs)
    assert space.schedule(fused_vectors) is None  # fused, only tanh's member has loops


def test_a_small_tuning_run_of_a_group(tmp_path: Path) -> None:
    pytest.importorskip("lightgbm")
    source = tmp_path / "lng.dl"
    text = LNG.format(r=32)
    source.write_text(text)
    db = tmp_path / "tune.jsonl"
    report = dlc.tune(source, trials=3, batch=3, db=db, budget=0.01, progress=False, nests="groups")
    (nest,) = report.nests
    assert nest.summary == "group of 5: map 32x64 f32" and nest.best() is not None
    record, _ = TuningDatabase.load(db).lookup(nest.key, CPU)
    assert record is not None and record.seconds is not None
    assert record.schedule == "default" or record.schedule.startswith("[#schedule.nest<")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TuningWarning)
        mod = dlc.compile(text, tuning_db=db)
    assert not [w for w in caught if "group" in str(w.message)]  # only the contraction
    _check(text, "lng", mod, [(32, 64), (1, 64), (1, 64)])
    assert "group of 5: map 32x64 f32" in report.table()


def test_evaluate_a_database_of_nests_and_groups(tmp_path: Path) -> None:
    """Records of both kinds in one database: each model trains on its own kind."""
    pytest.importorskip("lightgbm")
    from dlc.tuner.evaluate import evaluate
    from dlc.tuner.features import FEATURE_COUNT

    db = tmp_path / "db.jsonl"
    rng = random.Random(0)
    for key, length in (
        ("g1", GROUP_FEATURE_COUNT),
        ("g2", GROUP_FEATURE_COUNT),
        ("n1", FEATURE_COUNT),
    ):
        for _ in range(12):
            feats = [rng.random() for _ in range(length)]
            schedule = "[#schedule.nest<>]" if key[0] == "g" else "#schedule.nest<>"
            record = _record(key, schedule, seconds=1e-3 / (1 + feats[0]))
            append_record(db, Record(**{**record.__dict__, "features": feats}))
    rows = {row.key: row for row in evaluate(str(db), CPU)}
    assert set(rows) == {"g1", "g2", "n1"}
    assert rows["g1"].transfer is not None and rows["g1"].transfer > 0.3
    assert rows["n1"].transfer is None  # no other contraction to learn from
