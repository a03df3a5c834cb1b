"""What the code generator makes of a `tensor.compute`'s `#schedule.nest`, decided
before it emits anything, and why it cannot carry a schedule out.

`NestPlan(op, ...)` places the reduction's accumulators (in memory, or in registers
along a chain of reduction loops with the unrolled loops inside them as the register
tile), plans the vector lanes of `vectorize`, the packed operand of `pack` and the
lane plans of an `epilogue`, and counts the copies of each unrolled loop and of the
register tile; what it cannot carry out is a located `DiagnosticError` ("not supported
by the code generator yet: vectorize d0: ..."). The nest builder
(dlc/lowering/tensor_to_loop/nest.py) is a `NestPlan` that also emits the loops; the
`schedule` pass asks `schedule_misfit` of every schedule it takes from a tuning
record, so both follow one definition of what lowers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from dlc.analysis.tensor_lanes import VECTOR_READS, lane_plan, vector_pieces
from dlc.diagnostics import DiagnosticError, error_at
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.schedule import Loop, ScheduleAttr, axis_names
from dlc.dialects.tensor_groups import base_of, fusion_of

MAX_UNROLLED_POINTS = 4096
"""At most this many copies of a body per unrolled nest (or accumulator tile)."""

FLOATS = ("f16", "f32", "f64")


def check_unroll(op: Operation, copies: int) -> None:
    """A located diagnostic when unrolling makes more than `MAX_UNROLLED_POINTS` copies."""
    if copies > MAX_UNROLLED_POINTS:
        raise error_at(
            op, f"schedule: unrolling makes {copies} copies (at most {MAX_UNROLLED_POINTS})"
        )


def schedule_misfit(
    op: tensor.ComputeOp, schedule: ScheduleAttr, epilogue: Sequence[tensor.ComputeOp] = ()
) -> str | None:
    """Why the code generator cannot carry out `schedule` for `op` lowered as a nest of
    its own (in no fusion group) with the computes `epilogue` at its register tile, or
    None. Call `schedule.check` first."""
    try:
        NestPlan(op, schedule=schedule, has_scratch=True, epilogue=epilogue)
    except DiagnosticError as err:
        return err.message
    return None


def group_misfit(members: Sequence[tensor.ComputeOp]) -> str | None:
    """Why the code generator cannot carry out the member schedules of a fusion group
    (as its one nest, `group_slots`), or None. Call `verify_group` first."""
    base = len(base_of(list(members)))
    for slot in group_slots(members):
        if slot.feeds:
            continue  # evaluated inside the next reduction member's nest
        try:
            NestPlan(
                slot.member,
                prefix=base,
                known=slot.known,
                fed=slot.fed,
                has_buffer=slot.buffer is not None,
            )
        except DiagnosticError as err:
            return f"member {list(members).index(slot.member)}: {err.message}"
    return None


def in_register(op: tensor.ComputeOp, prefix: int) -> bool:
    """Whether `op`'s nest below `prefix` given output axes is one point: its value
    stays in a register (later group members read it there)."""
    return not op.domain[prefix:]


@dataclass(frozen=True)
class GroupSlot:
    """How a fusion group's nest computes one member (dlc/lowering/tensor_to_loop/group.py)."""

    member: tensor.ComputeOp
    feeds: bool  # evaluated at each reduction point of the next reduction member
    buffer: tensor.ComputeOp | None  # whose result's buffer it writes (None: registers only)
    fed: bool  # feeders are evaluated at each of its reduction points
    known: bool  # earlier members' values are in registers


def group_slots(members: Sequence[tensor.ComputeOp]) -> list[GroupSlot]:
    """The members of a group in order: `internal` members get no buffer of their own,
    an internal reduction over more than the base accumulates in the next member's
    buffer, and a member over the base alone leaves its value in a register."""
    base = base_of(list(members))
    slots: list[GroupSlot] = []
    feeders, known = False, False
    for i, member in enumerate(members):
        fusion = fusion_of(member)
        assert fusion is not None
        _, _, feeds, internal = fusion
        buffer = None if internal else member
        if feeds:
            slots.append(GroupSlot(member, True, buffer, False, known))
            feeders = True
            continue
        reduction = member.combinator is not None
        if internal and reduction and member.domain != base:
            buffer = members[i + 1]
        slots.append(GroupSlot(member, False, buffer, reduction and feeders, known))
        feeders = feeders and not reduction
        known = known or in_register(member, len(base))
    return slots


@dataclass
class PackPlan:
    """What `pack [n]` packs, where, and the state of the block being packed."""

    read: tensor.ReadOp
    pos: int  # the loop before which the block is packed
    width: int  # NR: columns per panel
    depth: int  # KC: rows of K per panel slot
    panels: int
    constant: tuple[tensor.ConstantOp, bool] | None = None  # B's literal, transposed?
    buffer: SSAValue | None = None  # the scratch buffer (allocated by emission)
    k_base: SSAValue | None = None  # the first k of the block packed last


class NestPlan:
    """The plan of one compute's nest (module docstring). `prefix` output axes are
    given by an enclosing group's loops; `known` (values of earlier group members in
    registers), `fed` (feeders evaluated at each reduction point), `has_buffer` (the
    result has memory) and `has_scratch` (a packed operand can get a buffer) describe
    where the nest is emitted; `epilogue` are the computes at its register tile."""

    def __init__(
        self,
        op: tensor.ComputeOp,
        *,
        schedule: ScheduleAttr | None = None,
        prefix: int = 0,
        known: bool = False,
        fed: bool = False,
        has_buffer: bool = True,
        has_scratch: bool = False,
        epilogue: Sequence[tensor.ComputeOp] = (),
    ) -> None:
        self.op = op
        t = op.result.type
        assert isinstance(t, TensorType)
        self.dt: str = t.dt
        if schedule is None:
            schedule = op.schedule or ScheduleAttr()
        self.schedule = schedule
        self.axes = axis_names(len(op.domain), len(op.reduction_extents))
        self.extents = dict(zip(self.axes, [*op.domain, *op.reduction_extents], strict=True))
        self.prefix_axes = frozenset(self.axes[:prefix])
        self.loops: list[Loop] = schedule.loops(op.domain, op.reduction_extents)[prefix:]
        self.unrolled = schedule.unrolled_loops
        self.parallel = schedule.parallel_loops
        self.splits = schedule.split_points
        self.fma = schedule.fma
        self.in_group = bool(prefix) or known
        self._plan_accumulators(has_buffer)
        self._plan_lanes(fed)
        self._plan_pack(fed or not has_scratch)
        self._plan_epilogue(list(epilogue))
        self._plan_unroll()

    def _plan_accumulators(self, has_buffer: bool) -> None:
        """Where the reduction's accumulators live: in registers along the chain of the
        innermost reduction loops when every loop inside them is unrolled (the register
        tile), else in memory (element-wise: an unrolled last loop is the tile)."""
        positions = [i for i, lp in enumerate(self.loops) if lp.is_reduction]
        self.first_reduction = positions[0] if positions else None
        self.chain: tuple[int, int] | None = None  # [start, end) of the register chain
        self.tile: list[Loop] = []
        self.memory_init = False
        if self.op.combinator is None:
            innermost = self.loops[-1:]
            self.tile = [lp for lp in innermost if lp.name in self.unrolled]
            return
        if not positions:  # no reduction loops left (only in a group: none at all)
            self.chain = (len(self.loops), len(self.loops))
            return
        last = positions[-1]
        trailing = self.loops[last + 1 :]
        if all(lp.name in self.unrolled for lp in trailing):
            start = last
            while start > 0 and self.loops[start - 1].is_reduction:
                start -= 1
            self.chain, self.tile = (start, last + 1), trailing
        self.memory_init = self.chain is None or self.chain[0] != positions[0]
        if self.memory_init and not has_buffer:
            raise error_at(self.op, "schedule: a reduction accumulating in memory needs a buffer")

    def _plan_lanes(self, fed: bool) -> None:
        """The vectorized loop and its lane plan (`lane_plan`), or a diagnostic."""
        self.lanes, self.lane_loop, self.lane_plan, self.lane_axis = 1, "", {}, ""
        if self.schedule.vector is None:
            return
        name, width = self.schedule.vector
        tile = {lp.name: lp for lp in self.tile}
        why = None
        if name not in tile or tile[name].step != 1:
            why = "only the innermost level of an axis in an unrolled register tile"
        elif fed or (self.op.combinator is not None and self.in_group):
            why = "a reduction inside a fusion group"
        elif self.dt not in FLOATS:
            why = f"only float results, not {self.dt}"
        else:
            plan = lane_plan(self.op, self.axes.index(tile[name].axis))
            if isinstance(plan, str):
                why = plan
            else:
                self.lanes, self.lane_loop, self.lane_plan = width, name, plan
                self.lane_axis = tile[name].axis
        if why is not None:
            raise error_at(
                self.op, f"not supported by the code generator yet: vectorize {name}: {why}"
            )

    def _plan_pack(self, no_scratch: bool) -> None:
        """`self.pack`: the plan of the schedule's `pack`, None without one, or a
        located diagnostic saying why it cannot be carried out."""
        self.pack: PackPlan | None = None
        packed = self.schedule.packed
        if not packed:
            return
        plan = self._pack_plan(packed, no_scratch)
        if isinstance(plan, str):
            listed = ", ".join(map(str, packed))
            raise error_at(
                self.op, f"not supported by the code generator yet: pack [{listed}]: {plan}"
            )
        self.pack = plan

    def _pack_plan(self, packed: tuple[int, ...], no_scratch: bool) -> PackPlan | str:
        op = self.op
        if len(packed) != 1:
            return "one operand at a time"
        (n,) = packed
        if n >= len(op.inputs):
            return f"the compute has {len(op.inputs)} inputs"
        if len(op.domain) != 2 or len(op.reduction_extents) != 1 or op.combinator is None:
            return "only an operand of a matrix product (two output axes, one reduction)"
        if self.in_group or no_scratch:
            return "not inside a fusion group"
        reads = [
            r
            for r in op.body.block.ops
            if isinstance(r, tensor.ReadOp) and r.tensor is op.inputs[n]
        ]
        if len(reads) != 1:
            return f"input {n} must be read once by the body"
        why = _read_shape(op, reads[0])
        if why is not None:
            return why
        return self._pack_place(reads[0])

    def _pack_place(self, read: tensor.ReadOp) -> PackPlan | str:
        columns = [lp for lp in self.tile if lp.axis == "d1" and lp.step == 1]
        if self.chain is None or not columns:
            return "the columns' innermost loop must be in the unrolled register tile"
        rows = [i for i, lp in enumerate(self.loops) if lp.axis == "d0"]
        if not rows or rows[0] >= self.chain[0]:
            return "a loop over the rows must lie outside the reduction loops"
        pos = rows[0]
        k_loops = [lp for lp in self.loops[:pos] if lp.axis == "r0"]
        depth = k_loops[-1].step if k_loops else self.op.reduction_extents[0]
        width = columns[0].block
        panels = -(-self.op.domain[1] // width)
        constant = _literal(self.op, read)
        if constant is not None:  # packed at compile time: all of K, no copy loops
            return PackPlan(read, -1, width, self.op.reduction_extents[0], panels, constant)
        return PackPlan(read, pos, width, depth, panels)

    def _plan_epilogue(self, members: list[tensor.ComputeOp]) -> None:
        """The members' lane plans (the tile's vectorized axis), or a diagnostic."""
        self.epilogue_plans: dict[tensor.ComputeOp, dict] = {}
        for m in members if self.lanes > 1 else ():
            plan = lane_plan(m, self.axes.index(self.lane_axis), functions=True)
            t = m.result.type
            if isinstance(plan, str) or not isinstance(t, TensorType) or t.dt not in FLOATS:
                why = plan if isinstance(plan, str) else "not a float result"
                raise error_at(m, f"not supported by the code generator yet: epilogue: {why}")
            self.epilogue_plans[m] = plan
        if members and self.chain is None:
            raise error_at(
                self.op,
                "schedule: epilogue: the accumulators must be in registers"
                " (the loops inside the reduction loops unrolled)",
            )

    def _plan_unroll(self) -> None:
        """Each unrolled loop outside the register tile, and the tile's points, make at
        most `MAX_UNROLLED_POINTS` copies of the body, in every block they run over."""
        tile = self.tile if self.chain is not None else []
        for lp in self.loops:
            if lp.name in self.unrolled and lp not in tile and lp.name != self.lane_loop:
                check_unroll(self.op, max(e // max(1, lp.step) for e in self._block_extents(lp)))
        copies = 1
        for lp in tile:
            copies *= max(len(self._pieces(e, lp)) for e in self._block_extents(lp))
        check_unroll(self.op, copies)

    def _block_extents(self, lp: Loop) -> set[int]:
        """The extents of the blocks loop `lp` runs over: its axis' extent cut by the
        steps of the levels above it (full blocks and remainders)."""
        extents = {1 if lp.axis in self.prefix_axes else self.extents[lp.axis]}
        for step in self.schedule.tile_sizes.get(lp.axis, ())[: lp.level]:
            extents = {step for e in extents if e >= step} | {e % step for e in extents if e % step}
        return extents or {0}

    def _pieces(self, extent: int, lp: Loop) -> list[tuple[int, int, int]]:
        """(start, size, lanes) of a register tile loop's points over a block."""
        if lp.name == self.lane_loop:
            return self._lane_pieces(extent, lp)
        return [(x, min(lp.step, extent - x), 1) for x in range(0, extent, lp.step)]

    def _lane_pieces(self, extent: int, lp: Loop) -> list[tuple[int, int, int]]:
        """(start, valid columns, lanes) of the vectorized loop's points: narrower
        vectors for a partial block (`vector_pieces`), or, over a packed B whose
        panels are zero-padded to the block (`pack`), whole vectors only (no
        column tail in the microkernel: the lanes past the valid columns fold zeros
        and are neither loaded from nor stored to the output)."""
        pack = self.pack
        padded = (
            pack is not None
            and lp.block == pack.width
            and pack.width % self.lanes == 0
            and all(k not in VECTOR_READS or o is pack.read for o, k in self.lane_plan.items())
        )
        if not padded:
            return vector_pieces(extent, self.lanes)
        return [(x, min(self.lanes, extent - x), self.lanes) for x in range(0, extent, self.lanes)]


def _literal(op: tensor.ComputeOp, read: tensor.ReadOp) -> tuple[tensor.ConstantOp, bool] | None:
    """B's literal and whether it is read transposed (`B[j, k]`), when `read` reads a
    float `tensor.constant` directly at `[k, j]` or `[j, k]`; else None."""
    owner = read.tensor.owner
    _, columns, k = op.body.block.args
    t = read.tensor.type
    if not isinstance(owner, tensor.ConstantOp) or owner.is_splat():
        return None
    if not isinstance(t, TensorType) or t.dt not in FLOATS:
        return None  # packed at run time
    indices = list(read.indices)
    if indices not in ([k, columns], [columns, k]):
        return None
    return owner, indices[0] is columns


def index_slice(read: tensor.ReadOp) -> set[Operation]:
    """The body ops the read's indices are computed by."""
    block = read.parent_block()
    out: set[Operation] = set()
    stack = list(read.indices)
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and owner.parent_block() is block and owner not in out:
            out.add(owner)
            stack.extend(owner.operands)
    return out


def _read_shape(op: tensor.ComputeOp, read: tensor.ReadOp) -> str | None:
    """Why `read` is not a packable B operand (varies along the rows, not along the
    columns or the reduction, or its indices read a tensor), or None."""
    rows, columns, k = op.body.block.args
    needed = index_slice(read)
    if any(isinstance(o, tensor.ReadOp) for o in needed):
        return "the packed read's indices read a tensor"
    used = {v for o in needed for v in o.operands} | set(read.indices)
    if rows in used:
        return "the packed operand varies along the rows (d0); pack the one along d1 and r0"
    if columns not in used or k not in used:
        return "the packed operand must vary along the columns (d1) and the reduction (r0)"
    return None
