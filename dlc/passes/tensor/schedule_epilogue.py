"""Epilogues of register-tiled contractions for the `schedule` pass (step 3 of
`schedule.py`'s docstring): the element-wise computes right after a tiled product
or convolution that read it only at the current point (its bias, a batch norm's
scale and shift, relu or clip, a residual add: after `fuse`, usually one compute)
are computed at its register tile (`epilogue n`, carried out by
dlc/lowering/tensor_to_loop/epilogue.py) instead of as a nest of their own, which
would read the whole result back from memory and write it again.

`drop_conflicting_epilogues` checks the epilogues the pass wrote against the other
schedules (a member must be in no group and have no epilogue of its own) before the
code generator sees them: one that does not hold is dropped (the contraction and
its members become nests of their own) with a `ScheduleWarning`, never a refusal of
the program."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from xdsl.ir import Operation

from dlc.analysis.tensor_epilogue import epilogue_conflict
from dlc.analysis.tensor_lanes import lane_plan, vector_pieces
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_groups import next_compute, reads_at_identity, reads_of
from dlc.passes.tensor.schedule_conv import ConvTiles
from dlc.passes.tensor.schedule_records import located

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


def in_full_vectors(
    epilogues: dict[tensor.ComputeOp, list[tensor.ComputeOp]],
    convs: Mapping[tensor.ComputeOp, ConvTiles | None],
) -> set[tensor.ComputeOp]:
    """Cut each convolution tile's epilogue before the first member that calls a math
    function (`exp`, `tanh`, ...: a polynomial of some 20 operations) when the tile's
    rows are vectors less than half full on average (a 7-wide row in 4 + 2 + 1 lanes
    of 16): the tile would evaluate the function once per piece, where a nest of its
    own (in no group) runs short rows as one loop at the full vector width
    (tensor_to_loop/collapse.py). Returns the members left out. EfficientNet-B0's
    depthwise 5 x 5 convolution + SiLU over 1152 x 7 x 7: 0.17 -> 0.115 ms per call
    (CPU time, one Zen 5 core; onnxruntime 0.041)."""
    apart: set[tensor.ComputeOp] = set()
    for op, members in epilogues.items():
        tiles = convs.get(op)
        if tiles is None or tiles.lanes <= 1:
            continue
        if 2 * tiles.nr >= tiles.lanes * len(vector_pieces(tiles.nr, tiles.lanes)):
            continue
        heavy = [i for i, m in enumerate(members) if any(_calls(o) for o in m.body.walk())]
        if heavy:
            epilogues[op], left = members[: heavy[0]], members[heavy[0] :]
            apart |= set(left)
    return apart


def _calls(op: Operation) -> bool:
    return op.dialect_name() == "math" and op.name not in ("math.fma", "math.absf")


class ScheduleWarning(UserWarning):
    """A schedule the policy chose and then replaced by a plainer one, because it
    contradicted another of its choices (an internal inconsistency, not the user's)."""


def drop_conflicting_epilogues(run: list[tensor.ComputeOp]) -> None:
    """Drop each epilogue of `run` that its members' schedules contradict (module
    docstring): the contraction keeps its tiles, the members their own (plain) nests."""
    for op in run:
        why = epilogue_conflict(op)
        if why is None or op.schedule is None:
            continue
        op.schedule = op.schedule.replaced(epilogue=0)
        message = f"{why}; computed as nests of their own instead"
        warnings.warn(located(op, message), ScheduleWarning, stacklevel=2)
