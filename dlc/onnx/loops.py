"""CFG loops and two-way branches built for ONNX's Loop, Scan and If.

A loop is four blocks: the block the emitter stood in (the pre-header) branches to a
header whose arguments are the iteration number, the condition (when there is one),
the loop-carried values and one accumulator per scan output; the header tests
`i < count and cond` and enters the body or the exit; the body (the block the step
function leaves the emitter in: nested control flow adds blocks) branches back with
the new values. Scan outputs are written into their accumulator, a tensor of the
static trip count's length, at row i (a `select` of the rows equal to i: one fused,
vectorized pass over the accumulator per iteration, so T iterations cost T² rows;
an in-place row update at the loop level would make it T). Every later node is
imported into the exit block, where the header's arguments hold the final values.

    'pre:  ... branch 'head(0: i64, %c0: bool, %v0, %acc0)
    'head(%i: i64, %c: bool, %v, %acc):
           %go = and (lessThan %i, %n), %c
           conditional %go then 'body() else 'exit()
    'body: ... %acc1 = select (shapeCast %y to 1 x ...), %acc by (equal %rows, %i)
           branch 'head(add %i, 1, %c1, %v1, %acc1)
    'exit: ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Block, SSAValue

from dlc.dialects.graph import BranchOp, ConditionalOp
from dlc.dialects.graph_elementwise import SelectOp
from dlc.dialects.graph_memory import TrapOp
from dlc.dialects.graph_types import TensorType
from dlc.onnx.emitter import Emitter, ImportProblem, describe, shape_of, tensor_type
from dlc.onnx.node import Result
from dlc.onnx.subgraph import as_tensor, new_block

MAX_SCAN_ROWS = 1 << 20
"""Scan outputs of loops with more iterations are refused (their accumulators)."""

I64 = TensorType((), "i64")
BOOL = TensorType((), "bool")

Step = Callable[[SSAValue, SSAValue | None, list[SSAValue]], tuple[Result | None, list[Result], list[Result]]]  # fmt: skip
"""(i, cond, carried) -> (next cond, next carried, this iteration's scan outputs)."""


class BranchTypesDiffer(ImportProblem):
    """The two arms of a branch give values of different types."""


def cfg_loop(
    emit: Emitter,
    names: Any,
    count: SSAValue | None,
    cond: SSAValue | None,
    carried: Sequence[SSAValue],
    trips: int | None,
    step: Step,
) -> tuple[list[SSAValue], list[SSAValue]]:
    """The final carried values and the stacked scan outputs of a loop that runs
    while `i < count` (no bound when None) and `cond` (always when None). Scan outputs
    need `trips`, the exact number of iterations."""
    pre = emit.block
    types = [BOOL] * (cond is not None) + [v.type for v in carried]
    head = new_block(emit, names, "loop", [I64, *types])
    body, exit_ = new_block(emit, names, "body"), new_block(emit, names, "exit")
    try:
        emit.block = head
        head.args[0]._name = names("iteration")
        i, c = head.args[0], head.args[1] if cond is not None else None
        values: list[SSAValue] = list(head.args[2:] if cond is not None else head.args[1:])
        head.add_op(ConditionalOp(_go(emit, i, count, c), body, [], exit_, []))
        emit.block = body
        next_cond, new, scans = step(i, c, values)
        back = [*_cond(emit, next_cond, cond), *_carried(emit, new, values)]
        back += _accumulate(emit, head, i, scans, trips)
        back.insert(0, emit.binary("add", i, emit.scalar(1, "i64")))
        emit.block.add_op(BranchOp(head, back))
    except ImportProblem:
        emit.block = pre  # the import fails: later nodes only collect their problems
        raise
    emit.block = pre
    start = [emit.scalar(0, "i64"), *([cond] if cond is not None else []), *carried]
    tails = [tensor_type(a) for a in head.args[1 + len(types) :]]
    zeros = [emit.splat(0, t.dims, t.dt) for t in tails]
    pre.add_op(BranchOp(head, start + zeros))
    emit.block = exit_
    final: list[SSAValue] = list(head.args[1 + (cond is not None) :])
    return final[: len(carried)], final[len(carried) :]


def _go(emit: Emitter, i: SSAValue, count: SSAValue | None, cond: SSAValue | None) -> SSAValue:
    if count is None:
        assert cond is not None
        return cond
    more = emit.binary("lessThan", i, count)
    return more if cond is None else emit.binary("and", more, cond)


def _cond(emit: Emitter, value: Result | None, cond: SSAValue | None) -> list[SSAValue]:
    if cond is None:
        return []
    if value is None:
        raise ImportProblem("the loop body computes no condition")
    c = emit.reshape(as_tensor(emit, value), ())
    if c.type != BOOL:
        raise ImportProblem(f"the loop body's condition is {describe(c)}, expected bool")
    return [c]


def _carried(emit: Emitter, new: Sequence[Result], old: Sequence[SSAValue]) -> list[SSAValue]:
    """The next values, of the types the loop started with (shapes are static)."""
    out = []
    for k, (value, before) in enumerate(zip(new, old, strict=True)):
        value = as_tensor(emit, value)
        if value.type != before.type:
            raise ImportProblem(
                f"loop-carried value {k} changes type from {describe(before)} to "
                f"{describe(value)} (dlc's shapes are static)"
            )
        out.append(value)
    return out


def _accumulate(
    emit: Emitter, head: Block, i: SSAValue, scans: Sequence[Result], trips: int | None
) -> list[SSAValue]:
    """Row i of each scan output's accumulator (a new header argument) set."""
    if not scans:
        return []
    if trips is None:
        raise ImportProblem("scan outputs need a loop with a fixed number of iterations")
    if trips > MAX_SCAN_ROWS:
        raise ImportProblem(f"scan outputs of more than {MAX_SCAN_ROWS} iterations")
    out = []
    for value in scans:
        value = as_tensor(emit, value)
        t = tensor_type(value)
        acc = head.insert_arg(t.with_shape((trips, *t.dims)), len(head.args))
        rows = emit.constant(np.arange(trips, dtype=np.int64).reshape((trips,) + (1,) * t.rank))
        update = emit.reshape(value, (1, *shape_of(value)))
        out.append(emit.op(SelectOp, [update, acc, emit.binary("equal", rows, i)]))
    return out


def branches(
    emit: Emitter,
    names: Any,
    cond: SSAValue,
    arms: Sequence[Callable[[], Sequence[Result]]],
) -> tuple[list[SSAValue], str | None]:
    """`conditional cond then 'then() else 'else()`, each arm's results passed to a
    join block (the emitter's block afterwards); the arms must give the same types.
    An arm that cannot be imported while the other can becomes a trap (`unreachable`:
    the model's condition never takes it, or the call stops there): the second result
    says why, for the importer's warning; when both fail, the first one's problem."""
    pre = emit.block
    region = pre.parent
    assert region is not None
    starts = [new_block(emit, names, n) for n in ("then", "else")]
    ends: list[tuple[Block, list[SSAValue]] | ImportProblem] = []
    try:
        for start, arm in zip(starts, arms, strict=True):
            emit.block, blocks = start, len(region.blocks)
            try:
                values = [as_tensor(emit, v) for v in arm()]
                ends.append((emit.block, values))  # nested control flow moves the emitter
            except ImportProblem as err:
                _discard(start, list(region.blocks)[blocks:])
                ends.append(err)
    finally:
        emit.block = pre
    taken = [e for e in ends if not isinstance(e, ImportProblem)]
    problems = [e for e in ends if isinstance(e, ImportProblem)]
    if not taken:
        raise problems[0]
    if not problems:
        _same_types(taken[0][1], taken[1][1])
    types = [tensor_type(v) for v in taken[0][1]]
    join = new_block(emit, names, "join", types)
    for start, end in zip(starts, ends, strict=True):
        if isinstance(end, ImportProblem):
            emit.block = start
            start.add_op(TrapOp.create())
            end = (start, [emit.splat(0, t.dims, t.dt) for t in types])  # never used
        end[0].add_op(BranchOp(join, end[1]))
    pre.add_op(ConditionalOp(emit.reshape(cond, ()), starts[0], [], starts[1], []))
    emit.block = join
    return list(join.args), (str(problems[0]) if problems else None)


def _discard(start: Block, blocks: list[Block]) -> None:
    """Erase what a failed arm emitted: the ops of its start block and its blocks."""
    ops = [b.detach_op(op) for b in [start, *blocks] for op in list(b.ops)]
    for op in ops:
        op.erase(safe_erase=False)
    for b in blocks:
        region = b.parent_region()
        if region is not None:
            region.detach_block(b)


def _same_types(then: Sequence[SSAValue], other: Sequence[SSAValue]) -> None:
    for k, (a, b) in enumerate(zip(then, other, strict=True)):
        if a.type != b.type:
            raise BranchTypesDiffer(
                f"output {k} is {describe(a)} in the then branch and {describe(b)} in the "
                "else branch (dlc's shapes are static)"
            )
