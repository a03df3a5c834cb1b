"""Tuning records the code generator cannot carry out (dlc/analysis/tensor_nest_plan.py,
asked by dlc/passes/tensor/schedule_tuned.py and schedule_tuned_groups.py): a record is
not something the user wrote, so each `vectorize`, `pack`, `epilogue` or unrolling the
lowering refuses is a located `TuningWarning` naming the record and the nest, the nest
keeps the default policy's schedule, and the compile matches the reference
interpreter. A feasible record still applies; a schedule written in the IR keeps its
located error (test_schedule.py, test_unsupported_schedule_primitives_...)."""

from __future__ import annotations

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
    TuningWarning,
    append_record,
    group_key,
    workload_key,
)
from dlc.passes.tensor.schedule_tuned_groups import tunable_units
from dlc.semantics.interpreter import run_function
from dlc.target import Target
from dlc.tuner.program import Program

MM = """module "mm"
stage raw

func @mm: (<{n} x {n} x {dt}>, <{n} x {n} x {dt}>) -> <{n} x {n} x {dt}> {{
'entry(%a: <{n} x {n} x {dt}>, %b: <{n} x {n} x {dt}>):
    %c = dot %a: <{n} x {n} x {dt}>, %b: <{n} x {n} x {dt}>
    %d = add %c: <{n} x {n} x {dt}>, %a: <{n} x {n} x {dt}>
    return %d: <{n} x {n} x {dt}>
}}
"""

MAP = """module "m"
stage raw

func @m: (<256 x f32>) -> <256 x f32> {
'entry(%x: <256 x f32>):
    %t = tanh %x: <256 x f32>
    %y = multiply %t: <256 x f32>, %x: <256 x f32>
    return %y: <256 x f32>
}
"""

TILE = "tile [d0 = [4], d1 = [16]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1]"
WHERE = "not supported by the code generator yet: "


def _scheduled(text: str) -> list[tensor.ComputeOp]:
    module = pipeline.run(parse_module(text), pipeline.steps(pipeline.Options(), stop="tensor"))
    return [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]


def _database(tmp_path: Path, key: str, schedule: str) -> Path:
    db = tmp_path / "db.jsonl"
    append_record(db, Record(key=key, target=Target.host().cpu, schedule=schedule, seconds=1e-3))
    return db


def _matches_reference(text: str, name: str, mod: object, shapes: list, dt: str) -> None:
    rng = np.random.default_rng(0)
    numpy_dt = {"f32": np.float32, "i32": np.int32}[dt]
    args = [(rng.standard_normal(s) * 4).astype(numpy_dt) for s in shapes]
    want = run_function(parse_module(text), name, args)
    np.testing.assert_allclose(getattr(mod, name)(*args), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("n", "dt", "schedule", "why"),
    [
        (
            64,
            "f32",
            "vectorize d1 x 8",
            WHERE + "vectorize d1: only the innermost level of an axis",
        ),
        (64, "f32", f"{TILE}, vectorize d0.1 x 8", WHERE + "vectorize d0.1: tensor.read depends"),
        (64, "i32", f"{TILE}, vectorize d1.1 x 8", WHERE + "vectorize d1.1: only float results"),
        (
            64,
            "f32",
            f"{TILE}, pack [0]",
            WHERE + "pack [0]: the packed operand varies along the rows",
        ),
        (64, "f32", f"{TILE}, pack [0, 1]", WHERE + "pack [0, 1]: one operand at a time"),
        (64, "f32", "pack [1]", WHERE + "pack [1]: the columns' innermost loop must be in the"),
        (
            128,
            "f32",
            "interchange [r0, d0, d1], unroll [d0, d1]",
            "schedule: unrolling makes 16384 copies (at most 4096)",
        ),
        (
            64,
            "f32",
            "interchange [d0, r0, d1], epilogue 1",
            "schedule: epilogue: the accumulators must be in registers",
        ),
    ],
)
def test_an_unlowerable_contraction_record_is_a_warning(
    tmp_path: Path, n: int, dt: str, schedule: str, why: str
) -> None:
    text = MM.format(n=n, dt=dt)
    dot = next(op for op in _scheduled(text) if op.reduction_extents)
    key = workload_key(dot)
    db = _database(tmp_path, key, f"#schedule.nest<{schedule}>")
    with pytest.warns(TuningWarning) as caught:
        mod = dlc.compile(text, filename="mm.dl", tuning_db=db)
    (message,) = [str(w.message) for w in caught if key in str(w.message)]
    assert message.startswith(
        f"mm.dl:6:10: warning: schedule: no tuning record used for this nest (dot {n}x{n} r{n} {dt}): "
        f"the record does not fit this nest: {why}"
    ), message
    assert f"(record {key} of {db}); the default policy schedules it" in message
    assert schedule not in mod.ir("tensor")
    _matches_reference(text, "mm", mod, [(n, n), (n, n)], dt)


def test_a_feasible_record_still_applies(tmp_path: Path) -> None:
    text = MM.format(n=64, dt="f32")
    dot = next(op for op in _scheduled(text) if op.reduction_extents)
    schedule = f"{TILE}, vectorize d1.1 x 8, pack [1], epilogue 1"
    db = _database(tmp_path, workload_key(dot), f"#schedule.nest<{schedule}>")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TuningWarning)
        mod = dlc.compile(text, tuning_db=db)
    assert [str(w.message) for w in caught] == []
    assert schedule in mod.ir("tensor")
    assert mod.pass_statistics()["schedule"]["nests scheduled from the tuning database"] == 1
    _matches_reference(text, "mm", mod, [(64, 64), (64, 64)], "f32")


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

FUSED = ["group 0 at 1 internal", "group 0 at 1 feeds", "group 0 at 1 internal"]


@pytest.mark.parametrize(
    ("text", "schedules", "why"),
    [
        (MAP, ["vectorize d0 x 8"], "member 0: " + WHERE + "vectorize d0: only the innermost"),
        (
            SOFTMAX,
            [*FUSED, "vectorize d1 x 8, group 0 at 1"],
            "member 3: " + WHERE + "vectorize d1: only the innermost level of an axis",
        ),
    ],
)
def test_an_unlowerable_group_record_is_a_warning(
    tmp_path: Path, text: str, schedules: list[str], why: str
) -> None:
    """A lone nest (MAP's tanh) and a fused group (SOFTMAX's, as one nest over the
    rows) whose record the code generator cannot carry out."""
    program = Program.load(text, "t.dl", None, pipeline.Options())
    (computes,) = program.scheduled_blocks("")  # the units a compile sees
    unit = tunable_units(computes)[0]
    key = group_key(unit)
    record = "[" + ", ".join(f"#schedule.nest<{s}>" for s in schedules) + "]"
    db = _database(tmp_path, key, record)
    with pytest.warns(TuningWarning) as caught:
        mod = dlc.compile(text, filename="m.dl", tuning_db=db)
    (message,) = [str(w.message) for w in caught if key in str(w.message)]
    assert f"the record does not fit: {why}" in message, message
    assert f"(record {key} of {db}); the default policy schedules it" in message
    assert schedules[-1] not in mod.ir("tensor")
    name = "m" if text is MAP else "sm"
    _matches_reference(text, name, mod, [(256,)] if text is MAP else [(16, 40)], "f32")
