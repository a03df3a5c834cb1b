"""The loop-level ops the nest builder makes by the thousand (loads, vector loads and
stores, broadcasts, index additions), made from a prototype (`dlc.lowering.prebuilt`):
xDSL's generic constructor is about half of what building an op costs.
`test/unit/lowering/test_tensor_to_loop_ops.py` compares them with their constructors' ops.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue

from dlc.dialects import loop
from dlc.lowering.prebuilt import like


def load(buffer: SSAValue, indices: Sequence[SSAValue]) -> Operation:
    """`loop.load buffer[indices]`."""
    mtype = buffer.type
    assert isinstance(mtype, MemRefType)
    key = (loop.LoadOp, mtype.element_type)
    return like(key, lambda: loop.LoadOp(buffer, indices), (buffer, *indices))


def store(value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]) -> Operation:
    """`loop.store value, buffer[indices]`."""
    return like(
        (loop.StoreOp,), lambda: loop.StoreOp(value, buffer, indices), (value, buffer, *indices)
    )


def vload(buffer: SSAValue, indices: Sequence[SSAValue], lanes: int) -> Operation:
    """`loop.vload buffer[indices]` of `lanes` lanes."""
    mtype = buffer.type
    assert isinstance(mtype, MemRefType)
    key = (loop.VLoadOp, mtype.element_type, lanes)
    return like(key, lambda: loop.VLoadOp(buffer, indices, lanes), (buffer, *indices))


def vstore(value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]) -> Operation:
    """`loop.vstore value, buffer[indices]`."""
    return like(
        (loop.VStoreOp,), lambda: loop.VStoreOp(value, buffer, indices), (value, buffer, *indices)
    )


def broadcast(source: SSAValue, lanes: int) -> Operation:
    """`loop.broadcast source` to `lanes` lanes."""
    key = (loop.BroadcastOp, source.type, lanes)
    return like(key, lambda: loop.BroadcastOp(source, lanes), (source,))


def addi(lhs: SSAValue, rhs: SSAValue) -> Operation:
    """`arith.addi lhs, rhs` (no overflow flags)."""
    return like((arith.AddiOp, lhs.type), lambda: arith.AddiOp(lhs, rhs), (lhs, rhs))
