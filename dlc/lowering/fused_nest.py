"""One loop nest for a `fuse.group` of computes (used by `lower-tensor-to-loop`).

A group (see `dlc/passes/fuse.py`) is a run of computes over the same domain. It
becomes one nest of `parallel` loops over the domain; inside, each member in order is
evaluated at the current point (a reduction member as inner loops carrying its
accumulator). A member's reads of earlier members are at the identity index, so they
use the value in a register; members marked `fuse.internal` get no buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from dlc.diagnostics import copy_loc, error_at
from dlc.dialects import loop, tensor
from dlc.dialects.graph_types import TensorType
from dlc.lowering.scalar_ops import ScalarBuilder, Unsupported
from dlc.passes.fuse import INTERNAL, group_members

if TYPE_CHECKING:
    from dlc.lowering.lower_tensor_to_loop import FunctionLowering


def _body(
    lowering: FunctionLowering,
    b: Builder,
    op: tensor.ComputeOp,
    indices: Sequence[SSAValue],
    known: dict[SSAValue, SSAValue],
) -> SSAValue:
    """Inline the body at `indices`; reads of `known` tensors use their values."""
    from dlc.lowering.lower_tensor_to_loop import load

    block = op.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, indices, strict=True))
    for inner in block.ops:
        if isinstance(inner, tensor.YieldOp):
            return mapping.get(inner.value, inner.value)
        if isinstance(inner, tensor.ReadOp):
            if inner.tensor in known:
                mapping[inner.result] = known[inner.tensor]
                continue
            dtype = inner.tensor.type.dt  # type: ignore[attr-defined]
            where = [mapping.get(i, i) for i in inner.indices]
            mapping[inner.result] = load(b, lowering.buffers[inner.tensor], where, dtype)
            continue
        b.insert(inner.clone(mapping))
    raise AssertionError("compute body without tensor.yield")


def _reduction(
    lowering: FunctionLowering,
    b: Builder,
    op: tensor.ComputeOp,
    ivs: list[SSAValue],
    known: dict[SSAValue, SSAValue],
) -> SSAValue:
    """acc = combine(acc, body(ivs, rivs)) over inner loops; returns the final acc."""
    from dlc.lowering.lower_tensor_to_loop import index, load

    t = op.result.type
    assert isinstance(t, TensorType) and op.combinator is not None
    if op.init is not None:
        acc = known.get(op.init) or load(b, lowering.buffers[op.init], [], t.dt)
    else:
        acc = b.insert(arith.ConstantOp(op.init_value)).result  # type: ignore[arg-type]
    zero, one = index(b, 0), index(b, 1)
    nests: list[loop.ForOp] = []
    rivs: list[SSAValue] = []
    for n in op.reduction_extents:
        nest = b.insert(loop.ForOp(zero, index(b, n), one, [acc]))
        nests.append(nest)
        rivs.append(nest.iv)
        acc = nest.iter_args[0]
        b = Builder(InsertPoint.at_end(nest.body.block))
    element = _body(lowering, b, op, [*ivs, *rivs], known)
    try:
        value = ScalarBuilder(b).binary(op.combinator.data, t.dt, acc, element)
    except Unsupported as err:
        raise error_at(op, f"not supported by the code generator yet: reduce by {err}") from None
    for nest in reversed(nests):
        nest.body.block.add_op(loop.YieldOp(value))
        value = nest.res[0]
    return value


def emit_group(
    lowering: FunctionLowering, first: tensor.ComputeOp, dests: dict[SSAValue, SSAValue]
) -> None:
    """Emit `first`'s whole group as one nest (nothing for later members)."""
    from dlc.lowering.lower_tensor_to_loop import index, store

    members = group_members(first)
    if not members:
        return
    buffers = {
        m.result: lowering._buffer(m.result, dests) for m in members if INTERNAL not in m.attributes
    }
    b = lowering.b
    ivs: list[SSAValue] = []
    blocks = []
    zero, one = index(b, 0), index(b, 1)
    for n in first.domain:
        nest = b.insert(loop.ForOp(zero, index(b, n), one, parallel=True))
        copy_loc(first, nest)
        ivs.append(nest.iv)
        blocks.append(nest.body.block)
        b = Builder(InsertPoint.at_end(nest.body.block))
    known: dict[SSAValue, SSAValue] = {}
    for member in members:
        if member.combinator is None:
            value = _body(lowering, b, member, ivs, known)
        else:
            value = _reduction(lowering, b, member, ivs, known)
        known[member.result] = value
        buffer = buffers.get(member.result)
        if buffer is not None:
            dt = member.result.type.dt  # type: ignore[attr-defined]
            store(b, value, buffer, ivs, dt)
    for block in blocks:
        block.add_op(loop.YieldOp())
