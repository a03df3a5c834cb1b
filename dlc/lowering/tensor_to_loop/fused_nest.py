"""One loop nest for a `fuse.group` of computes (used by `lower-tensor-to-loop`).

A group (see `dlc/passes/tensor/fuse.py`) is a run of computes over the same domain. It
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
from dlc.lowering.scalar_ops import ScalarBuilder, Unsupported, mark_reassociable
from dlc.passes.tensor.fuse import FEEDS, INTERNAL, base_domain, group_members

if TYPE_CHECKING:
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import FunctionLowering


def _body(
    lowering: FunctionLowering,
    b: Builder,
    op: tensor.ComputeOp,
    indices: Sequence[SSAValue],
    known: dict[SSAValue, SSAValue],
) -> SSAValue:
    """Inline the body at `indices`; reads of `known` tensors use their values."""
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import load

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
    feeders: Sequence[tuple[tensor.ComputeOp, SSAValue | None]] = (),
) -> SSAValue:
    """acc = combine(acc, body(ivs, rivs)) over inner loops; returns the final acc.

    `feeders` (member, buffer or None) are evaluated first at each reduction point
    `[*ivs, *rivs]`, stored, and passed to the later feeders and the body in registers."""
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import index, load, store

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
    point = [*ivs, *rivs]
    inner = dict(known)
    for feeder, buffer in feeders:
        inner[feeder.result] = _body(lowering, b, feeder, point, inner)
        if buffer is not None:
            store(b, inner[feeder.result], buffer, point, feeder.result.type.dt)  # type: ignore[attr-defined]
    element = _body(lowering, b, op, point, inner)
    try:
        value = ScalarBuilder(b).binary(op.combinator.data, t.dt, acc, element)
    except Unsupported as err:
        raise error_at(op, f"not supported by the code generator yet: reduce by {err}") from None
    mark_reassociable(op, value)  # vectorizable fold order (see there)
    for nest in reversed(nests):
        nest.body.block.add_op(loop.YieldOp(value))
        value = nest.res[0]
    return value


def _inner_nest(
    lowering: FunctionLowering,
    b: Builder,
    op: tensor.ComputeOp,
    ivs: list[SSAValue],
    known: dict[SSAValue, SSAValue],
    buffer: SSAValue | None,
) -> None:
    """An inner member with its own loops over its extra axes, stored to its buffer."""
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import index, store

    assert buffer is not None, "an inner member read by loads always has a buffer"
    zero, one = index(b, 0), index(b, 1)
    point = list(ivs)
    blocks = []
    for n in op.domain[len(ivs) :]:
        nest = b.insert(loop.ForOp(zero, index(b, n), one, parallel=True))
        copy_loc(op, nest)
        point.append(nest.iv)
        blocks.append(nest.body.block)
        b = Builder(InsertPoint.at_end(nest.body.block))
    value = _body(lowering, b, op, point, known)
    store(b, value, buffer, point, op.result.type.dt)  # type: ignore[attr-defined]
    for block in blocks:
        block.add_op(loop.YieldOp())


def _inner_reduction_outer(
    lowering: FunctionLowering,
    b: Builder,
    op: tensor.ComputeOp,
    ivs: list[SSAValue],
    known: dict[SSAValue, SSAValue],
    buffer: SSAValue,
) -> None:
    """A reduction-outer member (`dlc.reduction_outer` = len(ivs)) inside the outer
    loops: `for j: buf[ivs, j] = init; for r: for j: buf[ivs, j] = comb(buf, body)`,
    the fold order of `FunctionLowering._reduction_outer` (contiguous inner loop)."""
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import index, load, store

    t = op.result.type
    assert isinstance(t, TensorType) and op.combinator is not None
    zero, one = index(b, 0), index(b, 1)
    rest = op.domain[len(ivs) :]

    def loops(b: Builder, extents: Sequence[int], parallel: bool) -> tuple[Builder, list]:
        out = []
        for n in extents:
            nest = b.insert(loop.ForOp(zero, index(b, n), one, parallel=parallel))
            copy_loc(op, nest)
            nest.body.block.add_op(loop.YieldOp())
            out.append(nest.iv)
            b = Builder(InsertPoint.before(nest.body.block.last_op))  # type: ignore[arg-type]
        return b, out

    init_b, init_ivs = loops(b, rest, True)
    init = init_b.insert(arith.ConstantOp(op.init_value)).result  # type: ignore[arg-type]
    store(init_b, init, buffer, [*ivs, *init_ivs], t.dt)
    b, rivs = loops(b, op.reduction_extents, False)
    b, jvs = loops(b, rest, True)
    point = [*ivs, *jvs]
    acc = load(b, buffer, point, t.dt)
    element = _body(lowering, b, op, [*point, *rivs], known)
    try:
        value = ScalarBuilder(b).binary(op.combinator.data, t.dt, acc, element)
    except Unsupported as err:
        raise error_at(op, f"not supported by the code generator yet: reduce by {err}") from None
    store(b, value, buffer, point, t.dt)


def emit_group(
    lowering: FunctionLowering, first: tensor.ComputeOp, dests: dict[SSAValue, SSAValue]
) -> None:
    """Emit `first`'s whole group as one nest (nothing for later members).

    The outer parallel loops run over the group's base domain (its shortest member
    domain). Base members are evaluated per outer point; members marked `fuse.feeds`
    are evaluated inside the reduction loops of the next other member; other inner
    members get their own inner loops (see `dlc/passes/tensor/fuse.py`)."""
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import index, store

    members = group_members(first)
    if not members:
        return
    buffers = {
        m.result: lowering._buffer(m.result, dests) for m in members if INTERNAL not in m.attributes
    }
    base = base_domain(members)
    b = lowering.b
    ivs: list[SSAValue] = []
    blocks = []
    zero, one = index(b, 0), index(b, 1)
    for n in base:
        nest = b.insert(loop.ForOp(zero, index(b, n), one, parallel=True))
        copy_loc(first, nest)
        ivs.append(nest.iv)
        blocks.append(nest.body.block)
        b = Builder(InsertPoint.at_end(nest.body.block))
    known: dict[SSAValue, SSAValue] = {}
    feeders: list[tuple[tensor.ComputeOp, SSAValue | None]] = []
    for i, member in enumerate(members):
        buffer = buffers.get(member.result)
        if FEEDS in member.attributes:
            feeders.append((member, buffer))
            continue
        if len(member.domain) > len(base) and member.combinator is not None:
            if buffer is None:  # accumulate in the next member's buffer (fuse.py)
                buffer = buffers[members[i + 1].result]
                lowering.buffers[member.result] = buffer
            _inner_reduction_outer(lowering, b, member, ivs, known, buffer)
            continue
        if len(member.domain) > len(base):
            _inner_nest(lowering, b, member, ivs, known, buffer)
            continue
        if member.combinator is None:
            value = _body(lowering, b, member, ivs, known)
        else:
            value = _reduction(lowering, b, member, ivs, known, feeders)
            feeders = []
        known[member.result] = value
        if buffer is not None:
            dt = member.result.type.dt  # type: ignore[attr-defined]
            store(b, value, buffer, ivs, dt)
    assert not feeders, "fuse.feeds members precede the reduction they feed"
    for block in blocks:
        block.add_op(loop.YieldOp())
