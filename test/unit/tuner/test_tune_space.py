"""Search spaces, features and the cost model of the tuner (dlc/tuner/space.py,
features.py, model.py): points become schedules the verifier and the lowering accept
(or are excluded up front), features have a fixed length and see the knobs, the
lambdarank model learns a ranking, annealing proposes unvisited valid points."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from dlc import pipeline
from dlc.passes.tensor.schedule_records import Record, append_record
from dlc.target import Target
from dlc.tuner.features import FEATURE_COUNT, features
from dlc.tuner.model import CostModel, propose_model, propose_random, spearman
from dlc.tuner.program import Program

pytest.importorskip("lightgbm")

MM = """module "mm"
stage raw

func @mm: (<48 x 64 x f32>, <64 x 80 x f32>) -> <48 x 80 x f32> {
'entry(%a: <48 x 64 x f32>, %b: <64 x 80 x f32>):
    %c = dot %a: <48 x 64 x f32>, %b: <64 x 80 x f32>
    return %c: <48 x 80 x f32>
}
"""

CONV = """module "conv"
stage raw

func @conv: (<1 x 8 x 18 x 18 x f32>, <16 x 8 x 3 x 3 x f32>) -> <1 x 16 x 16 x 16 x f32> {
'entry(%x: <1 x 8 x 18 x 18 x f32>, %k: <16 x 8 x 3 x 3 x f32>):
    %y = convolve %x: <1 x 8 x 18 x 18 x f32> kernel %k: <16 x 8 x 3 x 3 x f32> strides 1, 1
    return %y: <1 x 16 x 16 x 16 x f32>
}
"""


def _program(text: str) -> Program:
    return Program.load(text, "t.dl", None, pipeline.Options())


def _valid(program: Program, key: str, schedule: str, tmp_path: Path) -> str | None:
    db = tmp_path / f"{abs(hash(schedule))}.jsonl"
    append_record(db, Record(key=key, target=Target.host().cpu, schedule=schedule, seconds=1.0))
    return program.validate(str(db))


@pytest.mark.parametrize(("text", "kind"), [(MM, "dot"), (CONV, "conv")])
def test_points_are_schedules_the_lowering_accepts(text: str, kind: str, tmp_path: Path) -> None:
    program = _program(text)
    (space,) = program.spaces(Target.host())
    assert space.kind == kind and space.size > 100
    rng = random.Random(3)
    points = propose_random(space, 12, set(), rng)
    assert len(points) == 12 and len(set(points)) == 12
    rejected = []
    for point in points:
        schedule = space.schedule(point)
        assert schedule is not None
        assert schedule.check(space.info.domain, space.info.reductions) is None
        why = _valid(program, space.info.key, str(schedule), tmp_path)
        if why is not None:
            rejected.append(why)
        feats = features(space.info, schedule)
        assert len(feats) == FEATURE_COUNT and all(np.isfinite(feats))
    assert len(rejected) <= 4, rejected  # the lowering's own checks catch only a few


def test_excluded_points_and_lowering_rejections(tmp_path: Path) -> None:
    program = _program(MM)
    (space,) = program.spaces(Target.host())
    names = list(space.knobs)
    big = tuple(len(space.knobs[k]) - 1 if k in ("mr", "nr") else 0 for k in names)
    assert space.schedule(big) is None  # 16 rows x 64 columns: past the register budget
    bad = "#schedule.nest<vectorize r0 x 16>"
    assert "vectorize r0" in (_valid(program, space.info.key, bad, tmp_path) or "")


def test_features_see_the_knobs() -> None:
    program = _program(MM)
    (space,) = program.spaces(Target.host())
    rng = random.Random(0)
    a, b = propose_random(space, 2, set(), rng)
    fa, fb = (features(space.info, space.schedule(p)) for p in (a, b))  # type: ignore[arg-type]
    assert fa[:3] == fb[:3]  # the nest
    assert fa != fb  # the schedules


def test_model_learns_a_ranking_and_guides_annealing() -> None:
    program = _program(MM)
    (space,) = program.spaces(Target.host())
    rng = random.Random(1)
    points = propose_random(space, 60, set(), rng)
    rows = [features(space.info, space.schedule(p)) for p in points]  # type: ignore[arg-type]
    # a synthetic cost: bigger register tiles and vectors are faster
    cost = [1.0 / (1 + r[3] + r[4]) for r in rows]
    model = CostModel()
    assert not model.fit({"w": list(zip(rows[:3], cost[:3], strict=True))})  # too few
    assert model.fit({"w": list(zip(rows[:40], cost[:40], strict=True))})
    rho = spearman(model.predict(rows[40:]), [-c for c in cost[40:]])
    assert rho > 0.5

    def score(ps: list[tuple[int, ...]]) -> np.ndarray:
        return model.predict([features(space.info, space.schedule(p)) for p in ps])  # type: ignore[arg-type]

    visited = set(points)
    proposed = propose_model(space, score, 8, visited, rng, epsilon=0.0, steps=20)
    assert len(proposed) == 8 and not visited & set(proposed)
    assert all(space.schedule(p) is not None for p in proposed)
    seeded = propose_model(space, score, 8, visited, rng, starts=points[:4], steps=5)
    assert len(seeded) == 8 and not visited & set(seeded)


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_evaluate_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Transfer and online rho from records alone (`dlc-tune --evaluate`), on two
    workloads whose synthetic times follow the same law."""
    from dlc.cli import dlc_tune
    from dlc.tuner.evaluate import evaluate

    db = tmp_path / "db.jsonl"
    for text in (MM, MM.replace("80", "96")):
        (space,) = _program(text).spaces(Target.host())
        for point in propose_random(space, 30, set(), random.Random(5)):
            feats = features(space.info, space.schedule(point))  # type: ignore[arg-type]
            seconds = 1e-3 / (1 + feats[3] + feats[4])
            append_record(
                db,
                Record(space.info.key, Target.host().cpu, "", seconds, features=feats),
            )
    rows = evaluate(str(db), Target.host().cpu)
    assert len(rows) == 2
    for row in rows:
        assert row.records == 30
        assert row.transfer is not None and row.transfer > 0.5
        assert row.online is not None and row.online > 0.5
    assert dlc_tune.main(["--evaluate", "--db", str(db)]) == 0
    assert "transfer rho" in capsys.readouterr().out
    assert dlc_tune.main(["--evaluate", "--db", str(tmp_path / "none.jsonl")]) == 1
    assert "no workload of this CPU with enough measured records" in capsys.readouterr().err
    assert dlc_tune.main(["--db", str(db)]) == 1
    assert "dlc-tune: error: the .dl file to tune is missing" in capsys.readouterr().err


def test_pack_is_a_knob_of_matrix_products(tmp_path: Path) -> None:
    """Points with `pack` on pack B (input 1); the tuned record is used as it is."""
    program = _program(MM)
    (space,) = program.spaces(Target.host())
    assert space.knobs["pack"] == [False, True] and space.packed == 1
    point = tuple(1 if k == "pack" else 0 for k in space.knobs)
    schedule = space.schedule(point)
    assert schedule is not None and schedule.packed == (1,)
    assert _valid(program, space.info.key, str(schedule), tmp_path) is None
    (conv,) = _program(CONV).spaces(Target.host())
    assert "pack" not in conv.knobs


MLP = """module "mlp"
stage raw

func @mlp: (<48 x 64 x f32>, <64 x 80 x f32>, <1 x 80 x f32>) -> <48 x 80 x f32> {
'entry(%x: <48 x 64 x f32>, %w: <64 x 80 x f32>, %b: <1 x 80 x f32>):
    %y = dot %x: <48 x 64 x f32>, %w: <64 x 80 x f32>
    %z = add %y: <48 x 80 x f32>, %b: <1 x 80 x f32>
    %r = max %z: <48 x 80 x f32>, 0.0: f32
    return %r: <48 x 80 x f32>
}
"""


def test_epilogue_is_a_knob_and_features_see_it(tmp_path: Path) -> None:
    """A product with a bias and relu after it: `epilogue` on or off; the features
    see `epilogue` and `pack`; a tuned record with an epilogue computes the bias and
    relu at the register tile and matches the reference interpreter."""
    import dlc
    from dlc.parser import parse_module
    from dlc.semantics.interpreter import run_function

    program = _program(MLP)
    (space,) = program.spaces(Target.host())
    assert space.knobs["epilogue"] == [1, 0]
    point = tuple(1 if k == "pack" else 0 for k in space.knobs)  # pack on, epilogue 1
    schedule = space.schedule(point)
    assert schedule is not None and schedule.epilogue == 1 and schedule.packed
    off = space.schedule(tuple(1 if k in ("pack", "epilogue") else 0 for k in space.knobs))
    assert off is not None and off.epilogue == 0
    assert features(space.info, schedule)[-2:] == [1.0, 1.0]
    assert features(space.info, off)[-2:] == [1.0, 0.0]
    db = tmp_path / "db.jsonl"
    assert _valid(program, space.info.key, str(schedule), tmp_path) is None
    append_record(db, Record(space.info.key, Target.host().cpu, str(schedule), 1e-3))
    mod = dlc.compile(MLP, tuning_db=db)
    assert "epilogue 1" in mod.ir("tensor")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((48, 64), (64, 80), (1, 80))]
    want = run_function(parse_module(MLP), "mlp", args)
    np.testing.assert_allclose(mod.mlp(*args), want, rtol=1e-4, atol=1e-4)
    too_many = str(schedule).replace("epilogue 1", "epilogue 2")
    assert "epilogue 2: fewer computes after it qualify" in (
        _valid(program, space.info.key, too_many, tmp_path) or ""
    )
