"""Measurement that cannot take the tuner down (dlc/tuner/measure.py): a candidate that
crashes, hangs, computes a wrong result or does not compile is a failed result, never
an exception of the tuner and never a time; the tolerance check itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dlc import pipeline
from dlc.passes.tensor.schedule_records import Record, append_record
from dlc.target import Target
from dlc.tuner.measure import Job, measure, mismatch
from dlc.tuner.program import Program

MM = """module "mm"
stage raw

func @mm: (<32 x 32 x f32>, <32 x 32 x f32>) -> <32 x 32 x f32> {
'entry(%a: <32 x 32 x f32>, %b: <32 x 32 x f32>):
    %c = dot %a: <32 x 32 x f32>, %b: <32 x 32 x f32>
    return %c: <32 x 32 x f32>
}
"""


def _reference(tmp_path: Path) -> str:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 32), dtype=np.float32)
    b = rng.standard_normal((32, 32), dtype=np.float32)
    path = tmp_path / "reference.npz"
    np.savez(path, out0=a @ b)
    return str(path)


def _job(tmp_path: Path, **changes: object) -> Job:
    fields: dict[str, object] = {
        "source": MM,
        "filename": "mm.dl",
        "entry": "mm",
        "db": None,
        "schedule": "",
        "seed": 0,
        "reference": _reference(tmp_path),
        "budget": 0.01,
        "timeout": 60.0,
    }
    fields.update(changes)
    return Job(**fields)  # type: ignore[arg-type]


def test_a_good_candidate_is_timed(tmp_path: Path) -> None:
    result = measure(_job(tmp_path))
    assert result.ok and result.seconds is not None and 0 < result.seconds < 1


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        ("crash", "failed: crashed (SIGSEGV)"),
        ("wrong", "failed: wrong result: output 0 differs by 1 (tolerance"),
    ],
)
def test_a_broken_candidate_is_a_failure(tmp_path: Path, fault: str, status: str) -> None:
    result = measure(_job(tmp_path, schedule="#schedule.nest<fma>", fault=fault))
    assert result.status.startswith(status) and result.seconds is None


def test_a_hanging_candidate_times_out(tmp_path: Path) -> None:
    result = measure(_job(tmp_path, schedule="#schedule.nest<>", fault="hang", timeout=4.0))
    assert result.status == "failed: timeout after 4 s"


def test_a_fault_can_target_some_schedules(tmp_path: Path) -> None:
    job = _job(tmp_path, schedule="#schedule.nest<unroll [d1]>", fault="crash:fma")
    assert measure(job).ok


def test_a_candidate_the_lowering_rejects_is_a_failure(tmp_path: Path) -> None:
    program = Program.load(MM, "mm.dl", None, pipeline.Options())
    (space,) = program.spaces(Target.host())
    db = tmp_path / "db.jsonl"
    bad = "#schedule.nest<vectorize r0 x 16>"
    append_record(db, Record(space.info.key, Target.host().cpu, bad, 1.0))
    result = measure(_job(tmp_path, db=str(db), schedule=bad))
    assert result.status.startswith("failed: mm.dl:6:10: warning: schedule: no tuning record")
    assert "the record does not fit this nest" in result.status


def test_mismatch_states_the_tolerance() -> None:
    want = [np.ones((2, 2), np.float32)]
    assert mismatch([want[0] + 1e-4], want) is None  # within 1e-3 * (max|want| + 1)
    assert "differs by 0.01" in (mismatch([want[0] + 1e-2], want) or "")
    assert "differs by nan" in (mismatch([want[0] * np.nan], want) or "")
    assert "shape (2,)" in (mismatch([np.ones(2, np.float32)], want) or "")
    assert "2 outputs, expected 1" in (mismatch(want * 2, want) or "")
