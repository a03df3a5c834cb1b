"""Schedules of unfolding copies for the `schedule` pass (dlc/passes/tensor/schedule.py):
an element-wise nest that only copies (its body one `tensor.read`, yielded, and index
arithmetic) and writes more elements than it reads (an im2col's columns,
dlc/passes/tensor/unfold_convolutions.py, each input element copied once per tap)
with a read that steps 1 or 2 elements along its last axis (`lane_plan`: `vload`,
`vload2`). The plain nest is scalar: its row index is divided and its row read
through index arithmetic LLVM does not vectorize (measured: an unfolded 3 x 3
convolution of 256 channels over 14 x 14 spent 0.69 ms of 17.8 building its columns
at 3 GB/s on a loaded Zen 3). Vectors of the target's width along the last axis (of
the largest power of two not above a shorter row; the row's tail as narrower vectors,
`vector_pieces`) copy each row with vector loads and stores.
"""

from __future__ import annotations

from dlc.analysis.tensor_lanes import lane_plan
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.dialects.schedule import ScheduleAttr
from dlc.passes.tensor.schedule_gather import VECTOR_DTYPES
from dlc.target import Target


def _copies(op: tensor.ComputeOp) -> tensor.ReadOp | None:
    """The one read `op`'s body yields when the rest is index arithmetic, else None."""
    reads = [r for r in op.body.block.ops if isinstance(r, tensor.ReadOp)]
    yielded = op.body.block.last_op
    if len(reads) != 1 or not isinstance(yielded, tensor.YieldOp):
        return None
    if yielded.operands[0] is not reads[0].result:
        return None
    return reads[0]


def unfolding_copy(op: tensor.ComputeOp) -> bool:
    """Whether `op` is an unfolding copy (module docstring): element-wise, its body one
    read (yielded) of a smaller tensor stepping 1 or 2 elements along the last axis."""
    t = op.result.type
    rank = len(op.domain)
    if op.combinator is not None or rank == 0:
        return False
    if not isinstance(t, TensorType) or t.dt not in VECTOR_DTYPES:
        return False
    read = _copies(op)
    if read is None:
        return False
    source = read.tensor.type
    if not isinstance(source, TensorType) or source.num_elements >= t.num_elements:
        return False
    plan = lane_plan(op, rank - 1)
    return isinstance(plan, dict) and plan[read] in ("vload", "vload2")


def unfolded_rows_schedule(op: tensor.ComputeOp, target: Target) -> ScheduleAttr | None:
    """`tile [last = [W]], unroll [last.1], vectorize last.1 x W` for an unfolding copy
    in no group (module docstring); None for anything else."""
    if op.schedule is None or op.schedule.fusion is not None or op.schedule.order:
        return None
    if not unfolding_copy(op):
        return None
    t = op.result.type
    assert isinstance(t, TensorType)
    width = min(target.vector_bytes // dtype_bytes(t.dt), op.domain[-1])
    lanes = 1 << (width.bit_length() - 1)
    if lanes < 2:
        return None
    j = f"d{len(op.domain) - 1}"
    order = [*(f"d{a}" for a in range(len(op.domain) - 1)), f"{j}.0", f"{j}.1"]
    return ScheduleAttr(
        tiles={j: [lanes]}, order=order, unroll=[f"{j}.1"], vectorize=(f"{j}.1", lanes)
    )
