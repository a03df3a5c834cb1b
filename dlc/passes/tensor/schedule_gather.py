"""Schedules of gathered-row nests (the `schedule` pass, dlc/passes/tensor/schedule.py).

A gathered-row nest is element-wise and reads an operand at a row computed from
another read (`gather`: `data[clamp(ids[i]), j]`) along its last axis at unit stride.
LLVM cannot hoist the index read out of the inner loop (the output buffer might alias
the indices as far as it knows), so it neither vectorizes nor copies rows: the plain
nest recomputes the row per element (measured: docs/performance.md, "Measurements behind the defaults"). Vectors of the target's width along the last axis load the index once
per vector and copy the row with vector loads and stores.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from dlc.analysis.tensor_lanes import lane_plan
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.dialects.schedule import ScheduleAttr
from dlc.passes.tensor.schedule_policy import depends_on
from dlc.target import Target

PARALLEL_BYTES = 1 << 22
"""Bytes a gathered-row nest writes below which it stays on one thread: a row copy is
memory-bound, and forking for a few microseconds of copying costs more than it saves
(on a loaded host, a scheduler quantum)."""

VECTOR_DTYPES = ("f32", "f64")  # the nest builder vectorizes float results only


def _gathered(read: tensor.ReadOp, reads: list[tensor.ReadOp]) -> bool:
    """An index of `read` is computed from another read's value."""
    others: set[SSAValue] = {r.result for r in reads if r is not read}
    return any(depends_on(i, others) for i in read.indices)


def gathered_rows_schedule(op: tensor.ComputeOp, target: Target) -> ScheduleAttr | None:
    """`tile [last = [W]], unroll [last.1], vectorize last.1 x W` for a gathered-row
    nest in no group whose body vectorizes along its last axis; None otherwise."""
    t = op.result.type
    rank = len(op.domain)
    if op.combinator is not None or rank == 0 or op.schedule is None:
        return None
    if op.schedule.fusion is not None or op.schedule.order:
        return None
    if not isinstance(t, TensorType) or t.dt not in VECTOR_DTYPES:
        return None
    reads = [r for r in op.body.block.ops if isinstance(r, tensor.ReadOp)]
    if not any(_gathered(r, reads) for r in reads):
        return None
    lanes = target.vector_bytes // dtype_bytes(t.dt)
    if op.domain[-1] < lanes or not isinstance(lane_plan(op, rank - 1), dict):
        return None
    j = f"d{rank - 1}"
    order = [*(f"d{a}" for a in range(rank - 1)), f"{j}.0", f"{j}.1"]
    return ScheduleAttr(
        tiles={j: [lanes]}, order=order, unroll=[f"{j}.1"], vectorize=(f"{j}.1", lanes)
    )


def serial_gathered_rows(op: tensor.ComputeOp) -> None:
    """Drop the parallel loop of a small gathered-row nest (`PARALLEL_BYTES`)."""
    t = op.result.type
    assert isinstance(t, TensorType) and op.schedule is not None
    if op.schedule.vector is not None and t.num_elements * dtype_bytes(t.dt) < PARALLEL_BYTES:
        op.schedule = op.schedule.replaced(parallel=[])
