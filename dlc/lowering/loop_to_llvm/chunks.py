"""Runs of top-level nests for `lower-loop-to-llvm`'s function splitting, and their keys.

A large function's top-level loop nests are outlined in runs (`parallel.py`,
`lower_split_chunk`). Long programs repeat themselves (a chain of 200 softmaxes is one
softmax 200 times), so the runs are cut where they repeat: a run ends, once it holds
`budget` ops, right before a nest of the block's most frequent shape (or at twice the
budget). Every run but the first then starts at the same phase of the repetition, and
runs of the same length come out alike. A block that repeats itself often is cut in
shorter runs (`REPEATS`).

`chunk_key` describes a run structurally: its ops, their properties and types, how
their operands refer to each other and to the values from outside (by position among
the values captured or passed), and the source locations of the ops whose code embeds
a message. Two runs with the same key lower to the same code, so the second is a call
of the first's function: the IR LLVM optimizes, and the Python that builds it, shrink
by the number of repetitions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dlc.analysis.walk import walk_ops
from dlc.diagnostics import location_prefix
from dlc.dialects import loop
from dlc.dialects import loop_memory as lm

REPEATS = 8
"""A block whose most frequent nest shape occurs this often is cut in runs of a
quarter of the budget: the runs alike are compiled once (about three runs' worth of
code for a chain of 200 softmaxes, LLVM's time a quarter of what full-size runs
cost), the calls, one per run, stay few (29 there)."""

_ACCESSES = (loop.LoadOp, loop.StoreOp, loop.VLoadOp, loop.VStoreOp, loop.BroadcastOp)


def is_nest(op: Operation, walked: list[Operation]) -> bool:
    """A loop nest: a `loop.for`, or a `loop.if` holding one (`walked`: `walk_ops(op)`;
    a module with symbolic dimensions chooses between a nest's threaded and serial
    versions at run time)."""
    if isinstance(op, loop.ForOp):
        return True
    return isinstance(op, loop.IfOp) and any(isinstance(inner, loop.ForOp) for inner in walked)


def can_split(op: Operation, walked: list[Operation]) -> bool:
    """A top-level op `lower_split_chunk` can outline (`walked`: `walk_ops(op)`): a loop
    nest (`is_nest`) without arena or stack allocation and without calls (the outlined
    function has no arena block or stack guard of its own; a buffer sized at run time
    comes from the ctx's arena or the heap, which it can reach), or a scalar `arith` /
    `math` op; neither taking nor giving a vector value across its boundary (a run's
    values cross in 8-byte slots: a register tile whose outer loops have one iteration
    leaves its accumulators and epilogue at the top level)."""
    if _vectors_cross(op, walked):
        return False
    if is_nest(op, walked):
        unsafe = (loop.AllocOp, loop.CallOp, lm.ScalarCallOp, lm.StackAllocOp, loop.ExternCallOp)
        return not any(isinstance(inner, unsafe) for inner in walked)
    return not op.regions and op.name.startswith(("arith.", "math."))


def _vectors_cross(op: Operation, walked: list[Operation]) -> bool:
    """`op` gives a vector result, or an op in it uses a vector defined outside it."""
    if any(isinstance(r.type, VectorType) for r in op.results):
        return True
    inside = {id(inner) for inner in walked}
    for inner in walked:
        for value in inner.operands:
            if not isinstance(value.type, VectorType):
                continue
            owner = value.owner.parent_op() if isinstance(value.owner, Block) else value.owner
            if id(owner) not in inside:
                return True
    return False


def split_chunks(
    ops: Iterable[Operation], budget: int, walks: dict[Operation, list[Operation]]
) -> list[Operation | list[Operation]]:
    """`ops` (a block's) as runs of consecutive outlinable ops of about `budget` ops
    each, cut where the program repeats (module docstring), holding at least one loop
    nest (outlined, `lower_split_chunk`), and the other ops one by one (lowered in
    place). `walks` receives `walk_ops` of each op in a run."""
    ops = list(ops)
    for op in ops:
        walked = walk_ops(op)
        if can_split(op, walked):
            walks[op] = walked
    shapes = {op: tuple(inner.name for inner in walked) for op, walked in walks.items()}
    anchor, budget = _anchor(shapes, budget)
    items: list[Operation | list[Operation]] = []
    run: list[Operation] = []
    size = 0

    def close() -> None:
        nonlocal run, size
        if any(is_nest(op, walks[op]) for op in run):
            items.append(run)
        else:
            items.extend(run)
        run, size = [], 0

    for op in ops:
        if isinstance(op, arith.ConstantOp):  # stays a constant wherever it is used
            items.append(op)
            continue
        shape = shapes.get(op)
        if shape is None:
            close()
            items.append(op)
            continue
        if size >= budget and shape == anchor:
            close()
        run.append(op)
        size += len(shape)
        if size >= 2 * budget:
            close()
    close()
    return items


def _anchor(
    shapes: dict[Operation, tuple[str, ...]], budget: int
) -> tuple[tuple[str, ...] | None, int]:
    """The most frequent shape of a nest (runs end before one), and the run budget: a
    quarter of `budget` when that shape occurs `REPEATS` times or more."""
    nests = Counter(shape for shape in shapes.values() if shape[0] in ("loop.for", "loop.if"))
    if not nests:
        return None, budget
    anchor, count = nests.most_common(1)[0]
    return anchor, max(1, budget // 4) if count >= REPEATS else budget


def _outer_loops(ops: Sequence[Operation]) -> set[Operation]:
    """The loops among `ops` (a run's, walked) that hold another loop."""
    outer: set[Operation] = set()
    for op in ops:
        if not isinstance(op, loop.ForOp):
            continue
        parent = op.parent_op()
        while isinstance(parent, loop.ForOp | loop.IfOp) and parent not in outer:
            if isinstance(parent, loop.ForOp):
                outer.add(parent)
            parent = parent.parent_op()
    return outer


def _located(op: Operation, bounds_check: bool, outer: set[Operation]) -> bool:
    """Whether the code of `op` itself may embed its source location (in a trap,
    bounds or interrupt message): all but scalar ops, flat loops (`outer` loops poll
    the interrupt flag), conditionals, yields and unchecked accesses."""
    if not op.regions and op.name.startswith(("arith.", "math.")):
        return False
    if isinstance(op, loop.ForOp):
        return op in outer
    if isinstance(op, loop.IfOp | loop.YieldOp):
        return False
    return bounds_check or not isinstance(op, _ACCESSES)


def chunk_key(
    ops: Sequence[Operation],
    outside: Sequence[Sequence[SSAValue]],
    outputs: Sequence[SSAValue],
    bounds_check: bool,
) -> Hashable:
    """The structure of the run whose ops (nested ones included, in walk order) are
    `ops` (module docstring). `outside` lists the groups of values from outside the run
    that its function receives by position (the captured values, the buffer
    arguments); the other values from outside, which the function recomputes
    (constants, arena buffers), are described by their defining op; `outputs` are the
    results later ops read."""
    tokens: dict[SSAValue, Hashable] = {}
    for group, values in enumerate(outside):
        for i, value in enumerate(values):
            tokens[value] = (group, i, value.type)
    parts: list[Hashable] = []
    blocks: dict[Block, int] = {}
    outer = _outer_loops(ops)
    for inner in ops:
        operands = tuple(tokens[v] if v in tokens else _foreign(v, tokens) for v in inner.operands)
        if inner.successors:  # branches within a region: to which of its blocks
            parts.append(tuple(blocks.get(b) for b in inner.successors))
        for region in inner.regions:
            for block in region.blocks:
                blocks[block] = len(blocks)
                for arg in block.args:
                    tokens[arg] = len(tokens)
        for result in inner.results:
            tokens[result] = len(tokens)
        located = _located(inner, bounds_check, outer)
        parts.append(_op_key(inner, operands, located))
    parts.append(tuple(tokens[r] for r in outputs))
    return tuple(parts)


def _foreign(value: SSAValue, tokens: dict[SSAValue, Hashable]) -> Hashable:
    """A value from outside that the run recomputes (a constant or an arena buffer):
    its defining op's key."""
    owner = value.owner
    assert isinstance(owner, Operation), "a block argument from outside is passed"
    token = ("local", _op_key(owner, (), False))
    tokens[value] = token
    return token


def _op_key(op: Operation, operands: tuple[Hashable, ...], located: bool) -> Hashable:
    return (
        op.name,
        operands,
        tuple(r.type for r in op.results),
        tuple(sorted(op.properties.items())) if op.properties else (),
        tuple(sorted(op.attributes.items())) if op.attributes else (),
        tuple(len(region.blocks) for region in op.regions),
        location_prefix(op) if located else "",
    )


# -- the values an outlined run or parallel loop receives ---------------------------------


def is_buffer(value: SSAValue) -> bool:
    return isinstance(value.type, MemRefType)


def rematerialized(value: SSAValue) -> bool:
    """A value an outlined run recomputes instead of receiving: a constant, or a buffer
    planned in the arena (its base pointer plus a constant offset)."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp):
        return True
    return isinstance(owner, loop.AllocOp) and loop.ARENA_OFFSET in owner.attributes


def chunk_boundary(
    ops: list[Operation], walked: list[Operation], inside: set[int]
) -> tuple[list[SSAValue], list[SSAValue]]:
    """(values the ops in `inside` (`walked`, in walk order) use but do not define, in
    first-use order; results of `ops` used by ops outside them)."""

    def defined_inside(value: SSAValue) -> bool:
        owner = value.owner
        op = owner.parent_op() if isinstance(value, BlockArgument) else owner
        return op is not None and id(op) in inside

    free: dict[SSAValue, None] = {}
    for inner in walked:
        for value in inner.operands:
            if value not in free and not defined_inside(value):
                free[value] = None
    outputs: list[SSAValue] = [
        r for op in ops for r in op.results if any(id(u.operation) not in inside for u in r.uses)
    ]
    return list(free), outputs


def free_values(op: loop.ForOp) -> list[SSAValue]:
    """Values used inside `op` (and its bounds) but defined outside it."""
    seen: dict[SSAValue, None] = {op.lb: None, op.ub: None, op.step: None}
    for inner in op.body.walk():
        for value in inner.operands:
            if value not in seen and not _defined_inside(value, op):
                seen[value] = None
    return list(seen)


def _defined_inside(value: SSAValue, op: Operation) -> bool:
    owner = value.owner
    parent = owner.parent_op() if isinstance(value, BlockArgument) else owner
    while parent is not None:
        if parent is op:
            return True
        parent = parent.parent_op()
    return False
