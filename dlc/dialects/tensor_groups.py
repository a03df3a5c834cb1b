"""Fusion groups of `tensor.compute`: membership, read analysis and legality.

A group (`group g at k` in the members' schedules, see `schedule.py`) is a run of
consecutive computes of one block lowered to ONE loop nest. Its *base* is the first
`k` output dimensions, which every member shares; the nest's outer loops run over the
base and, per base point, the members run in order:

- base members (domain == base): element-wise ones evaluated in registers, reductions
  as inner loops carrying their accumulator; later members read their values in
  registers;
- feeders (`feeds`): element-wise members over base + the reduction axes of the next
  reduction member, evaluated inside its loops and read there in registers;
- other inner members (longer domain): their own inner loops, storing to a buffer
  that later members load.

`verify_group` checks exactly what makes that evaluation compute the same values as
one nest per compute; `tensor.func`'s verifier runs it, so a hand-written or stale
group is a diagnostic, never a wrong result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_compute import ComputeOp, ConstantOp, ReadOp


@dataclass
class Uses:
    """How a tensor value is used: distinct read index lists per consumer compute, or
    `blocked` for any other use (returned, a reduction init, another op)."""

    reads: dict[ComputeOp, int] = field(default_factory=dict)
    indices: dict[ComputeOp, set[tuple[SSAValue, ...]]] = field(default_factory=dict)
    blocked: bool = False


def uses_of(value: SSAValue) -> Uses:
    uses = Uses()
    for use in value.uses:
        user = use.operation
        if isinstance(user, ReadOp):
            compute = user.parent_op()
            assert isinstance(compute, ComputeOp)
            uses.indices.setdefault(compute, set()).add(tuple(user.indices))
            uses.reads[compute] = len(uses.indices[compute])
        elif isinstance(user, ComputeOp) and use.index < len(user.inputs):
            continue  # the operand list entry; its reads are counted above
        else:
            uses.blocked = True
    return uses


def reads_of(consumer: ComputeOp, producer: SSAValue) -> list[ReadOp]:
    return [
        op for op in consumer.body.block.ops if isinstance(op, ReadOp) and op.tensor == producer
    ]


def is_zero_index(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr)
        and owner.value.value.data == 0
    )


def identity_dims(consumer: ComputeOp, read: ReadOp, dims: tuple[int, ...]) -> bool:
    """The first `len(dims)` indices of `read` are the consumer's own index variables
    (`0` allowed for extent-1 dimensions)."""
    args = consumer.body.block.args
    if len(read.indices) < len(dims) or len(args) < len(dims):
        return False
    for d, n in enumerate(dims):
        index = read.indices[d]
        if index is args[d] or (n == 1 and is_zero_index(index)):
            continue
        return False
    return True


def reads_at_identity(consumer: ComputeOp, producer: SSAValue) -> bool:
    """Every read of `producer` in `consumer` is at the consumer's own index variables
    (all of `producer`'s dimensions: for a reduction consumer, output then reduction)."""
    t = producer.type
    assert isinstance(t, TensorType)
    return all(identity_dims(consumer, r, t.dims) for r in reads_of(consumer, producer))


def next_compute(op: Operation) -> Operation | None:
    """The op after `op`, past any `tensor.constant`s (literals: no operands, lowered
    wherever they stand)."""
    current = op.next_op
    while isinstance(current, ConstantOp):
        current = current.next_op
    return current


def fusion_of(op: ComputeOp) -> tuple[int, int, bool, bool] | None:
    """(group id, at, feeds, internal) of a grouped compute, else None."""
    return op.schedule.fusion if op.schedule is not None else None


def group_members(first: ComputeOp) -> list[ComputeOp]:
    """The members of `first`'s group when `first` is its first member ([first] when
    it is in no group), else []."""
    fusion = fusion_of(first)
    if fusion is None:
        return [first]
    prev = first.prev_op
    if isinstance(prev, ComputeOp) and _same_group(prev, fusion[0]):
        return []
    members = [first]
    op = first.next_op
    while isinstance(op, ComputeOp) and _same_group(op, fusion[0]):
        members.append(op)
        op = op.next_op
    return members


def _same_group(op: ComputeOp, gid: int) -> bool:
    fusion = fusion_of(op)
    return fusion is not None and fusion[0] == gid


def base_of(members: list[ComputeOp]) -> tuple[int, ...]:
    fusion = fusion_of(members[0])
    assert fusion is not None
    return members[0].domain[: fusion[1]]


class _Members:
    """A group's members with their positions and the reduction each one feeds,
    computed once (a group can have hundreds of members: W2 x 200 has 800)."""

    def __init__(self, members: list[ComputeOp]) -> None:
        self.list = members
        self.position = {id(m): i for i, m in enumerate(members)}
        self._fed: dict[int, ComputeOp | None] = {}
        self.feeders: dict[int, list[ComputeOp]] = {}
        nxt: ComputeOp | None = None  # the next member that is not a feeder
        for m in reversed(members):
            self._fed[id(m)] = nxt
            if nxt is not None:
                self.feeders.setdefault(id(nxt), []).append(m)
            fusion = fusion_of(m)
            if fusion is None or not fusion[2]:
                nxt = m

    def __contains__(self, op: object) -> bool:
        return id(op) in self.position

    def index(self, op: ComputeOp) -> int:
        return self.position[id(op)]

    def fed(self, op: ComputeOp) -> ComputeOp | None:
        """The member `op` is evaluated in, if it is a feeder: the next member that is
        not a feeder."""
        return self._fed[id(op)]

    def fed_into(self, reduction: ComputeOp) -> list[ComputeOp]:
        """`reduction` and the members evaluated in it."""
        return [reduction, *self.feeders.get(id(reduction), [])]


def verify_group(members: list[ComputeOp]) -> tuple[Operation, str] | None:
    """(op, why) when the group `members` (consecutive, one id) is not legal."""
    base = base_of(members)
    k = len(base)
    results: dict[SSAValue, ComputeOp] = {m.result: m for m in members}
    view = _Members(members)
    for i, m in enumerate(members):
        fusion = fusion_of(m)
        assert fusion is not None
        if fusion[1] != k:
            return m, f"group {fusion[0]}: members must share `at {k}`"
        if m.domain[:k] != base:
            return m, f"group {fusion[0]}: the first {k} dimensions of every member must match"
        assert m.schedule is not None, "a group member has a schedule (its fusion)"
        order = m.schedule.loops(m.domain, m.reduction_extents)
        if [lp.name for lp in order[:k]] != [f"d{d}" for d in range(k)]:
            return m, f"group {fusion[0]}: the first {k} loops must be d0 ... d{k - 1}, untiled"
        if m.init is not None and m.init in results:
            return m, f"group {fusion[0]}: a reduction init cannot come from the same group"
        for value in m.inputs:
            producer = results.get(value)
            if producer is not None and view.index(producer) >= i:
                return m, f"group {fusion[0]}: members read only earlier members"
            if producer is not None and not all(
                identity_dims(m, r, base) for r in reads_of(m, value)
            ):
                return m, f"group {fusion[0]}: a member reads another point of the shared loops"
        why = _check_feeds(view, m) if fusion[2] else None
        why = why or (_check_internal(view, m) if fusion[3] else None)
        if why:
            return m, f"group {fusion[0]}: {why}"
    return None


def _check_feeds(members: _Members, feeder: ComputeOp) -> str | None:
    base = base_of(members.list)
    reduction = members.fed(feeder)
    if feeder.combinator is not None:
        return "a feeder must be element-wise"
    if reduction is None or reduction.combinator is None or reduction.domain != base:
        return "a feeder must precede a reduction over the shared loops"
    if feeder.domain != (*base, *reduction.reduction_extents):
        return "a feeder's domain must be the shared loops and the reduction's axes"
    assert reduction.schedule is not None, "a group member has a schedule (its fusion)"
    loops = reduction.schedule.loops(reduction.domain, reduction.reduction_extents)
    if any(not lp.is_reduction for lp in loops[len(base) :]):
        return "the reduction a feeder feeds must loop over its reduction axes only"
    for reader in members.fed_into(reduction):
        if not reads_at_identity(reader, feeder.result):
            return "a feeder must be read at the reduction's current point"
    return None


def _check_internal(members: _Members, m: ComputeOp) -> str | None:
    """An internal member needs no buffer: every use is a register read, or (a
    reduction over more than the shared loops) it accumulates in the next member's."""
    uses = uses_of(m.result)
    if uses.blocked or not uses.reads or not all(c in members for c in uses.reads):
        return "an internal member must be used only by later members"
    base = base_of(members.list)
    fusion = fusion_of(m)
    assert fusion is not None
    if m.domain == base:
        return None  # base values are in registers for everything later in the nest
    if fusion[2]:
        reduction = members.fed(m)
        if all(c is reduction or members.fed(c) is reduction for c in uses.reads):
            return None
        return "an internal feeder must be read only by its reduction and its feeders"
    i = members.index(m)
    after = members.list[i + 1] if i + 1 < len(members.list) else None
    if (
        m.combinator is not None
        and after is not None
        and after.combinator is None
        and not (fusion_of(after) or (0, 0, False, False))[2]
        and after.result.type == m.result.type
        and set(uses.reads) == {after}
        and reads_at_identity(after, m.result)
    ):
        return None  # accumulates in the next member's buffer, updated in place
    return "an internal member over more than the shared loops needs a buffer"
