"""Search spaces of fused groups and lone element-wise or reduction nests, tuned as a whole.

A point gives every member its schedule (knobs: fused or apart, parallel loop, unroll of
element-wise and reduction loops, vector width), and the record holds them all; points
that cannot be valid are excluded up front. The knobs: docs/design/tuner.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlc.analysis.tensor_lanes import lane_plan
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.schedule import ScheduleAttr, axis_names
from dlc.dialects.tensor_groups import fusion_of
from dlc.passes.tensor.schedule_records import group_key
from dlc.passes.tensor.schedule_tuned_groups import (
    Unit,
    apply_group_schedules,
    group_summary,
    parse_group_schedule,
)
from dlc.target import Target
from dlc.tuner.features_groups import (
    GROUP_FEATURE_COUNT,
    GroupInfo,
    group_features,
    group_info,
)
from dlc.tuner.space import Space

UNROLLS = (1, 2, 4, 8)


@dataclass(frozen=True)
class GroupSchedule:
    """A point's member schedules; its text is the record's schedule."""

    members: tuple[ScheduleAttr, ...]

    def __str__(self) -> str:
        return "[" + ", ".join(str(s) for s in self.members) + "]"


class GroupSpace(Space):
    """The knobs of one tunable unit and how a point becomes its member schedules."""

    def __init__(self, members: Unit, info: GroupInfo, knobs: dict[str, list[Any]], target: Target):
        super().__init__(info, "group", knobs, target)
        self.members = members
        self.policy = [m.schedule or ScheduleAttr() for m in members]
        self.vectors = [_vectorizable(m) for m in members]

    @property
    def feature_count(self) -> int:
        return GROUP_FEATURE_COUNT

    def features(self, schedule: Any) -> list[float]:
        return group_features(self.info, schedule.members)  # type: ignore[arg-type]

    def parse(self, text: str) -> GroupSchedule:
        return GroupSchedule(tuple(parse_group_schedule(text)))

    def _build(self, v: dict[str, Any]) -> GroupSchedule | None:  # type: ignore[override]
        fused = v.get("fuse", False) and fusion_of(self.members[0]) is not None
        out: list[ScheduleAttr] = []
        for m, policy, vector in zip(self.members, self.policy, self.vectors, strict=True):
            s = _member(m, policy if fused else policy.with_group(None), v, vector)
            if s is None:
                return None
            out.append(s)
        if v.get("lanes", 0) and not any(s.vector for s in out):
            return None  # the point without vectors
        out = _parallel(self.members, out, v["parallel"], fused)
        if not out:
            return None
        for m, s in zip(self.members, out, strict=True):
            if s.check(m.domain, m.reduction_extents):
                return None
        return GroupSchedule(tuple(out)) if self._fits(out) else None

    def _fits(self, schedules: list[ScheduleAttr]) -> bool:
        before = [m.schedule for m in self.members]
        why = apply_group_schedules(self.members, schedules)
        for m, s in zip(self.members, before, strict=True):
            m.schedule = s
        return why is None


def _vectorizable(op: tensor.ComputeOp) -> bool:
    t = op.result.type
    if op.combinator is not None or not op.domain or not isinstance(t, TensorType):
        return False
    if t.dt not in ("f32", "f64") or op.domain[-1] < 2:
        return False
    return isinstance(lane_plan(op, len(op.domain) - 1), dict)


def _split(order: list[str], axis: str) -> list[str]:
    """`order` with the loop of an untiled `axis` replaced by its two tile loops."""
    i = order.index(axis)
    return [*order[:i], f"{axis}.0", f"{axis}.1", *order[i + 1 :]]


def _member(
    op: tensor.ComputeOp, s: ScheduleAttr, v: dict[str, Any], vector: bool
) -> ScheduleAttr | None:
    """One member's schedule at the point `v` (None: excluded)."""
    order = list(s.loop_order) or axis_names(len(op.domain), len(op.reduction_extents))
    shared = s.fusion[1] if s.fusion is not None else 0
    if s.fusion is not None and s.fusion[2]:
        return s.replaced(parallel=[])  # a feeder runs inside its reduction's loops
    if op.combinator is not None:
        factor, axis = v.get("unroll_reduce", 1), f"r{len(op.reduction_extents) - 1}"
        extent = op.reduction_extents[-1] if op.reduction_extents else 1
        lanes = 0
    elif len(op.domain) > shared:
        factor, axis, extent = v.get("unroll", 1), f"d{len(op.domain) - 1}", op.domain[-1]
        lanes = v.get("lanes", 0) if vector else 0
    else:
        return s.replaced(parallel=[])  # one point per shared iteration: nothing to tile
    width = factor * max(1, lanes)
    if width == 1:
        return s.replaced(parallel=[])
    if width > extent:
        return None
    inner = f"{axis}.1"
    return s.replaced(
        tiles={axis: [width]},
        order=_split(order, axis),
        unroll=[inner],
        vectorize=(inner, lanes) if lanes else None,
        parallel=[],
    )


def _parallel(
    members: Unit, schedules: list[ScheduleAttr], choice: int, fused: bool
) -> list[ScheduleAttr]:
    """The schedules with their parallel loop (`choice`, module docstring); [] when the
    choice is past a group's candidates."""
    if choice < 0:
        return schedules
    if fused:
        base = members[0].domain[: schedules[0].fusion[1]]  # type: ignore[index]
        candidates = [f"d{d}" for d, n in enumerate(base) if n >= 2]
        if choice >= len(candidates):
            return []
        return [s.replaced(parallel=[candidates[choice]]) for s in schedules]
    out = []
    for m, s in zip(members, schedules, strict=True):
        candidates = []
        for lp in s.loops(m.domain, m.reduction_extents):
            if lp.is_reduction:
                break
            if lp.name not in s.unrolled_loops and -(-lp.block // lp.step) >= 2:
                candidates.append(lp.name)
        out.append(s.replaced(parallel=candidates[choice : choice + 1]))
    return out


def make_group_space(members: Unit, target: Target) -> GroupSpace:
    """The search space of a tunable unit (module docstring)."""
    info = group_info(group_key(members), group_summary(members), members)
    fused = fusion_of(members[0]) is not None
    knobs: dict[str, list[Any]] = {}
    if fused:
        knobs["fuse"] = [True, False]
    knobs["parallel"] = [-1, 0, 1, 2]
    inner = [m.domain[-1] for m in members if m.combinator is None and m.domain]
    if inner and max(inner) >= 2:
        knobs["unroll"] = [u for u in UNROLLS if u <= max(inner)]
    reduced = [m.reduction_extents[-1] for m in members if m.reduction_extents]
    if reduced and max(reduced) >= 2:
        knobs["unroll_reduce"] = [u for u in UNROLLS if u <= max(reduced)]
    lanes = target.vector_bytes // max(4, info.element_bytes)
    if lanes >= 4 and any(_vectorizable(m) for m in members):
        knobs["lanes"] = [0, lanes, lanes // 2]
    return GroupSpace(members, info, knobs, target)
