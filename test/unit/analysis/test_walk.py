"""`dlc.analysis.walk.walk_ops` visits what `Operation.walk` visits, in the same order,
at every level (nested loops, conditionals, several blocks); `kind_of` answers as
`isinstance` does, subclasses included, once per class."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

import dlc
from dlc import pipeline
from dlc.analysis.walk import kind_of, walk_ops
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


def test_kind_of_is_the_first_isinstance() -> None:
    module = clone_located(dlc.parse((ROOT / "examples" / "language_tour.dl").read_text()))
    pipeline.run(module, pipeline.steps(pipeline.Options(), stop="llvm"))
    classes = (llvm.CallOp, llvm.LoadOp, llvm.FCmpOp, Operation)  # Operation: any op
    memo: dict[type, int] = {}
    for op in walk_ops(module):
        first = next(i for i, c in enumerate(classes, start=1) if isinstance(op, c))
        assert kind_of(op, classes, memo) == first
    assert memo[llvm.CallOp] == 1 and memo[llvm.LoadOp] == 2 and memo[ModuleOp] == 4


def test_kind_of_counts_subclasses_and_none() -> None:
    class Compare(llvm.FCmpOp):  # as dlc's vector compare subclasses xDSL's
        pass

    memo: dict[type, int] = {}
    compare = Compare.__new__(Compare)
    assert kind_of(compare, (llvm.CallOp, llvm.FCmpOp), memo) == 2
    assert kind_of(1.5, (llvm.CallOp, llvm.FCmpOp), memo) == 0
    assert memo == {Compare: 2, float: 0}
