"""Per-kernel timing marks (`lower-loop-to-llvm{profile=true}`, `dlc.compile(profile=True)`).

A kernel is a top-level op of a function that does the work: a loop nest (with its
parallel regions: they are outlined from inside it) or a buffer copy. With `profile`,
each kernel, and each function's whole call, is bracketed by two marks; without it the
code has none (nothing here runs). A mark reads `clock_gettime(CLOCK_MONOTONIC)` (the
vDSO: no system call) and appends `(2 * id + phase, nanoseconds)` to the event buffer
whose address the runtime stores in the global `abi.PROFILE_BUFFER`: word 0 counts the
events, word 1 is the capacity, events follow. Past the capacity the last slot is
overwritten and the count still grows, so the runtime knows how many it lost. Marks
sit outside the kernels' loops, on the calling thread, and add two calls per kernel.

The kernels' static facts (`KernelTable.entries`: function, source lines, ONNX nodes,
FLOPs and bytes (`dlc.analysis.loop_cost`), schedules and tuning records
(`dlc.analysis.kernel_origins`)) go to the module attribute `abi.PROFILE` as JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from xdsl.dialects import llvm
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, StringAttr, i32, i64
from xdsl.ir import Attribute, Operation, Region, SSAValue

from dlc.analysis.kernel_origins import nest_origin
from dlc.analysis.loop_cost import nest_cost
from dlc.analysis.walk import walk_ops
from dlc.diagnostics import get_origin, own_location
from dlc.dialects import abi, loop
from dlc.lowering.loop_to_llvm.scalar import const, icmp
from dlc.lowering.prebuilt import make

PTR = llvm.LLVMPointerType()
BEGIN, END = 0, 1


def is_kernel(op: Operation) -> bool:
    """A loop nest, a copy, or the two versions of a nest under a `loop.if` on its
    run-time work (threaded or not: `lower-graph-to-loop`'s symbolic programs)."""
    if isinstance(op, loop.IfOp):
        inner = [o for r in (op.then_region, op.else_region) for o in r.block.ops]
        return any(isinstance(o, loop.ForOp) for o in inner) and all(
            isinstance(o, loop.ForOp | loop.YieldOp) or o.dialect_name() == "arith" for o in inner
        )
    return isinstance(op, loop.ForOp | loop.CopyOp)


def _sources(walked: list[Operation]) -> tuple[list[str], list[str]]:
    """(distinct FILE:LINE of the ops, distinct ONNX nodes they came from), in order."""
    lines: dict[str, None] = {}
    nodes: dict[str, None] = {}
    for op in walked:
        loc = own_location(op)
        if loc is not None and loc.line > 0:
            lines[f"{loc.filename}:{loc.line}"] = None
        origin = get_origin(op)
        if origin is not None:
            nodes[origin] = None
    return list(lines), list(nodes)


def _entry(number: int, function: str, op: Operation) -> dict[str, Any]:
    walked = walk_ops(op)
    cost = nest_cost(op)
    origin = nest_origin(op)
    lines, nodes = _sources(walked)
    parallel = any(isinstance(o, loop.ForOp) and o.parallel is not None for o in walked)
    return {
        "name": f"{function}#{number}",
        "kind": "copy" if isinstance(op, loop.CopyOp) else "nest",
        "function": function,
        "sources": lines,
        "nodes": nodes,
        "flops": cost.flops if cost.sized else None,  # (None: sized at run time)
        "bytes": cost.bytes if cost.sized else None,
        "exact": cost.exact,
        "parallel": parallel,
        "schedules": list(origin.schedules) if origin else [],
        "tuned": bool(origin and origin.tuned),
    }


class KernelTable:
    """Kernel ids of a module's top-level ops and functions (module docstring)."""

    def __init__(self, module: ModuleOp) -> None:
        """Number the kernels before `outline_kernels` moves nests into functions of
        their own (it leaves one call in each nest's place: `rebind`)."""
        self.entries: list[dict[str, Any]] = []
        self.functions: dict[str, int] = {}
        self.places: dict[tuple[str, int, int], int] = {}
        self.ids: dict[Operation, int] = {}
        for func in module.body.block.ops:
            if not isinstance(func, loop.FuncOp):
                continue
            name = func.sym_name.data
            self.functions[name] = self._add({"name": name, "kind": "function", "function": name})
            number = 0
            for b, block in enumerate(func.body.blocks):
                for i, op in enumerate(block.ops):
                    if is_kernel(op):
                        self.places[(name, b, i)] = self._add(_entry(number, name, op))
                        number += 1

    def _add(self, entry: dict[str, Any]) -> int:
        entry["id"] = len(self.entries)
        self.entries.append(entry)
        return entry["id"]

    def rebind(self, module: ModuleOp) -> None:
        """Map the op now at each kernel's place (the nest, or the call replacing it)."""
        for func in module.body.block.ops:
            if not isinstance(func, loop.FuncOp):
                continue
            name = func.sym_name.data
            for b, block in enumerate(func.body.blocks):
                for i, op in enumerate(block.ops):
                    found = self.places.get((name, b, i))
                    if found is not None:
                        self.ids[op] = found

    def attach(self, module: ModuleOp, lowered: list[Operation]) -> None:
        """The event buffer's global and the kernel facts (module docstring)."""
        zero = IntegerAttr(0, i64)
        lowered.append(make(llvm.GlobalOp, i64, abi.PROFILE_BUFFER, "common", value=zero))
        module.attributes[abi.PROFILE] = StringAttr(json.dumps(self.entries))


class ProfileEmitter:
    """The marks half of the function emitter (it provides `emit`, `region`, ...)."""

    profile: KernelTable | None
    timespec: SSAValue | None
    region: Region

    def emit(self, op: Operation) -> SSAValue:
        raise NotImplementedError

    def declare(self, name: str, inputs: Sequence[Attribute], output: Attribute) -> None:
        raise NotImplementedError

    def constant(self, value: IntegerAttr | FloatAttr, t: Attribute) -> SSAValue:
        raise NotImplementedError  # provided by the function emitter

    def mark(self, kernel: int | None, phase: int) -> None:
        """Append (2 * kernel + phase, now) to the event buffer (module docstring)."""
        if kernel is None:
            return
        self.declare("clock_gettime", [i32, PTR], i32)
        ts = self._timespec()
        clock = const(self, time.CLOCK_MONOTONIC, i32)
        self.emit(make(llvm.CallOp, "clock_gettime", clock, ts, return_type=i32))
        sec = self.emit(make(llvm.LoadOp, ts, i64, alignment=8))
        nsec_slot = self.emit(make(llvm.GEPOp, ts, [1], i64, inbounds=True))
        nsec = self.emit(make(llvm.LoadOp, nsec_slot, i64, alignment=8))
        billion = const(self, 1_000_000_000, i64)
        now = self.emit(make(llvm.AddOp, self.emit(make(llvm.MulOp, sec, billion)), nsec))
        address = self.emit(make(llvm.AddressOfOp, abi.PROFILE_BUFFER, PTR))
        buffer = self.emit(
            make(llvm.IntToPtrOp, self.emit(make(llvm.LoadOp, address, i64, alignment=8)))
        )
        count = self.emit(make(llvm.LoadOp, buffer, i64, alignment=8))
        cap_slot = self.emit(make(llvm.GEPOp, buffer, [1], i64, inbounds=True))
        cap = self.emit(make(llvm.LoadOp, cap_slot, i64, alignment=8))
        one = const(self, 1, i64)
        last = self.emit(make(llvm.SubOp, cap, one))
        fits = icmp(self, "slt", count, cap)
        slot = self.emit(make(llvm.SelectOp, fits, count, last))
        two = const(self, 2, i64)
        word = self.emit(make(llvm.AddOp, self.emit(make(llvm.MulOp, slot, two)), two))
        at = self.emit(
            make(llvm.GEPOp, buffer, [llvm.GEP_USE_SSA_VAL], i64, ssa_indices=[word], inbounds=True)
        )
        self.emit(make(llvm.StoreOp, const(self, 2 * kernel + phase, i64), at, alignment=8))
        then = self.emit(make(llvm.GEPOp, at, [1], i64, inbounds=True))
        self.emit(make(llvm.StoreOp, now, then, alignment=8))
        self.emit(make(llvm.StoreOp, self.emit(make(llvm.AddOp, count, one)), buffer, alignment=8))

    def _timespec(self) -> SSAValue:
        """Two i64 stack words for `clock_gettime`, allocated once in the entry block."""
        if self.timespec is None:
            entry = self.region.blocks.first
            assert entry is not None, "marks are emitted after the entry block"
            two = make(llvm.ConstantOp, IntegerAttr(2, i64), i64)
            slots = make(llvm.AllocaOp, two, i64, alignment=16)
            if entry.first_op is None:
                entry.add_ops([two, slots])
            else:
                entry.insert_ops_before([two, slots], entry.first_op)
            self.timespec = slots.results[0]
        return self.timespec
