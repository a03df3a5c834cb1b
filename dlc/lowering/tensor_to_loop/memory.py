"""tensor -> loop rules of the memory ops (dlc/dialects/tensor_memory.py).

Every `i64` address is a rank-0 buffer at the loop level; the rules load it, then use
the raw-memory ops of dlc/dialects/loop_memory.py. Each read/write is preceded by a
`loop.raw_check` of its byte range against the pointer's bounds (bounds-check builds).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Operation, SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects import loop
from dlc.dialects import loop_memory as lm
from dlc.dialects import tensor_memory as tm
from dlc.dialects.graph_types import TensorType

BufferFn = Callable[[SSAValue], SSAValue]


def _nbytes(t: object) -> int:
    assert isinstance(t, TensorType)
    width = 1 if t.dt == "bool" else int(t.dt[1:]) // 8
    return width * t.num_elements


class MemoryOpLowering:
    """Emits the loop ops of one tensor memory op at `b`."""

    def __init__(self, b: Builder, buffers: dict[SSAValue, SSAValue], new_buffer: BufferFn):
        self.b = b
        self.buffers = buffers
        self.new_buffer = new_buffer

    def scalar(self, value: SSAValue) -> SSAValue:
        return self.b.insert(loop.LoadOp(self.buffers[value], [])).res

    def const(self, value: int) -> SSAValue:
        return self.b.insert(arith.ConstantOp(IntegerAttr(value, i64))).result

    def check(
        self, op: Operation, addr: SSAValue, n: SSAValue, lo: SSAValue, hi: SSAValue, access: str
    ) -> None:
        copy_loc(op, self.b.insert(lm.RawCheckOp([addr, n, lo, hi], access)))

    def result(self, op: Operation, value: SSAValue) -> None:
        self.b.insert(loop.StoreOp(value, self.new_buffer(op.results[0]), []))

    def lower(self, op: Operation) -> None:
        b = self.b
        match op:
            case tm.GlobalAddressOp():
                self.result(op, b.insert(lm.GlobalAddressOp(op.sym_name.data, op.size.data)).res)
            case tm.StackAllocOp():
                self.result(op, b.insert(lm.StackAllocOp(op.size.data)).res)
            case tm.HeapAllocOp():
                self.result(op, b.insert(lm.RawAllocOp(self.scalar(op.nbytes))).res)
            case tm.HeapFreeOp():
                b.insert(lm.RawFreeOp(self.scalar(op.addr), raw=op.raw is not None))
            case tm.MemReadOp():
                addr, lo, hi = (self.scalar(v) for v in (op.addr, op.lo, op.hi))
                self.check(op, addr, self.const(_nbytes(op.result.type)), lo, hi, "load")
                b.insert(lm.RawLoadOp(addr, self.new_buffer(op.result)))
            case tm.MemWriteOp():
                addr, lo, hi = (self.scalar(v) for v in (op.addr, op.lo, op.hi))
                self.check(op, addr, self.const(_nbytes(op.value.type)), lo, hi, "store")
                b.insert(lm.RawStoreOp(self.buffers[op.value], addr))
            case tm.MemCopyOp():
                dst, dlo, dhi, src, slo, shi, n = (self.scalar(v) for v in op.args)
                self.check(op, src, n, slo, shi, "load")
                self.check(op, dst, n, dlo, dhi, "store")
                b.insert(lm.RawCopyOp(dst, src, n))
            case tm.StackPushOp():
                at = b.insert(
                    lm.StackPushOp(self.scalar(op.header), op.nbytes.data, op.item.data)
                ).res
                copy_loc(op, at.owner)
                self.result(op, at)
            case tm.StackPopOp():
                at = b.insert(
                    lm.StackPopOp(self.scalar(op.header), op.nbytes.data, op.item.data)
                ).res
                copy_loc(op, at.owner)
                self.result(op, at)
            case tm.IndexCheckOp():
                # index in [0, count) as an empty access in [lo, hi] (unsigned: a
                # negative index is huge); count 0 gives lo 1 > hi 0: always out
                # `from L`: index - L in [0, count - L), the check reports the index
                low = op.lower.data if op.lower is not None else 0
                n = op.count.data - low
                lo, hi = self.const(0 if n > 0 else 1), self.const(max(n - 1, 0))
                index = self.scalar(op.index)
                args = [index, self.const(0), lo, hi]
                always = op.always is not None
                check = lm.RawCheckOp(args, op.what.data, offset=low, always=always)
                copy_loc(op, self.b.insert(check))
            case tm.BitCastOp():
                out = self.new_buffer(op.result)
                b.insert(lm.RawStoreOp(self.buffers[op.source], b.insert(lm.AddressOp(out)).res))
            case _:
                raise AssertionError(op.name)
