"""The program being tuned: parsed once, its tensor level after `fuse` kept, and
from it the search spaces (contractions, `space.py`; fused groups and lone
element-wise or reduction nests, `space_groups.py`) and the check of a candidate
database (scheduled and lowered to the loop level, the record actually used)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from dlc import pipeline
from dlc.diagnostics import DiagnosticError
from dlc.dialects import tensor
from dlc.parser import parse_module
from dlc.passes.tensor.schedule import SchedulePass
from dlc.passes.tensor.schedule_records import TuningWarning
from dlc.passes.tensor.schedule_tuned_groups import tunable_units
from dlc.program_levels import defined_functions
from dlc.target import Target
from dlc.tuner.space import Space, make_space
from dlc.tuner.space_groups import GroupSpace, make_group_space


@dataclass
class Program:
    """The program being tuned, parsed, with its tensor level before scheduling."""

    source: str
    filename: str
    entry: str
    options: pipeline.Options
    graph: ModuleOp
    fused: ModuleOp  # tensor level after `fuse`, before `schedule`

    @staticmethod
    def load(source: str, filename: str, entry: str | None, options: pipeline.Options) -> Program:
        graph = parse_module(source, filename)
        funcs = defined_functions(graph)
        if entry is None:
            if len(funcs) != 1:
                names = ", ".join(f"@{n}" for n in sorted(funcs)) or "none"
                raise ValueError(f"choose the function to tune with entry (defined: {names})")
            entry = next(iter(funcs))
        if entry not in funcs:
            raise ValueError(f"no function @{entry} in {filename}")
        work = pipeline.run(graph.clone(), pipeline.steps(options, stop="tensor"))
        for p in pipeline.level_passes("tensor", options)[:-1]:  # fuse, not schedule
            p.apply(pipeline.context(), work)
        return Program(source, filename, entry, options, graph, work)

    def scheduled_blocks(self, db: str) -> list[list[tensor.ComputeOp]]:
        """The computes of each block of the entry function, scheduled with `db`."""
        scheduled = self.fused.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TuningWarning)
            self.schedule_pass(db).apply(pipeline.context(), scheduled)
        out = []
        for func in scheduled.body.block.ops:
            if isinstance(func, tensor.FuncOp) and func.sym_name.data == self.entry:
                for block in func.body.blocks:
                    out.append([op for op in block.ops if isinstance(op, tensor.ComputeOp)])
        return out

    def spaces(self, target: Target) -> list[Space]:
        """One space per distinct tunable contraction of the entry function."""
        out: dict[str, Space] = {}
        for computes in self.scheduled_blocks(""):
            for op in computes:
                space = make_space(op, target)
                if space is not None and space.info.key not in out:
                    out[space.info.key] = space
        return list(out.values())

    def group_spaces(self, target: Target, db: str) -> list[GroupSpace]:
        """One space per distinct tunable unit (fused group, lone element-wise or
        reduction nest) of the entry function scheduled with the records of `db`
        (the contractions' best: groups form around them as they will in a compile)."""
        out: dict[str, GroupSpace] = {}
        for computes in self.scheduled_blocks(db):
            for members in tunable_units(computes):
                space = make_group_space(members, target)
                if space.size > 1 and space.info.key not in out:
                    out[space.info.key] = space
        return list(out.values())

    def schedule_pass(self, db: str) -> SchedulePass:
        o = self.options
        return SchedulePass(target=o.target_cpu, group=o.fuse, fma=o.contract, tuning_db=db)

    def validate(self, db: str) -> str | None:
        """Why the lowering rejects the schedules of `db`, or why the schedule pass
        does not use one of its records; None when it takes them all."""
        from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import LowerTensorToLoopPass

        work = self.fused.clone()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", TuningWarning)
                self.schedule_pass(db).apply(pipeline.context(), work)
                LowerTensorToLoopPass().apply(pipeline.context(), work)
        except DiagnosticError as err:
            return err.message
        for w in caught:
            text = str(w.message)
            if "the record does not fit" in text:
                return text.split("warning: ", 1)[-1].splitlines()[0]
        return None
