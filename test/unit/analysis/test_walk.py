"""`dlc.analysis.walk.walk_ops` visits what `Operation.walk` visits, in the same order,
at every level (nested loops, conditionals, several blocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

import dlc
from dlc import pipeline
from dlc.analysis.walk import walk_ops
from dlc.diagnostics import clone_located

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("stop", ["graph", "tensor", "loop", "llvm"])
def test_walk_ops_is_operation_walk(stop: str) -> None:
    module = clone_located(dlc.parse((ROOT / "examples" / "language_tour.dl").read_text()))
    pipeline.run(module, pipeline.steps(pipeline.Options(), stop=stop))
    expected = list(module.walk())
    found = walk_ops(module)
    assert len(found) == len(expected) > 100
    assert all(a is b for a, b in zip(found, expected, strict=True))
