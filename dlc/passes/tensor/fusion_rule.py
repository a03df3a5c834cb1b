"""When `fuse` inlines a producer into its consumers (`should_inline`): when that
duplicates no work, or at most `MAX_DUP` evaluations of a cheap body (`op_cost`), unless
the producer is better stored and reduced in its reduction consumer's loop
(`MATERIALIZE_COST`), read by an unfolding copy (an im2col's columns, which copy a
plain tensor as vectors: `schedule_unfold.py`), or calling a math function and read by
a padding (its range checks' selects would keep the function scalar, where on its own
it is vectorized: the epilogue of the product before it). The rule and its exceptions: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import i64
from xdsl.ir import Operation, SSAValue

from dlc.dialects import tensor
from dlc.dialects.tensor_groups import reads_at_identity, uses_of
from dlc.passes.tensor.schedule_split import compares_last_index
from dlc.passes.tensor.schedule_unfold import unfolding_copy

EXPENSIVE_COST = 20
DIVISION_COST = 8
MAX_DUP = 8
MAX_EXTRA_COST = 32
MATERIALIZE_COST = 8

_DIVISIONS = (arith.DivfOp, arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp)


def _size(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def op_cost(op: Operation) -> int:
    """Scalar work of one body op (reads, constants and index arithmetic are free)."""
    if isinstance(op, tensor.ReadOp | tensor.YieldOp | arith.ConstantOp):
        return 0
    if op.results and all(r.type == i64 for r in op.results):
        return 0
    if op.name.startswith("math.") and not isinstance(op, math.AbsFOp | math.CopySignOp):
        return EXPENSIVE_COST
    if isinstance(op, _DIVISIONS):
        return DIVISION_COST
    return 1


def body_cost(compute: tensor.ComputeOp) -> int:
    return sum(op_cost(op) for op in compute.body.block.ops)


def _points(compute: tensor.ComputeOp) -> int:
    """Body evaluations of a compute: domain x reduction points."""
    return _size(compute.domain) * _size(compute.reduction_extents)


def _reads_at_reduction_index(consumer: tensor.ComputeOp, producer: SSAValue) -> bool:
    """Some read of `producer` in `consumer` depends on a reduction index variable
    (a `dot` reading its operand): the producer is read many times per element."""
    block = consumer.body.block
    reduction_args = set(block.args[len(consumer.domain) :])
    if not reduction_args:
        return False
    for op in block.ops:
        if not isinstance(op, tensor.ReadOp) or op.tensor != producer:
            continue
        stack: list[SSAValue] = list(op.indices)
        seen = set(stack)  # shared subexpressions: each value once, not once per path
        while stack:
            value = stack.pop()
            if value in reduction_args:
                return True
            if isinstance(value.owner, Operation):
                fresh = [v for v in value.owner.operands if v not in seen]
                seen.update(fresh)
                stack.extend(fresh)
    return False


def should_inline(producer: tensor.ComputeOp) -> bool:
    """The rule of the module docstring."""
    if producer.combinator is not None:
        return False
    uses = uses_of(producer.result)
    if uses.blocked or not uses.reads:
        return False
    if any(c.parent_block() is not producer.parent_block() for c in uses.reads):
        return False  # another basic block, maybe a loop body: keep it computed once
    cost = body_cost(producer)
    if cost >= EXPENSIVE_COST and any(compares_last_index(c) for c in uses.reads):
        return False  # a padding's selects would keep the function scalar (module docstring)
    reads = sum(_points(c) * n for c, n in uses.reads.items())
    size = max(1, _size(producer.domain))
    if reads <= size:
        return True
    if cost == 0 and not any(_reads_at_reduction_index(c, producer.result) for c in uses.reads):
        return True
    for consumer, n in uses.reads.items():  # a dot re-reading each element: keep it
        if _points(consumer) * n > size and _reads_at_reduction_index(consumer, producer.result):
            return False
    if cost and any(unfolding_copy(c) for c in uses.reads):
        return False  # a padding stays a copy of its own: the columns copy vectors
    dup = reads / size
    if cost * (dup - 1) >= MATERIALIZE_COST and _feeds_reduction(producer, list(uses.reads)):
        return False  # computed once, stored and reduced in the reduction's loop
    return dup <= MAX_DUP and cost * (dup - 1) <= MAX_EXTRA_COST


def _feeds_reduction(producer: tensor.ComputeOp, consumers: list[tensor.ComputeOp]) -> bool:
    """Some reduction consumer iterates exactly over `producer`'s domain (its output
    then its reduction axes) and reads it at that point: `producer` can be computed,
    stored and reduced in the reduction's own loop (see `_Group`)."""
    for c in consumers:
        if c.combinator is None or c.init == producer.result:
            continue
        if producer.domain != (*c.domain, *c.reduction_extents):
            continue
        if reads_at_identity(c, producer.result):
            return True
    return False
