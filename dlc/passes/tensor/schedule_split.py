"""Index-set splitting of element-wise nests for the `schedule` pass (step 5 of
`schedule.py`'s docstring): a nest whose body compares its last index against
constants (a padding's `0 <= w - 1 < W`, read through a clamped index and selected
against 0) runs its last loop in pieces at the points where those comparisons change
(`split`), so each piece decides them at compile time: the middle piece of a padding
is a plain copy, which LLVM vectorizes, where the whole row was scalar selects and
clamped loads (the padding of a depthwise 3 x 3 convolution took twice as long as the
convolution itself)."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import SSAValue

from dlc.dialects import tensor
from dlc.passes.tensor.affine import CONST, Form, combine

MAX_BODY_OPS = 64
"""Larger bodies are not split (each piece is a copy of the body)."""

MAX_POINTS = 4
"""At most this many split points (a padding on both sides needs two)."""

# predicate -> the offset of the first index where `x + c <pred> C` changes, from C - c
_FLIP = {"slt": 0, "sge": 0, "sle": 1, "sgt": 1}  # signed only (unsigned change at -c too)


def split_points(op: tensor.ComputeOp) -> list[int]:
    """The points where the comparisons of `op`'s last index against constants change,
    inside (0, extent) (module docstring); [] when there are none or `op` does not
    qualify (a reduction, a large body, a schedule that tiles, orders, unrolls,
    vectorizes or parallelizes its last loop, or a fusion group)."""
    schedule = op.schedule
    if op.combinator is not None or not op.domain or schedule is None:
        return []
    last = f"d{len(op.domain) - 1}"
    if schedule.fusion is not None or schedule.tile_sizes or schedule.loop_order:
        return []
    if last in schedule.parallel_loops | schedule.unrolled_loops or schedule.vector:
        return []
    if len(op.body.block.ops) > MAX_BODY_OPS:
        return []
    extent = op.domain[-1]
    points = sorted({p for p in _flips(op) if 0 < p < extent})
    return points if len(points) <= MAX_POINTS else []


def compares_last_index(op: tensor.ComputeOp) -> bool:
    """Whether `op` is element-wise and its body compares its last index against a
    constant (a padding's range checks)."""
    return op.combinator is None and bool(op.domain) and bool(_flips(op))


def _flips(op: tensor.ComputeOp) -> list[int]:
    """For each comparison of `last + c` with a constant C: where it changes."""
    last = op.body.block.args[len(op.domain) - 1]
    forms: dict[SSAValue, Form] = {last: {0: 1}}
    out: list[int] = []
    for inner in op.body.block.ops:
        if isinstance(inner, arith.ConstantOp) and isinstance(inner.value, IntegerAttr):
            forms[inner.result] = {CONST: inner.value.value.data}
        elif isinstance(inner, arith.AddiOp | arith.SubiOp | arith.MuliOp):
            lhs, rhs = forms.get(inner.lhs), forms.get(inner.rhs)
            form = combine(inner, lhs, rhs) if lhs is not None and rhs is not None else None
            if form is not None:
                forms[inner.result] = form
        elif isinstance(inner, arith.CmpiOp):
            flip = _flip(inner, forms)
            if flip is not None:
                out.append(flip)
    return out


def _flip(cmp: arith.CmpiOp, forms: dict[SSAValue, Form]) -> int | None:
    """The first index at which `last + c <pred> C` differs from the index before."""
    predicate = arith.CMPI_COMPARISON_OPERATIONS[cmp.predicate.value.data]
    lhs, rhs = forms.get(cmp.lhs), forms.get(cmp.rhs)
    if predicate not in _FLIP or lhs is None or rhs is None:
        return None
    if {k for k, v in lhs.items() if v} - {CONST} != {0} or lhs[0] != 1:
        return None  # not `last + c` on the left
    if {k for k, v in rhs.items() if v} - {CONST}:
        return None  # not a constant on the right
    return rhs.get(CONST, 0) - lhs.get(CONST, 0) + _FLIP[predicate]
