"""fuse: tensor-level fusion of `tensor.compute` ops by compute-inlining.

Input: verified tensor level. A producer is replaced in its consumers by its body when
that duplicates no work, or only a little cheap work (`MATERIALIZE_COST`, `fusion_rule.py`), block by block;
the output computes the same values bit for bit. The rule and its exceptions:
docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.diagnostics import copy_loc
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.passes.tensor.fusion_rule import should_inline
from dlc.passes.tensor.simplify_indices import simplify_indices


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
    new.schedule = old.schedule  # same domain and reduction axes: still valid
    copy_loc(old, new)
    parent = old.parent_block()
    assert parent is not None
    parent.insert_op_before(new, old)
    old.result.replace_all_uses_with(new.result)
    old.detach()
    old.erase()
    return new


def _inline_read(
    read: tensor.ReadOp, producer: tensor.ComputeOp
) -> tuple[SSAValue, list[SSAValue]]:
    """Replace one read of `producer` by a copy of its body; returns the value that
    replaced the read and the tensors the copy reads."""
    source = producer.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(source.args, read.indices, strict=True))
    block = read.parent_block()
    assert block is not None
    read_tensors: list[SSAValue] = []
    value: SSAValue | None = None
    for op in source.ops:
        if isinstance(op, tensor.YieldOp):
            value = mapping.get(op.value, op.value)
            read.result.replace_all_uses_with(value)
            break
        copy = op.clone(mapping)
        block.insert_op_before(copy, read)
        if isinstance(copy, tensor.ReadOp):
            read_tensors.append(copy.tensor)
    assert value is not None, "compute body without tensor.yield"
    read.detach()
    read.erase()
    return value, read_tensors


def inline_into_consumers(producer: tensor.ComputeOp) -> None:
    """Inline `producer` into every consumer, then erase it.

    The reads are found through the producer's use list (not by scanning consumer
    bodies, which grow as chains collapse: that was quadratic in the chain length),
    and reads at the same indices share one copy of the body (inlining each copy
    separately doubled a body at every `x + x`: exponential)."""
    by_consumer: dict[tensor.ComputeOp, list[tensor.ReadOp]] = {}
    for use in list(producer.result.uses):
        read = use.operation
        if isinstance(read, tensor.ReadOp):
            compute = read.parent_op()
            assert isinstance(compute, tensor.ComputeOp)
            by_consumer.setdefault(compute, []).append(read)
    for consumer, reads in by_consumer.items():
        inputs = [v for v in consumer.inputs if v != producer.result]
        known = set(inputs)
        done: dict[tuple[SSAValue, ...], SSAValue] = {}
        for read in _in_block_order(reads):
            where = tuple(read.indices)
            if where in done:  # the first read at these indices dominates this one
                read.result.replace_all_uses_with(done[where])
                read.detach()
                read.erase()
                continue
            value, tensors = _inline_read(read, producer)
            done[where] = value
            for t in tensors:
                if t not in known:
                    known.add(t)
                    inputs.append(t)
        _replace_compute(consumer, inputs)
    producer.detach()
    producer.erase()


def _in_block_order(reads: list[tensor.ReadOp]) -> list[tensor.ReadOp]:
    """`reads` in program order: one walk of their blocks (asking each read for its
    index walks the block once per read, quadratic in a body grown by inlining: a
    dilated 60 x 80 max pool spent 70 s there)."""
    if len(reads) < 2:
        return reads
    order: dict[Operation, int] = {}
    for block in {r.parent_block() for r in reads}:
        assert block is not None
        order.update((op, i) for i, op in enumerate(block.ops))
    return sorted(reads, key=order.__getitem__)


def inline_computes(func: tensor.FuncOp) -> int:
    """Compute-inline from the last producer to the first (block by block); returns how
    many were inlined."""
    count = 0
    for block in func.body.blocks:
        for op in reversed(list(block.ops)):
            if isinstance(op, tensor.ComputeOp) and should_inline(op):
                inline_into_consumers(op)
                count += 1
    return count


class FusePass(ModulePass):
    """Fuse tensor-level computes by compute-inlining.

    Input: verified tensor level (`tensor.func` of `tensor.compute`). Output: the same
    functions with producers inlined into consumers by the duplication rule of this
    module's docstring; computes that stay keep their schedules (the `schedule` pass
    groups them into shared nests). Then each body's index divisions that the indices'
    ranges decide are taken out (`simplify_indices`: what chains of inlined reshapes
    leave). Idempotent.
    """

    name = "fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "tensor", self.name)
        for func in op.body.block.ops:
            if isinstance(func, tensor.FuncOp):
                while inline_computes(func):
                    pass
                for compute in func.walk():
                    if isinstance(compute, tensor.ComputeOp):
                        simplify_indices(compute)
