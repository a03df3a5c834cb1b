"""Features of a tunable unit (a fused group or a lone element-wise or reduction nest,
`space_groups.py`) run with its member schedules: the cost model's input for
units, a fixed-length vector of its own (`GROUP_FEATURE_COUNT`, unlike a
contraction's `FEATURE_COUNT`: a model trains on records of one kind only).

- the unit: log2 of its operations (body ops other than reads and literals, times
  iteration points), log2 of its largest domain, members, reduction members, log2 of
  the math-function calls, log2 of the bytes it reads from outside and of the bytes
  of its results used outside, log2 of the longest last axis;
- the schedules: fused or not, log2 of the shared loops' points, log2 of the
  parallel loop's iterations (0: none), the fraction of nests with one, log2 of the
  unroll factors of element-wise and of reduction members, the vector width and the
  fraction of members vectorized, log2 of the bytes stored to buffers (a fused
  group's `internal` members store nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.dialects.schedule import ScheduleAttr
from dlc.dialects.tensor_groups import uses_of
from dlc.tuner.space import NestInfo

GROUP_FEATURE_COUNT = 17


@dataclass(frozen=True)
class MemberInfo:
    domain: tuple[int, ...]
    reductions: tuple[int, ...]
    result_bytes: int


@dataclass(frozen=True)
class GroupInfo(NestInfo):
    """A unit as plain data: `NestInfo`'s fields (the largest member domain, no reads)
    and what `group_features` needs."""

    ops: int = 0
    members: tuple[MemberInfo, ...] = ()
    reduction_members: int = 0
    math_calls: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    @property
    def flops(self) -> int:
        """Body operations times iteration points (the report's GFLOP/s)."""
        return self.ops


def _work(op: tensor.ComputeOp, ops: list[str]) -> int:
    return math.prod(op.domain) * math.prod(op.reduction_extents) * len(ops)


def group_info(key: str, summary: str, members: list[tensor.ComputeOp]) -> GroupInfo:
    inside = {m.result for m in members}
    outside = {v for m in members for v in m.inputs if v not in inside}
    ops = calls = 0
    for m in members:
        names = [
            o.name
            for o in m.body.block.ops
            if not isinstance(o, tensor.ReadOp | tensor.YieldOp | arith.ConstantOp)
        ]
        ops += _work(m, names)
        calls += _work(m, [n for n in names if n.startswith("math.")])
    escaping = [m for m in members if _escapes(m, inside)]
    largest = max(members, key=lambda m: math.prod(m.domain))
    t = largest.result.type
    assert isinstance(t, TensorType)
    return GroupInfo(
        key,
        summary,
        tuple(largest.domain),
        (),
        dtype_bytes(t.dt),
        (),
        ops=ops,
        members=tuple(
            MemberInfo(tuple(m.domain), tuple(m.reduction_extents), _bytes(m.result.type))
            for m in members
        ),
        reduction_members=sum(m.combinator is not None for m in members),
        math_calls=calls,
        bytes_in=sum(_bytes(v.type) for v in outside),
        bytes_out=sum(_bytes(m.result.type) for m in escaping),
    )


def _escapes(m: tensor.ComputeOp, inside: set) -> bool:
    uses = uses_of(m.result)
    return uses.blocked or any(c.result not in inside for c in uses.reads)


def _bytes(t: object) -> int:
    if not isinstance(t, TensorType):
        return 0
    return t.num_elements * dtype_bytes(t.dt)


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -1.0


def group_features(info: GroupInfo, schedules: Sequence[ScheduleAttr]) -> list[float]:
    """The feature vector of `info` run with `schedules` (module docstring)."""
    fused = any(s.fusion is not None for s in schedules)
    shared = schedules[0].fusion[1] if fused and schedules[0].fusion else 0
    base = info.members[0].domain[:shared] if info.members else ()
    parallel: list[int] = []
    unroll = {True: 1, False: 1}
    stored = 0
    for m, s in zip(info.members, schedules, strict=False):
        loops = {lp.name: lp for lp in s.loops(m.domain, m.reductions)}
        parallel += [-(-loops[n].block // loops[n].step) for n in s.parallel_loops if n in loops]
        for name in s.unrolled_loops:
            reduction = name.startswith("r")
            unroll[reduction] = max(unroll[reduction], loops[name].block if name in loops else 1)
        internal = s.fusion is not None and s.fusion[3]
        stored += 0 if internal else m.result_bytes
    vectors = [s.vector[1] for s in schedules if s.vector is not None]
    count = max(1, len(schedules))
    return [
        _log2(info.ops),
        _log2(math.prod(info.domain)),
        float(len(info.members)),
        float(info.reduction_members),
        _log2(1 + info.math_calls),
        _log2(info.bytes_in),
        _log2(info.bytes_out),
        _log2(max((m.domain[-1] for m in info.members if m.domain), default=1)),
        float(fused),
        _log2(math.prod(base)) if fused else 0.0,
        _log2(max(parallel)) if parallel else 0.0,
        len({i for i, s in enumerate(schedules) if s.parallel_loops}) / count,
        _log2(unroll[False]),
        _log2(unroll[True]),
        float(max(vectors, default=0)),
        len(vectors) / count,
        _log2(stored),
    ]
