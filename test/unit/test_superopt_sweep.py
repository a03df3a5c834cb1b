"""tools/superopt_sweep.py (`bench_superopt.py --sweep`): the points it measures and the
report it prints; nothing here is timed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import superopt_sweep  # noqa: E402

import dlc  # noqa: E402


def test_the_sweep_covers_every_program_at_30_or_more_shapes() -> None:
    points = superopt_sweep.points()
    assert len(points) >= 30
    names = {p.program.split()[0] for p in points}
    assert {"attention", "LSTM", "Inception", *(f"W{i}" for i in range(8))} <= names
    fits = [m % 6 == 0 and n % 16 == 0 for p in points for m, n in [p.mn]]
    assert any(fits) and not all(fits)  # multiples of the AVX2 tile and not
    assert ("attention (W11c)", "x 112×448") in {(p.program, p.shape) for p in points}
    for p in points:
        dlc.parse(p.text)  # every resized program is well-typed


def test_resize_changes_tensor_dimensions_only() -> None:
    text = "%y = dot %x: <128 x 512 x f32>, %w: <512 x 512 x f32> // 128 512\n"
    out = superopt_sweep.resize(text, {128: 112, 512: 448}, {"// ": "# "})
    assert out == "%y = dot %x: <112 x 448 x f32>, %w: <448 x 448 x f32> # 128 512\n"


def test_the_report_flags_slower_points_and_names_the_guard() -> None:
    point = superopt_sweep.attention(112, 448)
    rows = [
        superopt_sweep.Row(
            point, 1000.0, 1100.0, 1.0, (5, 3), "functions kept", (1, 2), 2, 30, 0, True, 1
        ),
        superopt_sweep.Row(point, 1000.0, 700.0, 0.98, (5, 3), "x", (1, 2), 0, 0, np.inf, False, 2),
    ]
    lines = superopt_sweep.table(rows, 6, 16)
    assert "| **0.91** |" in lines[2] and "| same |" in lines[2] and "functions kept" in lines[2]
    assert "| 1.43 |" in lines[3] and "| differs |" in lines[3] and "MISMATCH" in lines[3]
    said = superopt_sweep.summary(rows)
    assert "1 points where O3 is more than 3 % slower (1 of them run the code O2 runs)" in said
    assert "1 points where O3 changed the code" in said and "1 points timed again" in said
    guard = {"guard: functions kept, rewrite not 3% cheaper": 1}
    assert superopt_sweep.guard_of(guard) == "functions kept, rewrite not 3% cheaper"
    assert superopt_sweep.guard_of({}) == "no rewrite found"
