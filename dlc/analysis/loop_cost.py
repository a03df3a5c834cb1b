"""The work of a loop nest, estimated from its ops: floating-point operations and the
bytes it must move (the two coordinates of the roofline model).

FLOPs: every float arithmetic op (`arith.addf` ... `math.*`) counts one per lane, a
fused multiply-add two, multiplied by the trip counts of the loops around it; a loop
whose bounds are not constants counts once (the estimate is then a lower bound and
says so: `exact` is False); a `loop.if` counts its costlier branch (one of them runs:
tiled nests keep a copy of their loops for full and for partial blocks). Bytes: each buffer the
nest reads or writes counts once per byte it can touch, the smaller of its size and
its accesses times the bytes of one access: the compulsory traffic of a nest that
keeps what it reuses in cache (the roofline's assumption). A copy moves its buffer's
bytes twice (read and written) and computes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import loop

FLOAT_OPS = (
    arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp,
    arith.MaximumfOp, arith.MinimumfOp, arith.MaxnumfOp, arith.MinnumfOp,
)  # fmt: skip


@dataclass
class NestCost:
    """FLOPs and compulsory bytes of one nest (module docstring)."""

    flops: int = 0
    bytes: int = 0
    exact: bool = True
    sized: bool = True
    """False when a buffer's size is known only at run time (symbolic dimensions):
    `flops` and `bytes` then count one trip of each run-time loop, no real figure."""


def _lanes(t: Attribute) -> int:
    return math.prod(t.get_shape()) if isinstance(t, VectorType) else 1


def _element_bytes(t: Attribute) -> int:
    width = getattr(t, "bitwidth", None) or getattr(getattr(t, "width", None), "data", 8)
    return max(1, int(width or 8) // 8)


def buffer_bytes(buffer: SSAValue) -> int:
    """The bytes of `buffer`; negative when its size is known only at run time."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    return math.prod(t.get_shape()) * _element_bytes(t.element_type)


def _trips(op: loop.ForOp) -> int | None:
    """The trip count of `op` when its bounds are constants."""
    bounds = [v.owner for v in (op.lb, op.ub, op.step)]
    if not all(isinstance(b, arith.ConstantOp) for b in bounds):
        return None
    lb, ub, step = (b.value.value.data for b in bounds)  # type: ignore[union-attr]
    return max(0, -(-(ub - lb) // step)) if step > 0 else None


def _op_flops(op: Operation) -> int:
    if isinstance(op, xmath.FmaOp):
        return 2 * _lanes(op.results[0].type)
    if isinstance(op, FLOAT_OPS) or (op.dialect_name() == "math" and op.results):
        return _lanes(op.results[0].type)
    return 0


def _access(op: Operation) -> tuple[SSAValue, int] | None:
    """(buffer, lanes) of a load or store."""
    if isinstance(op, loop.LoadOp | loop.StoreOp):
        return op.buffer, 1
    if isinstance(op, loop.VLoadOp):
        return op.buffer, _lanes(op.res.type)
    if isinstance(op, loop.VStoreOp):
        return op.buffer, _lanes(op.value.type)
    return None


def nest_cost(nest: Operation) -> NestCost:
    """The estimate of `nest` (a `loop.for`, a `loop.copy` or any op; module docstring)."""
    cost = NestCost()
    if isinstance(nest, loop.CopyOp):
        cost.bytes = 2 * buffer_bytes(nest.operands[1])
        cost.sized = cost.bytes >= 0
        return cost
    touched: dict[SSAValue, int] = {}
    _walk([nest], 1, cost, touched)
    for buffer, elements in touched.items():
        t = buffer.type
        assert isinstance(t, MemRefType)
        one = _element_bytes(t.element_type)
        size = buffer_bytes(buffer)
        cost.sized = cost.sized and size >= 0
        cost.bytes += min(size, elements * one) if size >= 0 else elements * one
    return cost


def _walk(ops: list[Operation], times: int, cost: NestCost, touched: dict[SSAValue, int]) -> None:
    """Add the FLOPs of `ops` (each run `times` times) to `cost` and their accesses to
    `touched`. Iterative, except at a `loop.if`, whose branches are walked apart (the
    depth of `loop.if`s inside one another, a few in generated nests)."""
    stack: list[tuple[Operation, int]] = [(op, times) for op in ops]
    while stack:
        op, times = stack.pop()
        cost.flops += times * _op_flops(op)
        access = _access(op)
        if access is not None:
            buffer, lanes = access
            touched[buffer] = touched.get(buffer, 0) + times * lanes
        if isinstance(op, loop.IfOp):
            _costlier_branch(op, times, cost, touched)
            continue
        inner = times
        if isinstance(op, loop.ForOp):
            trips = _trips(op)
            cost.exact = cost.exact and trips is not None
            inner = times * (trips if trips is not None else 1)
        for region in op.regions:
            for block in region.blocks:
                stack.extend((o, inner) for o in block.ops)


def _costlier_branch(
    op: loop.IfOp, times: int, cost: NestCost, touched: dict[SSAValue, int]
) -> None:
    """Add the branch of `op` with more FLOPs (then more accesses) to `cost`."""
    branches = []
    for region in op.regions:
        sub, sub_touched = NestCost(), dict[SSAValue, int]()
        _walk([o for block in region.blocks for o in block.ops], times, sub, sub_touched)
        branches.append((sub.flops, sum(sub_touched.values()), sub, sub_touched))
    flops, _, sub, sub_touched = max(branches, key=lambda b: (b[0], b[1]))
    cost.flops += flops
    cost.exact = cost.exact and sub.exact
    for buffer, n in sub_touched.items():
        touched[buffer] = touched.get(buffer, 0) + n
