"""One loop nest for a fusion group of computes (dlc/dialects/tensor_groups.py).

The outer loops run over the group's base (its shared loops `d0 ... d(k-1)`); inside,
each member in order is emitted by the nest builder starting from the base point:
base members leave their value in a register for later members, feeders (`feeds`)
are evaluated at each reduction point of the next reduction member, other members
run their own inner loops into their buffers. `internal` members get no buffer; an
internal reduction over more than the base accumulates in the next member's buffer.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.builder import Builder, InsertPoint
from xdsl.ir import SSAValue

from dlc.analysis.tensor_nest_plan import group_slots
from dlc.diagnostics import copy_loc
from dlc.dialects import loop, tensor
from dlc.dialects.tensor_groups import base_of, fusion_of, group_members
from dlc.lowering.tensor_to_loop.body import index
from dlc.lowering.tensor_to_loop.nest import Feeder, NestBuilder


def emit_group(
    b: Builder,
    first: tensor.ComputeOp,
    buffers: dict[SSAValue, SSAValue],
    new_buffer: Callable[[SSAValue], SSAValue],
) -> None:
    """Emit `first`'s whole group at `b` (nothing when `first` is a later member);
    `new_buffer(value)` allocates (or assigns) the buffer of a member's result."""
    members = group_members(first)
    if not members:
        return
    emit_group_loops(b, members, group_buffers(members, new_buffer), buffers)


def group_buffers(
    members: list[tensor.ComputeOp], new_buffer: Callable[[SSAValue], SSAValue]
) -> dict[SSAValue, SSAValue]:
    """The buffers of the group's results (`internal` members have none)."""
    return {m.result: new_buffer(m.result) for m in members if not _flags(m)[1]}


def emit_group_loops(
    b: Builder,
    members: list[tensor.ComputeOp],
    own: dict[SSAValue, SSAValue],
    buffers: dict[SSAValue, SSAValue],
) -> None:
    """The group's nest at `b`, its members' results in `own` (`group_buffers`)."""
    first = members[0]
    base = base_of(members)
    parallel = first.schedule.parallel_loops if first.schedule is not None else frozenset()
    ivs: list[SSAValue] = []
    for d, n in enumerate(base):
        nest = b.insert(
            loop.ForOp(index(b, 0), index(b, n), index(b, 1), parallel=f"d{d}" in parallel)
        )
        copy_loc(first, nest)
        terminator = loop.YieldOp()
        nest.body.block.add_op(terminator)
        ivs.append(nest.iv)
        b = Builder(InsertPoint.before(terminator))
    known: dict[SSAValue, SSAValue] = {}
    feeders: list[Feeder] = []
    for slot in group_slots(members):
        member = slot.member
        buffer = own[slot.buffer.result] if slot.buffer is not None else None
        if slot.feeds:
            feeders.append(Feeder(member, buffer))
            continue
        if buffer is not None and slot.buffer is not member:
            buffers[member.result] = buffer  # accumulates in the next member's buffer
        builder = NestBuilder(
            member, buffer, buffers, prefix=ivs, known=known, feeders=feeders if slot.fed else ()
        )
        value = builder.emit(b)
        if member.combinator is not None:
            feeders = []
        if value is not None:
            known[member.result] = value
    assert not feeders, "feeders precede the reduction they feed"


def _flags(member: tensor.ComputeOp) -> tuple[bool, bool]:
    fusion = fusion_of(member)
    assert fusion is not None
    return fusion[2], fusion[3]
