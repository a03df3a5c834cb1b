"""lower-loop-to-llvm: the `loop` level (+ arith/math) -> xDSL's `llvm` dialect."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from dlc.diagnostics import error_at, location_prefix
from dlc.dialects import abi, loop
from dlc.dialects import loop_memory as lm
from dlc.dialects.abi import CALL_DEPTH, STATUS, VAR_PREFIX
from dlc.dialects.loop_callgraph import recursive_functions
from dlc.dialects.loop_memory import MEMORY_OPS as RAW_MEMORY_OPS
from dlc.lowering.loop_to_llvm.arena import arena_alloc, arena_support
from dlc.lowering.loop_to_llvm.memory import lower_raw_memory
from dlc.lowering.loop_to_llvm.scalar import const, icmp, lower_scalar_op

PTR = llvm.LLVMPointerType()
OFFSET = loop.ARENA_OFFSET  # set by plan-memory on arena-placed allocs


def element_bytes(mtype: MemRefType, op: Operation) -> int:
    """Byte size of a memref element; other element types are rejected."""
    size = loop.element_bytes(mtype.element_type)
    if size is None:
        raise error_at(
            op, f"not supported by the code generator yet: {mtype.element_type} data type"
        )
    return size


def element_count(mtype: MemRefType) -> int:
    count = 1
    for dim in mtype.get_shape():
        count *= dim
    return count


@dataclass
class _Frame:
    """Ops of one region still to lower; `on_yield` handles its `loop.yield`."""

    ops: Iterator[Operation]
    on_yield: Callable[[loop.YieldOp], None] | None = None


MAX_CALL_DEPTH = 20_000
"""Nesting limit of recursive calls (deep enough for tests like even/odd 2000 deep;
small enough that typical frames stay well within an 8 MiB native stack)."""

STACK_UNIT = 256
"""A call counts as 1 + (bytes of its `allocateStack` slots) // STACK_UNIT calls towards
MAX_CALL_DEPTH: deep recursion through large frames traps before the native stack
overflows (20,000 units of 256 bytes stay within 5 MiB; a frame holds ≤ 2^20 bytes)."""


def call_weight(func: loop.FuncOp) -> int:
    """How many calls towards MAX_CALL_DEPTH one active call of `func` counts for."""
    frame = sum(op.size.data for op in func.walk() if isinstance(op, lm.StackAllocOp))
    return 1 + frame // STACK_UNIT


@dataclass
class StatusTable:
    """Messages of traps and bounds checks; `used` when the status global is needed."""

    bounds_check: bool = False
    messages: list[str] = field(default_factory=list)
    used: bool = False
    variables: dict[str, int] = field(default_factory=dict)
    depth_used: bool = False

    def code(self, kind: str, text: str) -> int:
        self.messages.append(f"{kind}\t{text}")
        return len(self.messages)


@dataclass
class _FuncEmitter:
    """Lowers one `loop.func` into the blocks of an `llvm.func`, without recursion.

    Structured ops become blocks: `loop.for` -> header(iv, iters) / body / exit(results),
    `loop.if` -> then / else / merge(results). A block joins the region when emission
    starts in it, so every value is defined in an earlier block than its uses.
    """

    externals: dict[str, llvm.LLVMFunctionType]
    region: Region = field(default_factory=Region)
    values: dict[SSAValue, SSAValue] = field(default_factory=dict)
    block: Block | None = None
    frames: list[_Frame] = field(default_factory=list)
    successors: dict[Block, Block] = field(default_factory=dict)
    status: StatusTable | None = None

    def emit(self, op: Operation) -> SSAValue:
        assert self.block is not None
        self.block.add_op(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def declare(self, name: str, inputs: Sequence[Attribute], output: Attribute) -> None:
        self.externals[name] = llvm.LLVMFunctionType(list(inputs), output)

    def start(self, block: Block) -> None:
        self.region.add_block(block)
        self.block = block

    def get(self, value: SSAValue) -> SSAValue:
        return self.values[value]

    def lower(self, func: loop.FuncOp, *, depth_guard: bool = False) -> Region:
        blocks = list(func.body.blocks)
        entry = Block(arg_types=[PTR] * len(func.args))
        self.successors = {blocks[0]: entry}
        self.successors.update((b, Block()) for b in blocks[1:])
        self.values.update(zip(func.args, entry.args, strict=True))
        overflow: Operation | None = None
        weight = call_weight(func)
        for block in blocks:  # the entry block (defining the buffers) comes first
            self.start(self.successors[block])
            if depth_guard and overflow is None:
                overflow = self.enter_depth_guard(func, weight)
            self.frames.append(_Frame(iter(block.ops)))
            while self.frames:
                op = next(self.frames[-1].ops, None)
                if op is None:
                    self.frames.pop()
                    continue
                self.lower_op(op)
        if overflow is not None:
            self.leave_depth_guard(overflow, weight)
        return self.region

    def depth_address(self) -> SSAValue:
        assert self.status is not None
        self.status.depth_used = True
        return self.emit(llvm.AddressOfOp(CALL_DEPTH, PTR))

    def enter_depth_guard(self, func: loop.FuncOp, weight: int) -> Operation:
        """At entry: trap when this call's `weight` does not fit under `MAX_CALL_DEPTH`,
        else count it. Returns the trap's `llvm.return` (the one that must not uncount)."""
        text = f"call depth limit exceeded ({MAX_CALL_DEPTH}) in @{func.sym_name.data}"
        address = self.depth_address()
        depth = self.emit(llvm.LoadOp(address, i64, alignment=8))
        full = icmp(self, "sgt", depth, const(self, MAX_CALL_DEPTH - weight, i64))
        overflow = self.trap_when(full, func, "trap", text)
        counted = self.emit(llvm.AddOp(depth, const(self, weight, i64)))
        self.emit(llvm.StoreOp(counted, address, alignment=8))
        return overflow

    def leave_depth_guard(self, overflow: Operation, weight: int) -> None:
        """Uncount the call before every `llvm.return` but the overflow trap's."""
        returns = [
            op for block in self.region.blocks for op in block.ops if isinstance(op, llvm.ReturnOp)
        ]
        for ret in returns:
            if ret is overflow:
                continue
            address = llvm.AddressOfOp(CALL_DEPTH, PTR)
            depth = llvm.LoadOp(address.result, i64, alignment=8)
            count = llvm.ConstantOp(IntegerAttr(weight, i64), i64)
            uncounted = llvm.SubOp(depth.dereferenced_value, count.result)
            store = llvm.StoreOp(uncounted.res, address.result, alignment=8)
            ret.parent_block().insert_ops_before([address, depth, count, uncounted, store], ret)  # type: ignore[union-attr]

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
                self.emit(llvm.ReturnOp())
            case loop.BrOp():
                self.emit(llvm.BrOp(self.successors[op.dest]))
            case loop.CondBrOp():
                then_block, else_block = (
                    self.successors[op.then_block],
                    self.successors[op.else_block],
                )
                self.emit(llvm.CondBrOp(self.get(op.cond), then_block, [], else_block, []))
            case loop.ExternCallOp():
                self.lower_extern_call(op)
            case loop.TrapOp():
                self.lower_trap(op)
            case loop.LoadOp():
                ptr, align = self.address(op, op.buffer, op.indices)
                self.values[op.res] = self.emit(llvm.LoadOp(ptr, op.res.type, alignment=align))
            case loop.StoreOp():
                ptr, align = self.address(op, op.buffer, op.indices)
                self.emit(llvm.StoreOp(self.get(op.value), ptr, alignment=align))
            case loop.AllocOp() | loop.DeallocOp() | loop.CopyOp() | loop.CallOp():
                self.lower_memory(op)
            case _ if type(op) in RAW_MEMORY_OPS:
                lower_raw_memory(self, op)
            case _:
                operands = [self.get(v) for v in op.operands]
                results = lower_scalar_op(op, operands, self)
                self.values.update(zip(op.results, results, strict=True))

    def lower_extern_call(self, op: loop.ExternCallOp) -> None:
        """A C call of an external symbol, scalars by value."""
        name = op.callee.data
        result = op.res[0].type if op.res else llvm.LLVMVoidType()
        inputs = [a.type for a in op.args]
        known = self.externals.get(name)
        if known is not None and known != llvm.LLVMFunctionType(inputs, result):
            raise error_at(op, f"extern function @{name} called with two different signatures")
        self.declare(name, inputs, result)
        args = [self.get(a) for a in op.args]
        call = llvm.CallOp(name, *args, return_type=None if not op.res else result)
        value = self.emit(call)
        if op.res:
            self.values[op.res[0]] = value

    def lower_for(self, op: loop.ForOp) -> None:
        """br header(lb, inits); header: iv < ub ? body : exit(iters); body ... br header."""
        iter_types = [v.type for v in op.iter_inits]
        header = Block(arg_types=[i64, *iter_types])
        body, exit_block = Block(), Block(arg_types=iter_types)
        inits = [self.get(v) for v in op.iter_inits]
        step = self.get(op.step)
        self.emit(llvm.BrOp(header, self.get(op.lb), *inits))
        self.start(header)
        iv, *iters = header.args
        in_range = icmp(self, "slt", iv, self.get(op.ub))
        self.emit(llvm.CondBrOp(in_range, body, [], exit_block, iters))
        self.start(body)
        self.values.update(zip(op.body.block.args, header.args, strict=True))

        def on_yield(yield_op: loop.YieldOp) -> None:
            next_iv = self.emit(llvm.AddOp(iv, step))
            self.emit(llvm.BrOp(header, next_iv, *[self.get(v) for v in yield_op.values]))
            self.start(exit_block)
            self.values.update(zip(op.res, exit_block.args, strict=True))

        self.frames.append(_Frame(iter(op.body.block.ops), on_yield))

    def lower_if(self, op: loop.IfOp) -> None:
        """cond_br cond, then, else; both branch to merge(results)."""
        merge = Block(arg_types=[r.type for r in op.res])
        then_block = Block()
        has_else = bool(op.else_region.blocks)
        else_block = Block() if has_else else merge
        self.emit(llvm.CondBrOp(self.get(op.cond), then_block, [], else_block, []))

        def finish(yield_op: loop.YieldOp) -> None:
            self.emit(llvm.BrOp(merge, *[self.get(v) for v in yield_op.values]))
            self.start(merge)
            self.values.update(zip(op.res, merge.args, strict=True))

        def then_done(yield_op: loop.YieldOp) -> None:
            if not has_else:
                finish(yield_op)
                return
            self.emit(llvm.BrOp(merge, *[self.get(v) for v in yield_op.values]))
            self.start(else_block)
            self.frames.append(_Frame(iter(op.else_region.block.ops), finish))

        self.start(then_block)
        self.frames.append(_Frame(iter(op.then_region.block.ops), then_done))

    def address(
        self, op: Operation, buffer: SSAValue, indices: Sequence[SSAValue]
    ) -> tuple[SSAValue, int]:
        """Element pointer `&buffer[indices]` (row-major GEP) and its alignment."""
        mtype = buffer.type
        assert isinstance(mtype, MemRefType)
        align = element_bytes(mtype, op)
        base = self.get(buffer)
        if not indices:
            return base, align
        shape = mtype.get_shape()
        linear = self.get(indices[0])
        for dim, index in zip(shape[1:], indices[1:], strict=True):
            scaled = self.emit(llvm.MulOp(linear, const(self, dim, i64)))
            linear = self.emit(llvm.AddOp(scaled, self.get(index)))
        if self.status is not None and self.status.bounds_check:
            linear = self.checked(op, linear, indices, shape)
        gep = llvm.GEPOp(
            base, [llvm.GEP_USE_SSA_VAL], mtype.element_type, ssa_indices=[linear], inbounds=True
        )
        return self.emit(gep), align

    def lower_memory(self, op: Operation) -> None:
        match op:
            case loop.AllocOp() if OFFSET in op.attributes:  # planned by plan-memory
                self.values[op.res] = arena_alloc(self, op)
            case loop.AllocOp():
                mtype = op.res.type
                align = op.align.data
                nbytes = element_count(mtype) * element_bytes(mtype, op)
                size = max(align, (nbytes + align - 1) // align * align)  # a multiple of align
                self.declare("aligned_alloc", [i64, i64], PTR)
                args = [const(self, align, i64), const(self, size, i64)]
                call = llvm.CallOp("aligned_alloc", *args, return_type=PTR)
                self.values[op.res] = self.trap_if_null(self.emit(call), op, size)
            case loop.DeallocOp():
                self.declare("free", [PTR], llvm.LLVMVoidType())
                self.emit(llvm.CallOp("free", self.get(op.buffer)))
            case loop.CopyOp():
                mtype = op.source.type
                nbytes = element_count(mtype) * element_bytes(mtype, op)
                args = [self.get(op.dest), self.get(op.source), const(self, nbytes, i64)]
                args.append(const(self, 0, i1))
                self.emit(llvm.CallIntrinsicOp("llvm.memcpy.p0.p0.i64", args, []))
            case loop.CallOp():
                buffers = [self.get(v) for v in op.buffers]
                self.emit(llvm.CallOp(op.callee.data, *buffers))
                self.return_if_status()

    def status_address(self) -> SSAValue:
        assert self.status is not None
        self.status.used = True
        return self.emit(llvm.AddressOfOp(STATUS, PTR))

    def return_if_status(self) -> None:
        """After a call: return at once when the callee trapped (status word set)."""
        if self.status is None:
            return
        word = self.emit(llvm.LoadOp(self.status_address(), i64, alignment=8))
        failed = icmp(self, "ne", word, const(self, 0, i64))
        leave, resume = Block(), Block()
        self.emit(llvm.CondBrOp(failed, leave, [], resume, []))
        self.start(leave)
        self.emit(llvm.ReturnOp())
        self.start(resume)

    def trap_when(self, failed: SSAValue, op: Operation, kind: str, message: str) -> Operation:
        """If `failed` (i1): record "FILE:LINE:COL: message" of `op` in the status word
        and return from the function (Python raises TrapError, or IndexError for kind
        "bounds"); otherwise continue. Returns the `llvm.return` of the failing path."""
        assert self.status is not None
        code = self.status.code(kind, location_prefix(op) + message)
        leave, resume = Block(), Block()
        self.emit(llvm.CondBrOp(failed, leave, [], resume, []))
        self.start(leave)
        self.emit(llvm.StoreOp(const(self, code, i64), self.status_address(), alignment=8))
        leaving = llvm.ReturnOp()
        self.emit(leaving)
        self.start(resume)
        return leaving

    def trap_if_null(self, pointer: SSAValue, op: Operation, nbytes: int) -> SSAValue:
        """A NULL from an allocator becomes a trap ("out of memory") instead of a pointer
        that later stores would write through."""
        if self.status is None:
            return pointer
        as_int = self.emit(llvm.PtrToIntOp(pointer, i64))
        failed = icmp(self, "eq", as_int, const(self, 0, i64))
        self.trap_when(failed, op, "trap", f"out of memory allocating {nbytes} bytes")
        return pointer

    def lower_trap(self, op: loop.TrapOp) -> None:
        """status = id of the message; return (the rest of the block is unreachable)."""
        if self.status is None:
            raise error_at(op, "not supported by the code generator yet: loop.trap")
        code = self.status.code("trap", op.message.data)
        self.emit(llvm.StoreOp(const(self, code, i64), self.status_address(), alignment=8))
        self.emit(llvm.ReturnOp())
        self.start(Block())

    def checked(
        self, op: Operation, linear: SSAValue, indices: Sequence[SSAValue], shape
    ) -> SSAValue:
        """Bounds check: an out-of-range index records the op's message in the status
        word (the first violation wins) and accesses element 0 instead."""
        assert self.status is not None
        bad = None
        for dim, index in zip(shape, indices, strict=True):
            out = icmp(self, "uge", self.get(index), const(self, dim, i64))
            bad = out if bad is None else self.emit(llvm.OrOp(bad, out))
        where = location_prefix(op)
        kind = "load from" if isinstance(op, loop.LoadOp) else "store to"
        text = f"{where}out-of-bounds {kind} a buffer of shape {list(shape)} ({op.name})"
        code = self.status.code("bounds", text)
        address = self.status_address()
        word = self.emit(llvm.LoadOp(address, i64, alignment=8))
        first = icmp(self, "eq", word, const(self, 0, i64))
        record = self.emit(llvm.AndOp(bad, first))
        self.emit(
            llvm.StoreOp(
                self.emit(llvm.SelectOp(record, const(self, code, i64), word)), address, alignment=8
            )
        )
        return self.emit(llvm.SelectOp(bad, const(self, 0, i64), linear))


def lower_func(
    func: loop.FuncOp,
    externals: dict[str, llvm.LLVMFunctionType],
    status: StatusTable | None = None,
    *,
    depth_guard: bool = False,
) -> llvm.FuncOp:
    """`loop.func @f(memrefs)` -> `llvm.func @f(ptr noalias, ...) -> void`; with
    `depth_guard` (a recursive function, needs `status`) it counts its active calls in
    `CALL_DEPTH` and traps past `MAX_CALL_DEPTH`."""
    body = _FuncEmitter(externals, status=status).lower(func, depth_guard=depth_guard)
    n_args = len(func.args)
    noalias = DictionaryAttr({"llvm.noalias": UnitAttr()})
    return llvm.FuncOp(
        func.sym_name.data,
        llvm.LLVMFunctionType([PTR] * n_args),
        linkage=llvm.LinkageAttr("external"),
        body=body,
        other_props={"arg_attrs": ArrayAttr([noalias] * n_args)},
    )


def _declaration(name: str, ftype: llvm.LLVMFunctionType) -> llvm.FuncOp:
    return llvm.FuncOp(name, ftype, linkage=llvm.LinkageAttr("external"))


@dataclass(frozen=True)
class LowerLoopToLLVMPass(ModulePass):
    """Lower every `loop.func` (with its arith/math scalar ops) to an `llvm.func`.

    Input: a module of `loop.func` ops (verified loop level). Output: only `llvm.func`
    ops: one per loop function (same name, `ptr noalias` args, void result) and the
    external declarations it calls (`aligned_alloc`, `free`, libm). Loops become blocks
    with block-argument phis; memref accesses become row-major GEPs with explicit
    alignment. An op the code generator cannot lower raises a located DiagnosticError
    "not supported by the code generator yet: <op name>".

    Status word (`STATUS`): `loop.trap` stores its message code and returns, and every
    `loop.call` returns right after a callee that set it. Recursive functions guard
    their call depth (`CALL_DEPTH`, `MAX_CALL_DEPTH`) and trap instead of overflowing
    the native stack. With `bounds_check`
    (`-p 'lower-loop-to-llvm{bounds_check=true}'`), every load and store checks its
    indices against the buffer shape (see `_FuncEmitter.checked`).
    """

    name = "lower-loop-to-llvm"

    bounds_check: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        externals: dict[str, llvm.LLVMFunctionType] = {}
        lowered: list[Operation] = []
        status = StatusTable(self.bounds_check)
        recursive = recursive_functions(op)
        for child in list(op.body.block.ops):
            if not isinstance(child, loop.FuncOp):
                raise error_at(child, f"not supported by the code generator yet: {child.name}")
            guard = child.sym_name.data in recursive
            lowered.append(lower_func(child, externals, status, depth_guard=guard))
            support = arena_support(child)  # plan-memory's arena, if any
            lowered.extend(support)
            if support:
                externals["aligned_alloc"] = llvm.LLVMFunctionType([i64, i64], PTR)
        defined = {f.sym_name.data for f in lowered if isinstance(f, llvm.FuncOp)}
        for name, ftype in externals.items():
            if name not in defined:
                lowered.append(_declaration(name, ftype))
        for name in status.variables:
            slot = VAR_PREFIX + name
            lowered.append(llvm.GlobalOp(i64, slot, "common", value=IntegerAttr(0, i64)))
        if status.variables:
            op.attributes[abi.VARS] = DictionaryAttr(
                {name: IntegerAttr(size, i64) for name, size in status.variables.items()}
            )
        if status.depth_used:
            lowered.append(llvm.GlobalOp(i64, CALL_DEPTH, "common", value=IntegerAttr(0, i64)))
            op.attributes[abi.RECURSIVE] = ArrayAttr([StringAttr(n) for n in sorted(recursive)])
        if status.used:
            lowered.append(llvm.GlobalOp(i64, STATUS, "common", value=IntegerAttr(0, i64)))
            op.attributes[abi.MESSAGES] = ArrayAttr([StringAttr(m) for m in status.messages])
        for child in list(op.body.block.ops):
            child.detach()
            child.erase()
        op.body.block.add_ops(lowered)
