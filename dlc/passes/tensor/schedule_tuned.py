"""Schedules from a tuning database for the `schedule` pass (`schedule_records.py`).

For each compute of a run, its workload key is looked up for the target CPU. A best
record whose schedule is `default` (the policy's schedule measured fastest) leaves the
nest to the policy, silently. Another record
that parses as a `#schedule.nest` and fits the nest (`ScheduleAttr.check`; no fusion
group; an `epilogue n` only where `n` computes after it qualify, `epilogue_run`) and that
the code generator can carry out (`schedule_misfit`: vectorize, pack, epilogue lanes,
unrolled copies) is
used instead of the policy's schedule, and the nest joins no fusion group. Every contraction (a float `add` reduction of products: what `dlc-tune`
tunes) without a usable record, and every nest whose record is not used, gets a
`TuningWarning` at its location naming the record and saying why (key not in the
database, only other targets or dlc versions, or the record does not fit): never a
silent fallback, never an error (a record is not something the user wrote). Other
nests without a record are the policy's, silently.
"""

from __future__ import annotations

import functools
import warnings

from xdsl.context import Context
from xdsl.ir import Attribute
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from dlc.analysis.tensor_nest_plan import schedule_misfit
from dlc.dialects import tensor
from dlc.dialects.schedule import Schedule, ScheduleAttr
from dlc.passes.statistics import PassStatistics
from dlc.passes.tensor.schedule_epilogue import epilogue_run
from dlc.passes.tensor.schedule_policy import float_sum
from dlc.passes.tensor.schedule_records import (
    DEFAULT_SCHEDULE,
    TuningDatabase,
    TuningWarning,
    located,
    nest_summary,
    workload_key,
)


@functools.cache
def _context() -> Context:
    ctx = Context()
    ctx.load_dialect(Schedule)
    return ctx


def parse_attribute(text: str) -> Attribute:
    """The attribute `text` spells (schedules known); ValueError when it is none."""
    try:
        return Parser(_context(), text).parse_attribute()
    except ParseError as err:
        raise ValueError(str(err).strip().splitlines()[-1]) from None


def parse_schedule(text: str) -> ScheduleAttr:
    """The `#schedule.nest<...>` in `text`; ValueError when it is not one."""
    attr = parse_attribute(text)
    if not isinstance(attr, ScheduleAttr):
        raise ValueError(f"not a #schedule.nest: {text}")
    return attr


def misfit(op: tensor.ComputeOp, schedule: ScheduleAttr) -> str | None:
    """Why `schedule` cannot be the tuned schedule of `op`, or None: it does not fit
    the nest, or the code generator cannot carry it out (`schedule_misfit`, the
    lowering's own rules)."""
    if schedule.fusion is not None:
        return "a tuned schedule has no fusion group"
    members = epilogue_run(op)
    if schedule.epilogue > len(members):
        return f"epilogue {schedule.epilogue}: fewer computes after it qualify"
    why = schedule.check(op.domain, op.reduction_extents)
    if why is not None:
        return why
    return schedule_misfit(op, schedule, members[: schedule.epilogue])


def tuned_schedules(
    run: list[tensor.ComputeOp], db: TuningDatabase, cpu: str, stats: PassStatistics
) -> dict[tensor.ComputeOp, ScheduleAttr]:
    """The usable record's schedule of each compute of `run` that has one (module doc);
    a warning for each contraction that has none and each record not used."""
    out: dict[tensor.ComputeOp, ScheduleAttr] = {}
    for op in run:
        record, why = db.lookup(workload_key(op), cpu)
        if record is not None and record.schedule == DEFAULT_SCHEDULE:
            stats.count("nests the tuning database leaves to the default policy")
            continue
        if record is not None:
            try:
                schedule = parse_schedule(record.schedule)
                why = misfit(op, schedule) or ""
            except ValueError as err:
                why = f"its schedule does not parse ({err})"
            if not why:
                out[op] = schedule
                stats.count("nests scheduled from the tuning database")
                continue
            why = f"the record does not fit this nest: {why} (record {record.key} of {db.path})"
        elif not float_sum(op) or not op.reduction_extents:
            continue
        contraction = float_sum(op) and bool(op.reduction_extents)
        stats.count(
            "contractions without a usable tuning record"
            if contraction
            else "other nests whose tuning record is not used"
        )
        message = (
            f"schedule: no tuning record used for this nest ({nest_summary(op)}): {why}; "
            "the default policy schedules it"
        )
        warnings.warn(located(op, message), TuningWarning, stacklevel=2)
    return out
