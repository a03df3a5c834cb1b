"""Tuning records of fused groups for the `schedule` pass (`schedule_records.py`).

After the policy has scheduled a run, each fusion group and each lone element-wise or
reduction nest (the tunable units) takes its `group_key` record's member schedules when
they fit the nests and the code generator can carry them out (`group_misfit`,
`schedule_misfit`: the lowering's own rules); a unit without a usable record is a
located `TuningWarning` naming the record and saying why, and keeps the policy's
schedules. The rules: docs/design/tuner.md.
"""

from __future__ import annotations

import math
import warnings

from xdsl.dialects.builtin import ArrayAttr

from dlc.analysis.kernel_origins import mark_tuned
from dlc.analysis.tensor_nest_plan import group_misfit, schedule_misfit
from dlc.dialects import tensor
from dlc.dialects.schedule import ScheduleAttr
from dlc.dialects.tensor_groups import fusion_of, group_members, verify_group
from dlc.passes.statistics import PassStatistics
from dlc.passes.tensor.schedule_policy import float_sum
from dlc.passes.tensor.schedule_records import (
    DEFAULT_SCHEDULE,
    TuningDatabase,
    TuningWarning,
    group_key,
    located,
    nest_summary,
)
from dlc.passes.tensor.schedule_tuned import parse_attribute

Unit = list[tensor.ComputeOp]
MIN_POINTS = 64


def tunable_units(run: list[tensor.ComputeOp], exclude: frozenset = frozenset()) -> list[Unit]:
    """The tunable units of a scheduled run of computes (module docstring), in order;
    computes in `exclude` (scheduled from contraction records) are none."""
    units: list[Unit] = []
    index = 0
    while index < len(run):
        members = group_members(run[index]) or [run[index]]
        index += len(members)
        first = members[0]
        if fusion_of(first) is None and (
            first in exclude or _contraction(first) or _in_epilogue(first)
        ):
            continue
        if (
            all(_plain(m) for m in members)
            and max(math.prod(m.domain) for m in members) >= MIN_POINTS
        ):
            units.append(members)
    return units


def _in_epilogue(op: tensor.ComputeOp) -> bool:
    """`op` is computed at an earlier contraction's register tile: the computes before
    it (literals aside) are epilogue members (empty schedules) back to one whose
    `epilogue n` reaches it."""
    distance, current = 0, op
    while distance < 64:
        before = current.prev_op
        while isinstance(before, tensor.ConstantOp):
            before = before.prev_op
        if not isinstance(before, tensor.ComputeOp) or before.schedule is None:
            return False
        distance += 1
        if before.schedule.epilogue:
            return before.schedule.epilogue >= distance
        if before.schedule != ScheduleAttr():
            return False
        current = before
    return False


def _contraction(op: tensor.ComputeOp) -> bool:
    return float_sum(op) and bool(op.reduction_extents)


def _plain(op: tensor.ComputeOp) -> bool:
    s = op.schedule
    return s is None or not (s.tile_sizes or s.vector or s.packed or s.epilogue)


def group_summary(members: Unit) -> str:
    """`group of 5: map 128x768 f32` (the last member's summary), or a nest's."""
    last = nest_summary(members[-1])
    return last if len(members) == 1 else f"group of {len(members)}: {last}"


def parse_group_schedule(text: str) -> list[ScheduleAttr]:
    """The member schedules of a group record; ValueError when `text` is not an
    array of `#schedule.nest`."""
    attr = parse_attribute(text)
    if not isinstance(attr, ArrayAttr) or not all(isinstance(s, ScheduleAttr) for s in attr.data):
        raise ValueError(f"not an array of #schedule.nest: {text[:80]}")
    return list(attr.data)


def apply_group_schedules(members: Unit, schedules: list[ScheduleAttr]) -> str | None:
    """Give `members` the record's `schedules` (module docstring), or say why they do
    not fit and leave the members as they were."""
    if len(schedules) != len(members):
        return f"{len(schedules)} member schedules for {len(members)} nests"
    fused = [s.fusion is not None for s in schedules]
    if any(fused) and not all(fused):
        return "some members fused and some not"
    if all(fused) and fusion_of(members[0]) is None:
        return "it fuses nests the policy does not"
    out: list[ScheduleAttr] = []
    for n, (m, s) in enumerate(zip(members, schedules, strict=True)):
        if s.packed or s.epilogue:
            return f"member {n}: a group member has no pack or epilogue"
        why = s.check(m.domain, m.reduction_extents)
        if why:
            return f"member {n}: {why}"
        out.append(s.with_group(fusion_of(m)) if s.fusion is not None else s)
    policy = [m.schedule for m in members]
    for m, s in zip(members, out, strict=True):
        m.schedule = s
    why = _unlowerable(members, all(fused))
    if why is None:
        return None
    for m, before in zip(members, policy, strict=True):
        m.schedule = before
    return why


def _unlowerable(members: Unit, fused: bool) -> str | None:
    """Why the members' (new) schedules do not make a group, or the code generator
    cannot carry them out (the lowering's own rules: `group_misfit`, `schedule_misfit`)."""
    if not fused:
        for n, m in enumerate(members):
            why = schedule_misfit(m, m.schedule or ScheduleAttr())
            if why is not None:
                return f"member {n}: {why}"
        return None
    bad = verify_group(members)
    return bad[1] if bad is not None else group_misfit(members)


def group_records(
    run: list[tensor.ComputeOp],
    db: TuningDatabase,
    cpu: str,
    stats: PassStatistics,
    exclude: frozenset = frozenset(),
) -> None:
    """Apply the usable record of each tunable unit of the scheduled `run`; a warning
    for each unit that has none (module docstring)."""
    for members in tunable_units(run, exclude):
        record, why = db.lookup(group_key(members), cpu)
        if record is not None and record.schedule == DEFAULT_SCHEDULE:
            stats.count("groups and lone nests the tuning database leaves to the default policy")
            continue
        if record is not None:
            try:
                why = apply_group_schedules(members, parse_group_schedule(record.schedule)) or ""
            except ValueError as err:
                why = f"its schedule does not parse ({err})"
            if not why:
                stats.count("groups and lone nests scheduled from the tuning database")
                for member in members:
                    mark_tuned(member)
                continue
            why = f"the record does not fit: {why} (record {record.key} of {db.path})"
        stats.count("groups and lone nests without a usable tuning record")
        what = "fused group" if len(members) > 1 else "nest"
        message = (
            f"schedule: no tuning record used for this {what} ({group_summary(members)}): "
            f"{why}; the default policy schedules it"
        )
        warnings.warn(located(members[0], message), TuningWarning, stacklevel=2)
