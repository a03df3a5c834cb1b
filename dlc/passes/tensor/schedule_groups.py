"""Fusion groups of the `schedule` pass (step 2 of `schedule.py`'s docstring): runs of
consecutive computes lowered to one loop nest, with their feeders and register-only
members, checked by `dlc.dialects.tensor_groups.verify_group`, and the parallel loop of each
nest or group (step 4)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import SSAValue

from dlc.dialects import tensor
from dlc.dialects.tensor_groups import (
    fusion_of,
    group_members,
    identity_dims,
    reads_at_identity,
    reads_of,
    uses_of,
    verify_group,
)
from dlc.passes.tensor.schedule_policy import PARALLEL_WORK, kept_outside, parallel_loop, work


class _Group:
    """A run of consecutive computes lowered to one nest (step 2 of the module doc)."""

    def __init__(self, base: tuple[int, ...]) -> None:
        self.base = base
        self.members: list[tensor.ComputeOp] = []
        self.results: dict[SSAValue, tensor.ComputeOp] = {}
        self.pending: list[tensor.ComputeOp] = []  # trailing inner members, not yet settled
        self.feeds: dict[tensor.ComputeOp, tensor.ComputeOp] = {}  # feeder -> reduction

    def _new_base(self, op: tensor.ComputeOp) -> tuple[int, ...] | None:
        domain = op.domain[: kept_outside(op)]
        if op.combinator is not None and kept_outside(op) < len(op.domain):
            if len(self.base) < kept_outside(op):
                return None
        n = len(self.base)
        if domain[:n] == self.base:
            return self.base
        if self.base[: len(domain)] == domain:
            return domain
        return None

    def add(self, op: tensor.ComputeOp) -> bool:
        """Append `op` when the group stays legal; returns whether it did."""
        if self.members and op.prev_op is not self.members[-1]:
            return False
        if op.init is not None and op.init in self.results:
            return False
        base = self._new_base(op)
        if base is None:
            return False
        if base != self.base:  # rebuild with the shorter base (members become inner)
            group = _Group(base)
            if not all(group.add(m) for m in [*self.members, op]):
                return False
            self.__dict__.update(group.__dict__)
            return True
        inner = len(op.domain) > len(base)
        if inner and op.combinator is not None and kept_outside(op) != len(base):
            return False
        for value in op.inputs:
            if value in self.results and not all(
                identity_dims(op, r, base) for r in reads_of(op, value)
            ):
                return False  # another outer point's value: not computed yet
        if inner and op.combinator is not None:
            self.pending = []  # a reduction-outer member: its own inner nest
        elif inner:
            self.pending.append(op)
        else:
            if op.combinator is not None:
                self._settle_feeders(op)
            self.pending = []
        self.members.append(op)
        self.results[op.result] = op
        return True

    def _settle_feeders(self, reduction: tensor.ComputeOp) -> None:
        """The longest suffix of the pending inner members computable inside
        `reduction`'s loops: same extra axes, read there (and among themselves) only at
        the current point."""
        run: list[tensor.ComputeOp] = []
        for m in reversed(self.pending):
            if m.domain[len(self.base) :] != reduction.reduction_extents:
                break
            run.insert(0, m)
        for start in range(len(run)):
            feeders = run[start:]
            values = {f.result for f in feeders}
            readers = [*feeders, reduction]
            if all(reads_at_identity(r, v) for r in readers for v in values):
                for f in feeders:
                    self.feeds[f] = reduction
                return

    def register_only(self, member: tensor.ComputeOp) -> bool:
        """Every use of `member` is a read by a later member that gets the value in a
        register, or it accumulates in the next member's buffer (`internal`)."""
        uses = uses_of(member.result)
        if uses.blocked or not uses.reads:
            return False
        if not all(c in self.results.values() for c in uses.reads):
            return False
        if len(member.domain) == len(self.base):
            return True  # base values dominate everything later in the nest
        reduction = self.feeds.get(member)
        if member.combinator is not None:
            return self._accumulates_in_next(member, set(uses.reads))
        if reduction is None:
            return False  # stored by its own inner loops, read by loads
        return all(c is reduction or self.feeds.get(c) is reduction for c in uses.reads)

    def _accumulates_in_next(self, member: tensor.ComputeOp, readers: set) -> bool:
        i = self.members.index(member)
        if i + 1 >= len(self.members):
            return False
        after = self.members[i + 1]
        if after.combinator is not None or after in self.feeds or after.domain != member.domain:
            return False
        if after.result.type != member.result.type or readers != {after}:
            return False
        return reads_at_identity(after, member.result)


def group_computes(
    computes: list[tensor.ComputeOp], first_id: int, alone: Callable[[tensor.ComputeOp], bool]
) -> int:
    """Write the groups of the (default-scheduled) `computes`, leaving out those that
    are better `alone` (register-tiled contractions); returns the next free id."""
    groups: list[_Group] = []
    current: _Group | None = None
    for op in computes:
        if alone(op):
            current = None
            continue
        if current is not None and current.add(op):
            continue
        current = _Group(op.domain[: kept_outside(op)])
        current.add(op)
        groups.append(current)
    group_id = first_id
    for group in groups:
        if len(group.members) < 2:
            continue
        plain = {m: m.schedule for m in group.members}
        flags = {m: (m in group.feeds, group.register_only(m)) for m in group.members}
        for m in group.members:
            feeds, internal = flags[m]
            schedule = plain[m]
            assert schedule is not None, "step 1 scheduled every compute"
            m.schedule = schedule.with_group((group_id, len(group.base), feeds, internal))
        if verify_group(group.members) is not None:  # never a wrong result: keep them apart
            for m in group.members:
                m.schedule = plain[m]
            continue
        group_id += 1
    return group_id


def mark_parallel(run: list[tensor.ComputeOp]) -> None:
    """Step 4: the parallel loop of each nest (a group's: of its shared loops), when the
    nest's work is worth threads (`PARALLEL_WORK`)."""
    index = 0
    while index < len(run):
        members = group_members(run[index]) or [run[index]]
        index += len(members)
        fusion = fusion_of(members[0])
        limit = fusion[1] if fusion is not None else None
        chosen = parallel_loop(members[0], limit)
        if sum(work(m) for m in members) < PARALLEL_WORK:
            chosen = None
        for m in members:
            assert m.schedule is not None, "step 1 scheduled every compute"
            m.schedule = m.schedule.replaced(parallel=[chosen] if chosen else [])
