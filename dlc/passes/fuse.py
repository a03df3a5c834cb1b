"""fuse: tensor-level fusion of `tensor.compute` ops (compute-inline and grouping).

Two rewrites, applied to every `tensor.func`:

1. **Compute-inline** (TVM's `compute_inline`). A producer compute P (no reduction, not
   returned, not used as a reduction `init`) is replaced in each consumer by its body:
   every `tensor.read %P[e...]` becomes a copy of P's body with P's index variables
   bound to `e...`. Producers are visited from the last to the first, so whole
   element-wise / broadcast chains collapse into their final consumer.

   The rule that keeps work from being duplicated. Let `reads` be the number of element
   reads of P over all consumers (each consumer's domain size x reduction size x its
   number of distinct index lists of `tensor.read`s of P; reads at the same index
   values are one read, LLVM's GVN merges them), `dup = reads / size(P)`, and `cost` P's scalar work
   per element (math functions 20, divisions 8, other float/integer ops 1; reads,
   constants and i64 index arithmetic 0). P is inlined when

   - `dup <= 1`: every element is still computed at most once (element-wise chains,
     permutations, a reduction reading each element once); or
   - `cost == 0` and no consumer reads it at an index depending on a reduction index
     variable: pure data movement / broadcasting (padShape, reshape, transpose, splat)
     folded into index expressions, without turning a `dot` operand into strided
     re-reads; or
   - `dup <= 8` and `cost * (dup - 1) <= 32`: a little recomputation of cheap work is
     cheaper than a store and reloads (e.g. softmax's `exp(x - max)` read by the sum
     and by the division), unless some consumer reads it at a reduction-dependent
     index more than once per element (a `dot` operand).

   Anything else stays materialized; in particular a producer read by a `dot` (read
   `N` times per element) or an expensive producer read by several consumers.

2. **Grouping** (epilogue and horizontal fusion). Consecutive computes over the same
   iteration domain form one group, lowered to ONE loop nest: reductions become inner
   loops inside the shared outer loops, element-wise members are evaluated per point.
   A member may read an earlier member only at the identity index (its own output
   index variables; `0` for extent-1 dimensions), in which case the value is passed in
   a register. This covers epilogues (`relu(dot(x, w) + b)`: the bias and activation
   run right after the dot's accumulation loop) and horizontal fusion (independent or
   identity-dependent element-wise results such as an LSTM cell's `new_c` and `new_h`).
   Members carry the attribute `fuse.group = <id>`; a member read only inside its group
   additionally carries `fuse.internal` and gets no buffer at all.

Input: verified tensor level. Output: verified tensor level computing the same values
(float results may differ only by the reassociation-free re-evaluation of the same
scalar expressions, i.e. bit-identical except where the code generator already
differs). The lowering `lower-tensor-to-loop` honours the group attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IntAttr, IntegerAttr, ModuleOp, UnitAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.diagnostics import copy_loc
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType

GROUP = "fuse.group"
INTERNAL = "fuse.internal"

EXPENSIVE_COST = 20
DIVISION_COST = 8
MAX_DUP = 8
MAX_EXTRA_COST = 32

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


@dataclass
class _Uses:
    """How a producer is used: reads per consumer, or `blocked` for other uses."""

    reads: dict[tensor.ComputeOp, int] = field(default_factory=dict)
    indices: dict[tensor.ComputeOp, set[tuple[SSAValue, ...]]] = field(default_factory=dict)
    blocked: bool = False


def _uses(value: SSAValue) -> _Uses:
    uses = _Uses()
    for use in value.uses:
        user = use.operation
        if isinstance(user, tensor.ReadOp):
            compute = user.parent_op()
            assert isinstance(compute, tensor.ComputeOp)
            uses.indices.setdefault(compute, set()).add(tuple(user.indices))
            uses.reads[compute] = len(uses.indices[compute])  # distinct index lists
        elif isinstance(user, tensor.ComputeOp) and use.index < len(user.inputs):
            continue  # the operand list entry; its reads are counted above
        else:
            uses.blocked = True  # returned, or a reduction init
    return uses


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
        while stack:
            value = stack.pop()
            if value in reduction_args:
                return True
            if isinstance(value.owner, Operation):
                stack.extend(value.owner.operands)
    return False


def should_inline(producer: tensor.ComputeOp) -> bool:
    """The rule of the module docstring."""
    if producer.combinator is not None:
        return False
    uses = _uses(producer.result)
    if uses.blocked or not uses.reads:
        return False
    reads = sum(_points(c) * n for c, n in uses.reads.items())
    size = max(1, _size(producer.domain))
    if reads <= size:
        return True
    cost = body_cost(producer)
    if cost == 0 and not any(_reads_at_reduction_index(c, producer.result) for c in uses.reads):
        return True
    for consumer, n in uses.reads.items():  # a dot re-reading each element: keep it
        if _points(consumer) * n > size and _reads_at_reduction_index(consumer, producer.result):
            return False
    dup = reads / size
    return dup <= MAX_DUP and cost * (dup - 1) <= MAX_EXTRA_COST


def _replace_compute(old: tensor.ComputeOp, inputs: list[SSAValue]) -> tensor.ComputeOp:
    """The same compute with a new input list (the body block is moved over)."""
    block = old.body.detach_block(0)
    t = old.result.type
    assert isinstance(t, TensorType)
    new = tensor.ComputeOp(
        inputs,
        t,
        block,
        reduction=old.reduction_extents,
        combinator=old.combinator.data if old.combinator is not None else None,
        init=old.init,
        init_value=old.init_value,
    )
    new.attributes.update(old.attributes)
    copy_loc(old, new)
    parent = old.parent_block()
    assert parent is not None
    parent.insert_op_before(new, old)
    old.result.replace_all_uses_with(new.result)
    old.detach()
    old.erase()
    return new


def _inline_read(read: tensor.ReadOp, producer: tensor.ComputeOp) -> list[SSAValue]:
    """Replace one read of `producer` by a copy of its body; returns tensors it reads."""
    source = producer.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(source.args, read.indices, strict=True))
    block = read.parent_block()
    assert block is not None
    read_tensors: list[SSAValue] = []
    for op in source.ops:
        if isinstance(op, tensor.YieldOp):
            read.result.replace_all_uses_with(mapping.get(op.value, op.value))
            break
        copy = op.clone(mapping)
        block.insert_op_before(copy, read)
        if isinstance(copy, tensor.ReadOp):
            read_tensors.append(copy.tensor)
    read.detach()
    read.erase()
    return read_tensors


def inline_into_consumers(producer: tensor.ComputeOp) -> None:
    """Inline `producer` into every consumer, then erase it."""
    consumers = list(_uses(producer.result).reads)
    for consumer in consumers:
        reads = [
            op
            for op in consumer.body.block.ops
            if isinstance(op, tensor.ReadOp) and op.tensor == producer.result
        ]
        inputs = [v for v in consumer.inputs if v != producer.result]
        for read in reads:
            for t in _inline_read(read, producer):
                if t not in inputs:
                    inputs.append(t)
        _replace_compute(consumer, inputs)
    producer.detach()
    producer.erase()


def inline_computes(func: tensor.FuncOp) -> int:
    """Compute-inline from the last producer to the first; returns how many were inlined."""
    count = 0
    for op in reversed(list(func.body.block.ops)):
        if isinstance(op, tensor.ComputeOp) and should_inline(op):
            inline_into_consumers(op)
            count += 1
    return count


def _is_zero_index(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr)
        and owner.value.value.data == 0
    )


def reads_at_identity(consumer: tensor.ComputeOp, producer: SSAValue) -> bool:
    """Every read of `producer` in `consumer` is at the consumer's own output index."""
    block = consumer.body.block
    domain = consumer.domain
    for op in block.ops:
        if not isinstance(op, tensor.ReadOp) or op.tensor != producer:
            continue
        for d, index in enumerate(op.indices):
            if index is block.args[d]:
                continue
            if domain[d] == 1 and _is_zero_index(index):
                continue
            return False
    return True


def _can_join(group: list[tensor.ComputeOp], op: tensor.ComputeOp) -> bool:
    last = group[-1]
    if op.prev_op is not last or op.domain != last.domain:
        return False
    members = {m.result for m in group}
    if op.init is not None and op.init in members:
        return False
    return all(reads_at_identity(op, v) for v in op.inputs if v in members)


def _internal(member: tensor.ComputeOp, group: list[tensor.ComputeOp]) -> bool:
    """Read only by later members of its group (at identity, by construction)."""
    uses = _uses(member.result)
    return bool(uses.reads) and not uses.blocked and all(c in group for c in uses.reads)


def group_computes(func: tensor.FuncOp, first_id: int = 0) -> int:
    """Mark maximal runs of same-domain computes as groups; returns the next free id."""
    groups: list[list[tensor.ComputeOp]] = []
    current: list[tensor.ComputeOp] = []
    for op in func.body.block.ops:
        if not isinstance(op, tensor.ComputeOp):
            current = []
            continue
        if current and _can_join(current, op):
            current.append(op)
            continue
        current = [op]
        groups.append(current)
    group_id = first_id
    for group in groups:
        if len(group) < 2:
            continue
        for member in group:
            member.attributes[GROUP] = IntAttr(group_id)
            if _internal(member, group):
                member.attributes[INTERNAL] = UnitAttr()
        group_id += 1
    return group_id


def group_members(first: tensor.ComputeOp) -> list[tensor.ComputeOp]:
    """The members of `first`'s group when `first` is its first member, else []."""
    gid = first.attributes.get(GROUP)
    if gid is None:
        return [first]
    prev = first.prev_op
    if isinstance(prev, tensor.ComputeOp) and prev.attributes.get(GROUP) == gid:
        return []
    members = [first]
    op = first.next_op
    while isinstance(op, tensor.ComputeOp) and op.attributes.get(GROUP) == gid:
        members.append(op)
        op = op.next_op
    return members


class FusePass(ModulePass):
    """Fuse tensor-level computes: compute-inline, then epilogue/horizontal grouping.

    Input: verified tensor level (`tensor.func` of `tensor.compute`). Output: the same
    functions with producers inlined into consumers by the duplication rule of this
    module's docstring, and runs of same-domain computes marked `fuse.group` (plus
    `fuse.internal` for members needing no buffer); `lower-tensor-to-loop` emits each
    group as one loop nest. Idempotent.
    """

    name = "fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        next_id = 0
        for func in op.body.block.ops:
            if not isinstance(func, tensor.FuncOp) or len(func.body.blocks) != 1:
                continue  # multi-block (control flow) functions are not fused yet
            for member in func.body.block.ops:
                member.attributes.pop(GROUP, None)
                member.attributes.pop(INTERNAL, None)
            while inline_computes(func):
                pass
            next_id = group_computes(func, next_id)
