"""schedule: the default schedule policy, written as `#schedule.nest` attributes.

Input: verified tensor level (after `fuse`). Every `tensor.compute` without a schedule
gets one from a `Target`: loop order, fusion groups, register and cache tiles, a parallel
loop, split rows; a user's or the tuner's schedule is kept. Results do not change. The policy, step by
step with its measurements: docs/design/schedules.md, "The default policy".
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dlc.analysis.kernel_origins import mark_tuned
from dlc.analysis.levels import require_level
from dlc.dialects import tensor
from dlc.dialects.schedule import ScheduleAttr
from dlc.passes.statistics import PassStatistics
from dlc.passes.tensor.schedule_conv import conv_schedule, conv_tiles
from dlc.passes.tensor.schedule_epilogue import (
    drop_conflicting_epilogues,
    epilogue_run,
    in_full_vectors,
)
from dlc.passes.tensor.schedule_gather import gathered_rows_schedule, serial_gathered_rows
from dlc.passes.tensor.schedule_groups import group_computes, mark_parallel
from dlc.passes.tensor.schedule_miscompile import miscompile, planted_line
from dlc.passes.tensor.schedule_policy import (
    default_order,
    dot_tiles,
    float_sum,
    plain_schedule,
    tiled_schedule,
    transpose_schedule,
)
from dlc.passes.tensor.schedule_records import TuningDatabase
from dlc.passes.tensor.schedule_split import split_points
from dlc.passes.tensor.schedule_tuned import tuned_schedules
from dlc.passes.tensor.schedule_tuned_groups import group_records
from dlc.passes.tensor.schedule_unfold import unfolded_rows_schedule
from dlc.target import Target


@dataclass(frozen=True)
class SchedulePass(ModulePass, PassStatistics):
    """Write the default schedule of every `tensor.compute` that has none (module doc).

    Input: verified tensor level. Afterwards every compute has a schedule; computes
    that had one keep it. `target` names the CPU model (`host`, or an LLVM name such as
    `haswell`) of the architecture of `triple` ("": this machine's, else e.g.
    `aarch64-linux-gnu`, see `dlc.target.FOREIGN_ARCHES`); `group=false` forms no fusion
    groups and no epilogues; `fma=true` lets float sums fuse
    their multiply-adds where the target has FMA (the pipeline's default at
    opt_level >= 2). `tuning_db` names a tuning database (`schedule_records.py`): a
    compute whose workload has a record for the target takes the record's schedule
    and joins no group (`schedule_tuned.py`), then each fused group and lone
    element-wise or reduction nest takes its group record's member schedules
    (`schedule_tuned_groups.py`); a contraction, group or lone nest without a usable
    record is a `TuningWarning` saying why; all are counted in the pass statistics.
    """

    name = "schedule"

    target: str = "host"
    triple: str = ""
    group: bool = True
    fma: bool = False
    tuning_db: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "tensor", self.name)
        target = Target.from_cpu(self.target, self.triple)
        db = TuningDatabase.load(self.tuning_db) if self.tuning_db else None
        next_id = 1 + max(_group_ids(op), default=-1)
        planted = planted_line()  # a test-only fault (schedule_miscompile.py)
        for compute in op.walk() if planted else ():
            if isinstance(compute, tensor.ComputeOp):
                miscompile(compute, planted)
        for func in op.body.block.ops:
            if not isinstance(func, tensor.FuncOp):
                continue
            for block in func.body.blocks:
                runs = _runs_to_schedule(list(block.ops))
                for run in runs:
                    gathered: list[tensor.ComputeOp] = []
                    tuned = tuned_schedules(run, db, target.cpu, self) if db else {}
                    for c in run:
                        c.schedule = plain_schedule(c, default_order(c, target))
                    convs = {c: conv_tiles(c, target) for c in run}  # before groups (step 3)
                    tiled = {c for c in run if convs[c] or dot_tiles(c, target)}
                    epilogues = {c: epilogue_run(c) for c in tiled - set(tuned) if self.group}
                    apart = in_full_vectors(epilogues, convs)  # nests of their own, no group
                    epilogues |= {c: epilogue_run(c)[: s.epilogue] for c, s in tuned.items()}
                    members = {m for ms in epilogues.values() for m in ms}
                    if self.group:
                        alone = tiled | set(tuned) | members | apart
                        next_id = group_computes(run, next_id, alone.__contains__)
                    for c in run:
                        tiles = dot_tiles(c, target)
                        if tiles is not None:
                            c.schedule = tiled_schedule(c, tiles)
                        conv = convs[c]
                        if conv is not None:
                            c.schedule = conv_schedule(c, conv)
                        rows = gathered_rows_schedule(c, target)
                        if rows is not None:
                            gathered.append(c)
                        blocks = transpose_schedule(c) or rows or unfolded_rows_schedule(c, target)
                        if blocks is not None:
                            c.schedule = blocks
                        if self.fma and target.fma and float_sum(c):
                            assert c.schedule is not None
                            c.schedule = c.schedule.replaced(fma=True)
                    for c, ms in epilogues.items():
                        assert c.schedule is not None
                        c.schedule = c.schedule.replaced(epilogue=len(ms))
                    mark_parallel([c for c in run if c not in members])
                    for c in run:
                        points = split_points(c) if c not in members else []
                        if points:
                            last = f"d{len(c.domain) - 1}"
                            assert c.schedule is not None
                            c.schedule = c.schedule.replaced(split={last: points})
                    for m in members:
                        m.schedule = ScheduleAttr()
                    for c in gathered:
                        serial_gathered_rows(c)
                    for c, schedule in tuned.items():
                        c.schedule = schedule
                        mark_tuned(c)
                    if db is not None:
                        group_records(run, db, target.cpu, self, frozenset(tuned))
                drop_conflicting_epilogues([c for run in runs for c in run])


def _runs_to_schedule(ops: list[Operation]) -> list[list[tensor.ComputeOp]]:
    """Maximal runs of consecutive computes without a schedule, literals between them
    aside (an epilogue reaches past them: `next_compute`; in two runs, the second
    would schedule the first one's epilogue members again)."""
    runs: list[list[tensor.ComputeOp]] = []
    current: list[tensor.ComputeOp] = []
    for op in ops:
        if isinstance(op, tensor.ComputeOp) and op.schedule is None:
            current.append(op)
            continue
        if isinstance(op, tensor.ConstantOp):
            continue
        if current:
            runs.append(current)
        current = []
    if current:
        runs.append(current)
    return runs


def _group_ids(module: ModuleOp) -> list[int]:
    return [
        c.schedule.fusion[0]
        for c in module.walk()
        if isinstance(c, tensor.ComputeOp) and c.schedule is not None and c.schedule.fusion
    ]
