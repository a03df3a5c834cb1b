"""`FuncEmitter`: lowers one `loop.func` (with its arith/math scalar ops) into the blocks
of an `llvm.func`, without recursion; `lower_loop_to_llvm.py` runs it on every function.
Its parallel loops, buffers and raw memory ops are lowered by `parallel.py`,
`buffers.py` and `memory.py`, its scalar ops by `arith_ops.py`."""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    FloatAttr,
    IntegerAttr,
    MemRefType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from dlc.analysis.walk import walk_ops
from dlc.diagnostics import error_at
from dlc.dialects import abi, loop
from dlc.dialects import loop_memory as lm
from dlc.dialects.abi import function_symbol
from dlc.dialects.loop_memory import MEMORY_OPS as RAW_MEMORY_OPS
from dlc.lowering import prebuilt
from dlc.lowering.loop_to_llvm.arith_ops import lower_scalar_op
from dlc.lowering.loop_to_llvm.buffers import BufferEmitter
from dlc.lowering.loop_to_llvm.chunks import split_chunks
from dlc.lowering.loop_to_llvm.context import StatusTable
from dlc.lowering.loop_to_llvm.memory import lower_raw_memory
from dlc.lowering.loop_to_llvm.parallel import (
    SPLIT_CHUNK,
    ParallelEmitter,
    can_outline,
)
from dlc.lowering.loop_to_llvm.profile import BEGIN, END, KernelTable, ProfileEmitter
from dlc.lowering.loop_to_llvm.scalar import const, icmp
from dlc.lowering.prebuilt import make

PTR = llvm.LLVMPointerType()


@dataclass
class _Frame:
    """Ops of one region still to lower; `on_yield` handles its `loop.yield`."""

    ops: Iterator[Operation]
    on_yield: Callable[[loop.YieldOp], None] | None = None


@dataclass
class FuncEmitter(ParallelEmitter, BufferEmitter, ProfileEmitter):
    """Lowers one `loop.func` into the blocks of an `llvm.func`, without recursion.

    Structured ops become blocks: `loop.for` -> header(iv, iters) / body / exit(results),
    `loop.if` -> then / else / merge(results). A block joins the region when emission
    starts in it, so every value is defined in an earlier block than its uses. The
    call context (`ctx`, the first argument) is handled by `ContextEmitter`.
    """

    externals: dict[str, llvm.LLVMFunctionType]
    status: StatusTable = field(default_factory=StatusTable)
    name: str = ""
    openmp: bool = False  # outline parallel loops for GOMP_parallel (parallel.py)
    outlined: list[Operation] = field(default_factory=list)
    region: Region = field(default_factory=Region)
    values: dict[SSAValue, SSAValue] = field(default_factory=dict)
    block: Block | None = None
    frames: list[_Frame] = field(default_factory=list)
    successors: dict[Block, Block] = field(default_factory=dict)
    order: dict[Block, int] = field(default_factory=dict)  # loop-level block -> position
    arena: SSAValue | None = None
    split_ops: int = 0  # functions of more ops have their top-level nests outlined
    split_chunk: int = SPLIT_CHUNK  # ops per outlined run
    split: bool = False  # outline runs of top-level nests (a large function; parallel.py)
    constants: dict[tuple[object, Attribute], SSAValue] = field(default_factory=dict)
    chunks: dict[Hashable, str] = field(default_factory=dict)  # runs outlined (parallel.py)
    walks: dict[Operation, list[Operation]] = field(default_factory=dict)  # chunks.py
    profile: KernelTable | None = None  # timing marks around kernels (profile.py)
    timespec: SSAValue | None = None
    function_id: int | None = None  # this function's profile id: marks around its call

    def emit(self, op: Operation) -> SSAValue:
        assert self.block is not None
        self.block.add_op(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def constant(self, value: IntegerAttr | FloatAttr, t: Attribute) -> SSAValue:
        # floats by their bits: 0.0 == -0.0 and NaN != NaN as Python floats
        bits = struct.pack("<d", value.value.data) if isinstance(value, FloatAttr) else value
        key = (bits, t)
        found = self.constants.get(key)
        if found is not None:
            return found
        op = make(llvm.ConstantOp, value, t)
        entry = self.region.blocks.first
        assert entry is not None
        if entry.first_op is None:
            entry.add_op(op)
        else:
            entry.insert_op_before(op, entry.first_op)
        self.constants[key] = op.result
        return op.result

    def declare(self, name: str, inputs: Sequence[Attribute], output: Attribute) -> None:
        self.externals[name] = llvm.LLVMFunctionType(list(inputs), output)

    def start(self, block: Block) -> None:
        self.region.add_block(block)
        self.block = block

    def get(self, value: SSAValue) -> SSAValue:
        return self.values[value]

    def child(self, openmp: bool = False, name: str = "") -> FuncEmitter:
        """An emitter for a function outlined from this one (parallel loops in it
        outlined only with `openmp`), named `name`: the functions it outlines in turn
        are named after it (`dlc.fn.f$nest1$omp0`), never after this one, whose own count
        would give a second `dlc.fn.f$omp0`."""
        return FuncEmitter(
            self.externals, self.status, name=name or self.name, openmp=openmp, profile=self.profile
        )

    def drain(self) -> None:
        """Lower the ops of the pending frames (what `lower_for` and friends pushed)."""
        while self.frames:
            inner = next(self.frames[-1].ops, None)
            if inner is None:
                self.frames.pop()
                continue
            self.lower_op(inner)

    def run_loop(self, op: loop.ForOp, begin: SSAValue, end: SSAValue) -> None:
        """Emit `op`'s body for iteration numbers j in [begin, end), iv = lb + j * step,
        and leave the emitter after the loop."""
        header, body, exit_block = Block(arg_types=[i64]), Block(), Block()
        self.emit(make(llvm.BrOp, header, begin))
        self.start(header)
        (j,) = header.args
        self.emit(make(llvm.CondBrOp, icmp(self, "slt", j, end), body, [], exit_block, []))
        self.start(body)
        offset = self.emit(prebuilt.mul(j, self.get(op.step)))
        self.values[op.iv] = self.emit(prebuilt.add(self.get(op.lb), offset))
        nested = any(isinstance(inner, loop.ForOp) for inner in op.body.walk())

        def on_yield(yield_op: loop.YieldOp) -> None:
            if nested:
                self.poll_interrupt(op)
            self.emit(make(llvm.BrOp, header, self.emit(make(llvm.AddOp, j, const(self, 1, i64)))))
            self.start(exit_block)

        self.frames.append(_Frame(iter(op.body.block.ops), on_yield))
        self.drain()

    def lower(self, func: loop.FuncOp, *, recursive: bool = False) -> Region:
        self.name = function_symbol(func.sym_name.data)
        blocks = list(func.body.blocks)
        entry = Block(arg_types=[PTR] * (1 + len(func.args)))
        self.ctx = entry.args[0]
        self.successors = {blocks[0]: entry}
        self.successors.update((b, Block()) for b in blocks[1:])
        self.order = {b: i for i, b in enumerate(blocks)}
        everything = walk_ops(func)
        self.split = len(everything) > self.split_ops
        self.values.update(zip(func.args, entry.args[1:], strict=True))
        self.start(entry)
        self.prologue(func, recursive, everything)
        if self.profile is not None:
            self.function_id = self.profile.functions.get(func.sym_name.data)
            self.mark(self.function_id, BEGIN)
        early = set(self.returns())  # the prologue's traps: nothing to give back yet
        for block in blocks:  # the entry block (defining the buffers) comes first
            if block is not blocks[0]:
                self.start(self.successors[block])
            items: list[Operation | list[Operation]] = [list(block.ops)]
            if self.split:
                items = split_chunks(block.ops, self.split_chunk, self.walks)
            elif self.profile is not None:
                items = list(block.ops)  # one at a time: marks go between them
            for item in items:
                if isinstance(item, list) and self.split:
                    self.lower_split_chunk(item)
                    continue
                self.lower_marked(item if isinstance(item, list) else [item])
        later = [r for r in self.returns() if r not in early]
        if recursive:
            self.leave_depth_guard(later)
        if self.arena is not None:
            self.leave_arena(later)
        return self.region

    def lower_marked(self, ops: list[Operation]) -> None:
        """Lower top-level `ops`, a kernel between timing marks (`profile.py`)."""
        kernel = self.profile.ids.get(ops[0]) if self.profile and len(ops) == 1 else None
        self.mark(kernel, BEGIN)
        self.frames.append(_Frame(iter(ops)))
        self.drain()
        self.mark(kernel, END)

    def prologue(self, func: loop.FuncOp, recursive: bool, ops: list[Operation]) -> None:
        """Guards and the arena block on entry (module docstring of context.py); `ops`:
        `walk_ops(func)`."""
        name = func.sym_name.data
        frame = sum(max(1, op.size.data) for op in ops if isinstance(op, lm.StackAllocOp))
        calls = any(isinstance(op, loop.CallOp | lm.ScalarCallOp) for op in ops)
        if recursive or calls or frame:
            self.stack_guard(func, name, frame)
        if recursive:
            self.enter_depth_guard(func, name)
            self.poll_interrupt(func)  # recursion may not end
        size = getattr(func.attributes.get(loop.ARENA_BYTES), "data", 0)
        if size:
            self.arena = self.enter_arena(size, func)

    def returns(self) -> list[Operation]:
        return [op for b in self.region.blocks for op in b.ops if isinstance(op, llvm.ReturnOp)]

    def lower_op(self, op: Operation) -> None:
        match op:
            case loop.ForOp():
                self.lower_for(op)
            case loop.IfOp():
                self.lower_if(op)
            case loop.YieldOp():
                handler = self.frames.pop().on_yield
                assert handler is not None
                handler(op)
            case loop.ReturnOp():
                self.mark(self.function_id, END)
                self.emit(make(llvm.ReturnOp))
            case loop.BrOp():
                self.poll_if_back_edge(op, [op.dest])
                self.emit(make(llvm.BrOp, self.successors[op.dest]))
            case loop.CondBrOp():
                self.poll_if_back_edge(op, [op.then_block, op.else_block])
                then_block, else_block = (
                    self.successors[op.then_block],
                    self.successors[op.else_block],
                )
                self.emit(make(llvm.CondBrOp, self.get(op.cond), then_block, [], else_block, []))
            case loop.ExternCallOp():
                self.lower_extern_call(op)
            case loop.TrapOp():
                self.lower_trap(op)
            case loop.LoadOp():
                ptr, align = self.address(op, op.buffer, op.indices)
                self.values[op.res] = self.emit(prebuilt.load(ptr, op.res.type, align))
            case loop.StoreOp():
                ptr, align = self.address(op, op.buffer, op.indices)
                self.emit(prebuilt.store(self.get(op.value), ptr, align))
            case loop.AllocOp() | loop.AllocSizedOp() | loop.DeallocOp() | loop.CopyOp():
                self.lower_memory(op)
            case loop.ConstCopyOp() | loop.ConstBufferOp():
                self.lower_memory(op)
            case loop.CallOp():
                self.lower_memory(op)
            case loop.VLoadOp() | loop.VStoreOp() | loop.BroadcastOp() | loop.ShuffleOp():
                self.lower_vector(op)
            case loop.VCmpfOp() | loop.VSelectOp():
                self.lower_vector(op)
            case _ if type(op) in RAW_MEMORY_OPS:
                lower_raw_memory(self, op)
            case _:
                operands = [self.get(v) for v in op.operands]
                results = lower_scalar_op(op, operands, self)
                self.values.update(zip(op.results, results, strict=True))

    def poll_if_back_edge(self, op: Operation, targets: list[Block]) -> None:
        """A branch to this block or an earlier one may close a loop that never ends."""
        block = op.parent_block()
        assert block is not None, "a branch is inside a block"
        here = self.order[block]
        if any(self.order[t] <= here for t in targets):
            self.poll_interrupt(op)

    def lower_extern_call(self, op: loop.ExternCallOp) -> None:
        """A C call of an external symbol, scalars by value, buffers by pointer."""
        name = op.callee.data
        result = op.res[0].type if op.res else llvm.LLVMVoidType()
        inputs = [PTR if isinstance(a.type, MemRefType) else a.type for a in op.args]
        known = self.externals.get(name)
        if known is not None and known != llvm.LLVMFunctionType(inputs, result):
            raise error_at(op, f"extern function @{name} called with two different signatures")
        self.declare(name, inputs, result)
        args = [self.get(a) for a in op.args]
        call = make(llvm.CallOp, name, *args, return_type=None if not op.res else result)
        value = self.emit(call)
        if op.res:
            self.values[op.res[0]] = value

    def lower_for(self, op: loop.ForOp) -> None:
        """br header(lb, inits); header: iv < ub ? body : exit(iters); body ... br header;
        a parallel loop is outlined for the OpenMP runtime (parallel.py)."""
        if self.openmp and can_outline(op):
            self.lower_parallel_for(op)
            return
        iter_types = [v.type for v in op.iter_inits]
        header = Block(arg_types=[i64, *iter_types])
        body, exit_block = Block(), Block(arg_types=iter_types)
        inits = [self.get(v) for v in op.iter_inits]
        step = self.get(op.step)
        self.emit(make(llvm.BrOp, header, self.get(op.lb), *inits))
        self.start(header)
        iv, *iters = header.args
        in_range = icmp(self, "slt", iv, self.get(op.ub))
        self.emit(make(llvm.CondBrOp, in_range, body, [], exit_block, iters))
        self.start(body)
        self.values.update(zip(op.body.block.args, header.args, strict=True))

        # One poll per outer iteration of a nest keeps long nests interruptible; a flat
        # loop (no inner loop: bounded, cheap work) is left alone, so it vectorizes.
        outermost = isinstance(op.parent_op(), loop.FuncOp) and any(
            isinstance(inner, loop.ForOp) for inner in op.body.walk()
        )

        def on_yield(yield_op: loop.YieldOp) -> None:
            if outermost:
                self.poll_interrupt(op)
            next_iv = self.emit(prebuilt.add(iv, step))
            self.emit(make(llvm.BrOp, header, next_iv, *[self.get(v) for v in yield_op.values]))
            self.start(exit_block)
            self.values.update(zip(op.res, exit_block.args, strict=True))

        self.frames.append(_Frame(iter(op.body.block.ops), on_yield))

    def lower_if(self, op: loop.IfOp) -> None:
        """cond_br cond, then, else; both branch to merge(results)."""
        merge = Block(arg_types=[r.type for r in op.res])
        then_block = Block()
        has_else = bool(op.else_region.blocks)
        else_block = Block() if has_else else merge
        self.emit(make(llvm.CondBrOp, self.get(op.cond), then_block, [], else_block, []))

        def finish(yield_op: loop.YieldOp) -> None:
            self.emit(make(llvm.BrOp, merge, *[self.get(v) for v in yield_op.values]))
            self.start(merge)
            self.values.update(zip(op.res, merge.args, strict=True))

        def then_done(yield_op: loop.YieldOp) -> None:
            if not has_else:
                finish(yield_op)
                return
            self.emit(make(llvm.BrOp, merge, *[self.get(v) for v in yield_op.values]))
            self.start(else_block)
            self.frames.append(_Frame(iter(op.else_region.block.ops), finish))

        self.start(then_block)
        self.frames.append(_Frame(iter(op.then_region.block.ops), then_done))

    def lower_trap(self, op: loop.TrapOp) -> None:
        """status = id of the message; return (the rest of the block is unreachable)."""
        code = self.status.code("trap", op.message.data)
        self.store_word(const(self, code, i64), abi.CTX_STATUS)
        self.emit(make(llvm.ReturnOp))
        self.start(Block())
