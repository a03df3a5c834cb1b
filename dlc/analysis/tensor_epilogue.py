"""Epilogues of `tensor.compute`: which computes `epilogue n` of a reduction's
schedule (dlc/dialects/schedule.py) takes, and whether they may be taken.

The members are the next `n` ops (literals between them aside), each an element-wise
`tensor.compute` over the same domain, in no fusion group and without an epilogue of
its own, reading the reduction's result and the earlier members' only at the current
point. The code generator (dlc/lowering/tensor_to_loop/epilogue.py) carries a legal
epilogue out; the `schedule` pass checks the ones it writes with `epilogue_conflict`
before they reach it.
"""

from __future__ import annotations

from xdsl.ir import Operation

from dlc.diagnostics import error_at
from dlc.dialects import tensor
from dlc.dialects.tensor_groups import next_compute, reads_at_identity


def epilogue_conflict(op: tensor.ComputeOp) -> str | None:
    """Why `op`'s schedule cannot take its epilogue (a message), else None."""
    count = op.schedule.epilogue if op.schedule is not None else 0
    if not count:
        return None
    if op.combinator is None:
        return "schedule: epilogue: only a reduction has one"
    members: list[tensor.ComputeOp] = []
    current: Operation = op
    for _ in range(count):
        member = next_compute(current)
        why = _why_not(op, member, members)
        if why is not None:
            return f"schedule: epilogue {count}: {why}"
        assert isinstance(member, tensor.ComputeOp)
        members.append(member)
        current = member
    return None


def epilogue_members(op: tensor.ComputeOp) -> list[tensor.ComputeOp]:
    """The computes `op`'s schedule takes as its epilogue (module docstring), the
    `tensor.constant`s between them aside; a located diagnostic when it cannot."""
    why = epilogue_conflict(op)
    if why is not None:
        raise error_at(op, why)
    members: list[tensor.ComputeOp] = []
    current: Operation = op
    for _ in range(op.schedule.epilogue if op.schedule is not None else 0):
        member = next_compute(current)
        assert isinstance(member, tensor.ComputeOp)
        members.append(member)
        current = member
    return members


def _why_not(op: tensor.ComputeOp, member: object, earlier: list[tensor.ComputeOp]) -> str | None:
    position = f"op {len(earlier) + 1} after it"
    if not isinstance(member, tensor.ComputeOp):
        name = getattr(member, "name", "nothing")
        return f"{position} is {name}, not a tensor.compute"
    if member.combinator is not None:
        return f"{position} is a reduction"
    if member.domain != op.domain:
        return f"{position} has another domain ({member.domain} instead of {op.domain})"
    schedule = member.schedule
    if schedule is not None and (schedule.fusion is not None or schedule.epilogue):
        return f"{position} is in a fusion group or has an epilogue"
    for value in [op.result, *(m.result for m in earlier)]:
        if not reads_at_identity(member, value):
            return f"{position} reads an earlier result at another point"
    return None
