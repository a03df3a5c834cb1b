"""Epilogues of register-tiled contractions for the `schedule` pass (step 3 of
`schedule.py`'s docstring): the element-wise computes right after a tiled product
or convolution that read it only at the current point (its bias, a batch norm's
scale and shift, relu or clip, a residual add: after `fuse`, usually one compute)
are computed at its register tile (`epilogue n`, carried out by
dlc/lowering/tensor_to_loop/epilogue.py) instead of as a nest of their own, which
would read the whole result back from memory and write it again."""

from __future__ import annotations

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_groups import next_compute, reads_at_identity, reads_of
from dlc.dialects.tensor_lanes import lane_plan

MAX_EPILOGUE_OPS = 48
"""Body ops of a member above which it stays a nest of its own (code size: the body
is copied once per register tile point)."""


def epilogue_run(op: tensor.ComputeOp) -> list[tensor.ComputeOp]:
    """The computes after the tiled contraction `op` (literals between them aside)
    that become its epilogue: each
    element-wise over `op`'s domain, reading `op` or the member before it, and
    every earlier result only at the current point, with a float body that
    vectorizes along the last axis (`lane_plan`), as the tile does."""
    members: list[tensor.ComputeOp] = []
    current = next_compute(op)
    while isinstance(current, tensor.ComputeOp) and _fits(op, current, members):
        members.append(current)
        current = next_compute(current)
    return members


def _fits(op: tensor.ComputeOp, member: tensor.ComputeOp, earlier: list[tensor.ComputeOp]) -> bool:
    t = member.result.type
    if member.combinator is not None or member.domain != op.domain or not op.domain:
        return False
    if not isinstance(t, TensorType) or t.dt not in ("f32", "f64"):
        return False
    if len(member.body.block.ops) > MAX_EPILOGUE_OPS:
        return False
    if not reads_of(member, (earlier[-1] if earlier else op).result):
        return False  # not a consumer of the chain
    if not all(reads_at_identity(member, v.result) for v in [op, *earlier]):
        return False
    return isinstance(lane_plan(member, len(op.domain) - 1, functions=True), dict)
